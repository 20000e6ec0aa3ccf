"""Management commands: in-process ones, and the real worker processes."""
import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from games import leaderboard
from games.guesses import submit
from games.models import EmojiSet, Guess, LedgerEntry, Notification, Player, Round

from .procs import Proc, wait_for

S = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]


def run(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_seed_demo_is_idempotent(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    first = run("seed_demo")
    assert "password" in first and "admin" in first
    counts = (EmojiSet.objects.count(), Player.objects.count(), Round.objects.count(), LedgerEntry.objects.count())
    second = run("seed_demo")
    assert "still open" in second
    assert counts == (EmojiSet.objects.count(), Player.objects.count(), Round.objects.count(),
                      LedgerEntry.objects.count())
    assert EmojiSet.objects.count() >= 3
    for es in EmojiSet.objects.all():
        assert len(es.emojis) >= 36 and len(set(es.emojis)) == len(es.emojis)
    assert "🐕‍🦺" in EmojiSet.objects.get(slug="animals").emojis
    kinds = set(Round.objects.filter(status="open").values_list("kind", flat=True))
    assert kinds == {"classic", "blind"}
    assert (tmp_path / "demo-admin.password").exists()


@pytest.mark.django_db
def test_create_round_grant_and_rebuild(make_player, emoji_set):
    out = run("create_round", "--set", "animals", "--kind", "blind", "--minutes", "5", "--keyboard-size", "30")
    rnd = Round.objects.get()
    assert rnd.kind == "blind" and len(rnd.keyboard) == 30 and rnd.commitment in out
    assert all(e not in out.split("keyboard")[0] for e in rnd.secret)
    p = make_player("erin", keys=0)
    assert "+7 keys -> 7" in run("grant", "erin", "keys", "7", "--note", "ticket 1")
    with pytest.raises(CommandError):
        run("grant", "erin", "keys", "-99")
    g = submit(p, rnd, rnd.keyboard[:6])
    from games.workers import score_guess
    from .test_worker import job_for
    score_guess(job_for(g))
    assert "matches" in run("rebuild_leaderboards", "--check")
    leaderboard.get_client().delete(leaderboard.key(rnd.pk))
    with pytest.raises(SystemExit):
        run("rebuild_leaderboards", "--check")
    assert "was different" in run("rebuild_leaderboards")
    assert leaderboard.live(rnd.pk) == leaderboard.from_db(rnd.pk)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_worker_processes_score_settle_and_notify(valkey_server, make_player, make_round, tmp_path):
    """Real processes: scoreworker, notifier, task worker, reaper. A perfect classic guess
    closes its round; a blind round closes on its timer; a guess sent while
    its enqueue was lost is relayed; SIGTERM stops everything cleanly."""
    a, b = make_player(keys=10), make_player(keys=10)
    classic = make_round(secret=S, prize_pool=50)
    blind = make_round(kind="blind", secret=S, prize_pool=80, duration=timedelta(seconds=4))
    procs = [
        Proc(["run_scoreworker", "--concurrency", "2", "--lease-ms", "3000"], valkey_server.url, tmp_path, "score"),
        Proc(["run_notifier"], valkey_server.url, tmp_path, "notify"),
        Proc(["run_tasks"], valkey_server.url, tmp_path, "tasks"),
        Proc(["run_reaper", "--interval-ms", "200", "--relay-after-s", "1"], valkey_server.url, tmp_path, "reaper"),
    ]
    try:
        submit(a, blind, S)
        submit(b, blind, S[::-1])
        submit(b, classic, S[::-1])
        lost = Guess.objects.create(player=b, round=classic, emojis_sent=S[1:] + S[:1],
                                    emojis_final=S[1:] + S[:1], currency="keys", price=0)  # never enqueued
        submit(a, classic, S)
        wait_for(lambda: Round.objects.get(pk=classic.pk).status == "settled", timeout=60, what="perfect close")
        wait_for(lambda: Round.objects.get(pk=blind.pk).status == "settled", timeout=60, what="timer close")
        wait_for(lambda: Notification.objects.count() == 4, timeout=60, what="notifications")
        wait_for(lambda: Guess.objects.get(pk=lost.pk).status == "scored", timeout=60, what="relay")
        assert LedgerEntry.objects.filter(reason="prize", reference=classic.pk).get().player_id == a.pk
        assert Round.objects.get(pk=blind.pk).result["payouts"][0]["player"] == a.pk
    finally:
        codes = [p.terminate() for p in procs]
    logs = "\n".join(p.output() for p in procs)
    assert codes == [0, 0, 0, 0], logs
    assert "scored" in procs[0].output() and "stopped" in procs[0].output()
    assert "Traceback" not in logs, logs


def test_a_beat_longer_than_the_socket_timeout_is_refused(settings):
    """A parked worker's BLPOP waits up to --beat-ms; past the client's
    socket timeout it would time out (and mark the server hung) instead."""
    from django.core.management import CommandError, call_command

    settings.ECHOMQ = {**settings.ECHOMQ, "SOCKET_TIMEOUT": 3.0}
    with pytest.raises(CommandError, match="must be shorter than ECHOMQ"):
        call_command("run_scoreworker", "--beat-ms", "3000")
