"""Failover without losing a guess: the game's soak on a 3-primary,
3-replica Valkey Cluster with the guess queue in 6 shards. Mid-run one
primary is SIGKILLed; its replica takes over, the score workers, the reaper
and this process (all RedisCluster clients) follow the new topology, and
afterwards every soak invariant holds: each guess scored exactly once,
attempts and charges counted once, wallets equal ledgers, boards equal their
rebuild (the reaper heals what the failover lost), queue drained, no dead job."""
import os
import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from django.db.models import Count, Sum

from echomq import ShardedQueue
from echomq.cluster import node_of
from echomq.contrib import django as emq_django
from echomq.contrib.django import get_queue
from games import leaderboard, wallet
from games.guesses import submit
from games.models import Guess, LedgerEntry, RoundEntry

from .procs import Proc, wait_for, wait_for_progress

PLAYERS = int(os.environ.get("FAILOVER_PLAYERS", 20))
GUESSES = int(os.environ.get("FAILOVER_GUESSES", 400))
SHARDS = int(os.environ.get("FAILOVER_SHARDS", 6))


@pytest.fixture
def on_cluster(valkey_cluster, settings, monkeypatch):
    """Point this process and the worker processes at the cluster."""
    settings.ECHOMQ = {**settings.ECHOMQ, "URL": valkey_cluster.url, "CLUSTER": True,
                       "QUEUES": {"cm": {"shards": SHARDS}}}
    monkeypatch.setenv("VALKEY_CLUSTER", "1")
    monkeypatch.setenv("CM_QUEUE_SHARDS", str(SHARDS))
    emq_django.reset_client(valkey_cluster.url, cluster=True)
    client = emq_django.get_client()
    client.flushall()
    yield valkey_cluster
    emq_django.reset_client()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_failover_of_a_primary_mid_soak_loses_no_guess(on_cluster, make_player, make_round, tmp_path, capsys):
    cluster = on_cluster
    rng = random.Random(13)
    players = [make_player(f"fail{i:02d}", keys=GUESSES) for i in range(PLAYERS)]
    rounds = [make_round(prize_pool=100), make_round(kind="blind", prize_pool=100),
              make_round(currency="clips", guess_price=0)]
    plan, made = [], set()
    while len(plan) < GUESSES:
        rnd, player = rng.choice(rounds), rng.choice(players)
        guess = rng.sample(rnd.keyboard, 6)  # six distinct emojis, as submit asks
        if guess == rnd.secret:  # a 600 would close a classic round mid-run
            guess[0], guess[1] = guess[1], guess[0]
        if (player.pk, rnd.pk, tuple(guess)) not in made:  # nor may a player repeat a guess
            made.add((player.pk, rnd.pk, tuple(guess)))
            plan.append((player, rnd, guess))

    q = get_queue("cm")
    assert isinstance(q, ShardedQueue) or SHARDS == 1
    url_node = cluster.url.split("//")[1].rsplit("/", 1)[0]
    # The victim: a primary serving some of cm's shards (not the node named in
    # VALKEY_URL, which processes starting later would need to reach).
    victim = next(int(n.rsplit(":", 1)[1]) for n in (node_of(q.client, s.k_meta) for s in getattr(q, "shards", [q]))
                  if n != url_node)
    workers = [Proc(["run_scoreworker", "--concurrency", "2", "--lease-ms", "2000", "--beat-ms", "200"],
                    cluster.url, tmp_path, f"worker{i}") for i in range(2)]
    reaper = Proc(["run_reaper", "--interval-ms", "100", "--max-stalls", "50", "--relay-after-s", "2",
                   "--heal-every-s", "0.5"], cluster.url, tmp_path, "reaper")
    wait_for(lambda: all(w.ready("consumer scoreworker/cm started") for w in workers), timeout=60,
             what="the score workers to start")
    started = time.monotonic()
    killed = threading.Event()
    failover_s = []

    def one(n_item):
        n, (player, rnd, guess) = n_item
        try:
            if n == GUESSES // 3 and not killed.is_set():
                killed.set()
                cluster.kill(victim)
                t = time.monotonic()
                threading.Thread(target=lambda: (wait_for(lambda: victim not in cluster.primary_ports() and
                                                          len(cluster.primary_ports()) == 3, timeout=60,
                                                          what="a replica to take over"),
                                                 failover_s.append(time.monotonic() - t)), daemon=True).start()
            return submit(player, rnd.pk, guess).pk
        finally:
            connection.close()

    try:
        with ThreadPoolExecutor(6) as pool:
            submitted = list(pool.map(one, enumerate(plan)))
        wait_for(lambda: failover_s, timeout=60, what="the failover")

        def drained():
            c = q.counts()
            scored = Guess.objects.filter(status="scored").count()
            return scored == GUESSES and c["pending"] + c["active"] + c["scheduled"] == 0

        try:
            wait_for_progress(drained, lambda: Guess.objects.filter(status="scored").count(),
                              stall_s=90, cap_s=400, what="every guess scored and the queue drained")
        except AssertionError as exc:
            stuck = [(g.id, g.job_id, g.player_id, q.job(g.job_id)) for g in Guess.objects.exclude(status="scored")]
            raise AssertionError(f"{exc}; counts {q.counts()}; unscored {stuck}") from None
        wait_for(lambda: all(leaderboard.live(r.pk) == leaderboard.from_db(r.pk) for r in rounds),
                 timeout=15, what="every board equal to its rebuild")
        wall_s = time.monotonic() - started
    finally:
        codes = [p.terminate() for p in (*workers, reaper)]
        if not cluster.alive(victim):  # it comes back as a replica of its successor
            cluster.start_node(victim)
    logs = "\n".join(p.output() for p in (*workers, reaper))

    assert len(set(submitted)) == GUESSES == Guess.objects.count()
    assert Guess.objects.filter(status="scored").count() == GUESSES
    assert q.counts()["dead"] == 0, logs[-5000:]
    per_player = dict(Guess.objects.values_list("player_id").annotate(n=Count("id")))
    attempts = dict(RoundEntry.objects.values_list("player_id").annotate(n=Sum("attempts")))
    assert attempts == per_player
    assert {(e.round_id, e.player_id): e.attempts for e in RoundEntry.objects.all()} == \
        dict(Counter(Guess.objects.values_list("round_id", "player_id")))
    assert LedgerEntry.objects.filter(reason="guess").count() == Guess.objects.filter(price__gt=0).count()
    for rnd in rounds:
        assert leaderboard.live(rnd.pk) == leaderboard.from_db(rnd.pk), rnd.pk
    assert wallet.mismatched_wallets() == []
    assert codes == [0, 0, 0], logs[-5000:]
    lost = logs.count("lost Valkey")
    with capsys.disabled():
        print(f"\nfailover soak: {GUESSES} guesses by {PLAYERS} players on {connection.vendor}, cm in {SHARDS} "
              f"shards over 3 primaries; primary :{victim} SIGKILLed after {GUESSES // 3} submits, replica "
              f"promoted {failover_s[0]:.1f}s later; wall {wall_s:.1f}s; 'lost Valkey' log lines {lost}; "
              f"relayed: {logs.count('relay: re-sent')} passes; boards restored: {logs.count('restored ')} passes")
