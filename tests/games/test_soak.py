"""End-to-end soak: 50 players, 1,000 guesses, three score-worker processes,
one SIGKILLed and restarted every half second. Afterwards every guess is
scored exactly once, attempts equal guesses per player, every leaderboard
equals its rebuild, every wallet equals its ledger."""
import os
import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from django.db.models import Count, Sum

from echomq.contrib.django import get_client, get_queue
from games import leaderboard, wallet
from games.guesses import submit
from games.models import Guess, LedgerEntry, RoundEntry
from games.workers import STATS_KEY

from .procs import Proc, wait_for, wait_for_progress

PLAYERS = int(os.environ.get("SOAK_PLAYERS", 50))
GUESSES = int(os.environ.get("SOAK_GUESSES", 1000))
KILL_EVERY_S = 0.5


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_soak_kill_workers_every_half_second(valkey_server, make_player, make_round, tmp_path, capsys):
    rng = random.Random(4)
    players = [make_player(f"soak{i:02d}", keys=GUESSES) for i in range(PLAYERS)]
    rounds = [make_round(prize_pool=100), make_round(prize_pool=100), make_round(kind="blind", prize_pool=100),
              make_round(currency="clips", guess_price=0)]
    plan, made = [], set()
    while len(plan) < GUESSES:
        rnd, player = rng.choice(rounds), rng.choice(players)
        guess = rng.sample(rnd.keyboard, 6)  # six distinct emojis, as submit asks
        if guess == rnd.secret:  # a 600 would close a classic round mid-soak
            guess[0], guess[1] = guess[1], guess[0]
        if (player.pk, rnd.pk, tuple(guess)) not in made:  # nor may a player repeat a guess
            made.add((player.pk, rnd.pk, tuple(guess)))
            plan.append((player, rnd, guess))

    q = get_queue("cm")
    worker_args = ["run_scoreworker", "--concurrency", "2", "--lease-ms", "1500", "--beat-ms", "200"]
    workers = [Proc(worker_args, valkey_server.url, tmp_path, f"worker{i}") for i in range(3)]
    reaper = Proc(["run_reaper", "--interval-ms", "100", "--max-stalls", "50", "--relay-after-s", "3"],
                  valkey_server.url, tmp_path, "reaper")
    started = time.monotonic()
    stop_killing, kills = threading.Event(), Counter()

    def killer():
        # Every half second, SIGKILL one worker that is consuming (killing one
        # still importing Django would test nothing) and start it again. The
        # last consuming worker is spared, so a loaded machine, where a
        # restart takes seconds, still makes progress; those ticks are counted.
        while not stop_killing.wait(KILL_EVERY_S):
            up = [w for w in workers if w.ready("consumer scoreworker/cm started")]
            if len(up) < 2:
                kills["skipped"] += 1
                continue
            victim = rng.choice(up)
            victim.kill()
            kills["kills"] += 1
            victim.start()

    def one(item):
        try:
            player, rnd, guess = item
            return submit(player, rnd.pk, guess).pk
        finally:
            connection.close()

    killer_thread = threading.Thread(target=killer, daemon=True)
    try:
        # The guesses go in, and the killing starts, once every worker
        # consumes: on a loaded machine, where Django takes seconds to start,
        # the run was otherwise over before two workers were up, and nothing
        # was killed.
        wait_for(lambda: all(w.ready("consumer scoreworker/cm started") for w in workers), timeout=120,
                 what="the score workers to start")
        started = time.monotonic()
        killer_thread.start()
        with ThreadPoolExecutor(8) as pool:
            submitted = list(pool.map(one, plan))
        submit_s = time.monotonic() - started

        def drained():
            c = q.counts()
            scored = Guess.objects.filter(status="scored").count()
            return scored == GUESSES and c["pending"] + c["active"] + c["scheduled"] == 0

        wait_for_progress(drained, lambda: Guess.objects.filter(status="scored").count(),
                          stall_s=120, cap_s=900, what="every guess scored and the queue drained")
        wall_s = time.monotonic() - started
    finally:
        stop_killing.set()
        if killer_thread.ident is not None:
            killer_thread.join()
        codes = [p.terminate() for p in (*workers, reaper)]
    logs = "\n".join(p.output() for p in (*workers, reaper))

    # every guess scored exactly once
    assert len(set(submitted)) == GUESSES == Guess.objects.count()
    assert Guess.objects.filter(status="scored").count() == GUESSES
    assert q.counts()["dead"] == 0, logs[-5000:]
    per_player = dict(Guess.objects.values_list("player_id").annotate(n=Count("id")))
    attempts = dict(RoundEntry.objects.values_list("player_id").annotate(n=Sum("attempts")))
    assert attempts == per_player
    per_entry = {(e.round_id, e.player_id): e.attempts for e in RoundEntry.objects.all()}
    expect = Counter(Guess.objects.values_list("round_id", "player_id"))
    assert per_entry == dict(expect)
    # charged exactly once
    paid = Guess.objects.filter(price__gt=0).count()
    assert LedgerEntry.objects.filter(reason="guess").count() == paid
    # leaderboards and wallets agree with the database
    for rnd in rounds:
        assert leaderboard.live(rnd.pk) == leaderboard.from_db(rnd.pk), rnd.pk
    assert wallet.mismatched_wallets() == []

    stats = {k.decode(): int(v) for k, v in get_client().hgetall(STATS_KEY).items()}
    redeliveries = stats.get("deliveries", 0) - stats.get("scored", 0)
    with capsys.disabled():  # the figures belong in the CI log, not only in a failure report
        print(f"\nsoak: {GUESSES} guesses by {PLAYERS} players on {connection.vendor}; "
              f"{kills['kills']} worker kills ({kills['skipped']} ticks skipped with under two workers up); wall {wall_s:.1f}s (submits {submit_s:.1f}s); "
              f"deliveries {stats.get('deliveries', 0)}, redeliveries {redeliveries}; "
              f"completed {q.counts()['completed']}; worker starts {sum(w.starts for w in workers)}")
    assert kills["kills"] >= 2
    assert [c for c in codes[-1:]] == [0]
