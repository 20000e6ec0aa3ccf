"""Guesses enqueued by the Node client (clients/node) are scored by the
Python score worker, a real ``run_scoreworker`` process: the queue's keys,
scripts and payload are the contract, not the runtime that sent them."""
from __future__ import annotations

import json

import pytest

from echomq.contrib.django import get_queue
from games.models import Guess

from ..nodeclient import run
from .procs import Proc, wait_for

pytestmark = pytest.mark.slow
S = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]


@pytest.mark.django_db(transaction=True)
def test_guesses_enqueued_by_the_node_client_are_scored_by_run_scoreworker(valkey_server, make_player,
                                                                            make_round, tmp_path):
    rnd = make_round(secret=S)
    guesses = []
    for player in (make_player(), make_player()):
        for shift in range(1, 4):  # queued guesses with their minted JOB ids, not enqueued by Python
            emojis = S[shift:] + S[:shift]
            guesses.append(Guess.objects.create(player=player, round=rnd, emojis_sent=emojis, emojis_final=emojis,
                                                currency="keys", price=0))
    lines = [json.dumps({"id": g.job_id, "lane": g.player_id, "payload": json.dumps({"guess": g.id, "round": rnd.id})})
             for g in guesses]
    out = run("enqueue", "--url", valkey_server.url, "--queue", "cm", input="\n".join(lines))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [w for g in guesses for w in (g.job_id, "enqueued")]
    assert get_queue("cm").counts()["pending"] == 6

    worker = Proc(["run_scoreworker", "--lease-ms", "5000", "--beat-ms", "200"], valkey_server.url, tmp_path, "score")
    try:
        wait_for(lambda: Guess.objects.filter(pk__in=[g.pk for g in guesses], status="scored").count() == 6,
                 timeout=60, what="the Node client's guesses to be scored")
    finally:
        code = worker.terminate()
    assert code == 0, worker.output()
    c = get_queue("cm").counts()
    assert (c["pending"], c["active"], c["completed"]) == (0, 0, 6)
    scored = {g.pk: g for g in Guess.objects.filter(pk__in=[g.pk for g in guesses])}
    assert all(g.scored_at is not None for g in scored.values())
    assert "Traceback" not in worker.output()
