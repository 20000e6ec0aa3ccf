"""--metrics-port on the long-running commands: real processes, scraped
over HTTP after a few jobs, with the figures they must show."""
from __future__ import annotations

import pytest

from echomq.embedded import free_port
from games.guesses import submit
from games.models import Guess
from tests.games.procs import Proc, wait_for
from tests.tasks import jobs

from .conftest import documented, ours, samples, scrape, value
from .test_endpoint import RATE, SITE

pytestmark = pytest.mark.slow

S = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]
WORKER = {"echomq_worker_jobs_handled_total", "echomq_worker_handler_seconds", "echomq_worker_claim_to_start_seconds",
          "echomq_worker_reconnects_total", "echomq_worker_jobs_in_hand"}


def started(args, valkey_server, tmp_path, name):
    port = free_port()
    proc = Proc([*args, "--metrics-port", str(port)], valkey_server.url, tmp_path, name)
    wait_for(lambda: scrape(port) or proc.popen.poll() is not None, timeout=60, what=f"{name}'s metrics")
    assert proc.popen.poll() is None, proc.output()
    return proc, port


def test_run_tasks_exports_what_it_did(valkey_server, tmp_path):
    proc, port = started(["run_tasks", "--queue", "default"], valkey_server, tmp_path, "tasks")
    try:
        results = [jobs.add.enqueue(i, 1) for i in range(3)] + [jobs.always_fails.enqueue("m")]
        for r in results:
            wait_for(lambda r=r: r.refresh() or r.is_finished, timeout=30, what="the tasks")

        def settled():  # results are written before the acks that the counters follow
            found = samples(scrape(port))
            done = sum(value(found, "echomq_worker_jobs_handled_total", queue="default", outcome=o)
                       for o in ("completed", "dead"))
            return found if done == 4 else None

        found = wait_for(settled, timeout=30, what="the last acks")
    finally:
        assert proc.terminate() == 0
    outcomes = {o: value(found, "echomq_worker_jobs_handled_total", queue="default", outcome=o)
                for o in ("completed", "retried", "dead", "dropped", "stale", "cancelled")}
    assert outcomes == {"completed": 3, "retried": 1, "dead": 1, "dropped": 0, "stale": 0, "cancelled": 0}
    assert value(found, "echomq_worker_handler_seconds_count", queue="default") == 5
    assert value(found, "echomq_worker_claim_to_start_seconds_count", queue="default") == 5
    assert value(found, "echomq_worker_reconnects_total", queue="default") == 0
    assert value(found, "echomq_worker_jobs_in_hand", queue="default") == 0
    assert ours(found) == WORKER and WORKER <= documented()


@pytest.mark.django_db(transaction=True)
def test_score_notifier_and_reaper_processes_export_theirs(valkey_server, make_player, make_round, tmp_path):
    score, score_port = started(["run_scoreworker"], valkey_server, tmp_path, "score")
    notifier, notifier_port = started(["run_notifier"], valkey_server, tmp_path, "notify")
    reaper, reaper_port = started(["run_reaper", "--interval-ms", "100"], valkey_server, tmp_path, "reaper")
    try:
        rnd = make_round(secret=S)
        guesses = [submit(make_player(keys=5), rnd, S[::-1]) for _ in range(2)]
        try:
            wait_for(lambda: Guess.objects.filter(pk__in=[g.pk for g in guesses], status="scored").count() == 2,
                     timeout=60, what="the guesses to be scored")
        except AssertionError:
            raise AssertionError(score.output()[-3000:]) from None
        wait_for(lambda: value(samples(scrape(reaper_port)), "echomq_reaper_passes_total") >= 2, timeout=30,
                 what="reaper passes")
        wait_for(lambda: value(samples(scrape(score_port)), "echomq_worker_jobs_handled_total", queue="cm",
                               outcome="completed") == 2, timeout=30, what="the acks")
        scored, notified, reaped = (samples(scrape(p)) for p in (score_port, notifier_port, reaper_port))
    finally:
        codes = [p.terminate() for p in (score, notifier, reaper)]
    assert codes == [0, 0, 0]
    assert value(scored, "codemojex_guess_submit_to_scored_seconds_count") == 2
    assert 0 < value(scored, "codemojex_guess_submit_to_scored_seconds_sum") < 60
    assert value(scored, "echomq_worker_jobs_handled_total", queue="cm", outcome="completed") == 2
    assert ours(scored) == WORKER | {"codemojex_guess_submit_to_scored_seconds"}
    assert value(notified, "echomq_worker_jobs_in_hand", queue="cm.settle") == 0
    assert ours(notified) == WORKER
    assert ours(reaped) == {"echomq_reaper_passes_total", "echomq_reaper_jobs_total"}
    assert value(reaped, "echomq_reaper_jobs_total", queue="cm", action="returned") == 0
    # the doc lists every name, and no other (RATE: a rate-limited queue's, tested in test_endpoint)
    assert documented() == ours(scored | notified | reaped) | SITE | RATE


def test_in_hand_counts_a_running_task(valkey_server, valkey, tmp_path):
    proc, port = started(["run_tasks", "--queue", "default"], valkey_server, tmp_path, "tasks")
    try:
        result = jobs.gated.enqueue("g")
        assert valkey.blpop(["test:started:g"], timeout=30), proc.output()
        during = samples(scrape(port))
        valkey.rpush("test:gate:g", "1")
        wait_for(lambda: result.refresh() or result.is_finished, timeout=30, what="the task")
        wait_for(lambda: value(samples(scrape(port)), "echomq_worker_jobs_handled_total", queue="default",
                               outcome="completed") == 1, timeout=30, what="the ack")
        after = samples(scrape(port))
    finally:
        assert proc.terminate() == 0
    assert value(during, "echomq_worker_jobs_in_hand", queue="default") == 1
    assert value(during, "echomq_worker_claim_to_start_seconds_count", queue="default") == 1
    assert value(during, "echomq_worker_handler_seconds_count", queue="default") == 0  # still running
    assert value(after, "echomq_worker_jobs_in_hand", queue="default") == 0
    assert value(after, "echomq_worker_handler_seconds_count", queue="default") == 1
