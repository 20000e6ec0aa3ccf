"""The per-round leaderboard in Valkey, and its rebuild from the database.

Key ``cm:lb:<RND id>`` is a sorted set: member = PLR id, score =
``total * 10**12 + (10**12 - 1 - offset_ms)`` where ``offset_ms`` is how long
after the round's creation the guess was submitted (both read from the
snowflake ids, so worker, rebuild and settlement agree without a clock). A
higher score is a better total, or the same total reached earlier. Updates
use ``ZADD … GT``, so applying the same guess twice, or an older worse one
late, changes nothing: the set only ever moves to a player's best. Scores
stay below 2**53, so the double Valkey stores is exact.

The database is the authority: ``rebuild`` recomputes a round's set from the
scored guesses and must give the same set as the live one.

Valkey can lose the last writes (a crash under ``appendfsync everysec``, a
failover: replication is asynchronous, a flush), and a lost ``ZADD`` has no
job left to bring it back. So the reaper calls :func:`heal` every second: a
board is re-applied from the database (``ZADD GT``, so it only moves up and
races no worker) when its *sentinel* -- ``{cm:lb:<RND>}:healed``, in the
board's own slot, holding the run_id of the server that had the board when
it was last healed -- is missing (a flush) or names another server (a
restart or a failover: a new run_id serves the slot).
"""
from __future__ import annotations

from dataclasses import dataclass

from datetime import timedelta

from django.utils import timezone

from echomq import cluster, ids
from echomq.contrib.django import get_client

from .models import Guess, Round

SCALE = 10**12


def key(round_id: str) -> str:
    return f"cm:lb:{round_id}"


def offset_ms(guess_id: str, round_id: str) -> int:
    """Milliseconds from the round's creation to the guess's submission."""
    return min(max(ids.minted_at_ms(guess_id) - ids.minted_at_ms(round_id), 0), SCALE - 1)


def composite(total: int, offset: int) -> int:
    return total * SCALE + (SCALE - 1 - offset)


def split(score: float) -> tuple[int, int]:
    """(total, offset_ms) back from a composite score."""
    total, rest = divmod(int(score), SCALE)
    return total, SCALE - 1 - rest


@dataclass(frozen=True)
class Standing:
    rank: int
    player_id: str
    total: int
    offset_ms: int


def _ranked(pairs) -> list[Standing]:
    ordered = sorted(pairs, key=lambda p: (-p[1], p[0]))
    out = []
    for i, (player, score) in enumerate(ordered, start=1):
        total, off = split(score)
        out.append(Standing(i, player, total, off))
    return out


def live(round_id: str, client=None) -> dict[str, int]:
    """The live set as {PLR id: composite score}."""
    client = client or get_client()
    return {m.decode(): int(s) for m, s in client.zrange(key(round_id), 0, -1, withscores=True)}


def top(round_id: str, n: int = 10, client=None) -> list[Standing]:
    """The best ``n`` standings from Valkey (callers decide whether a blind
    round's leaderboard may be shown yet)."""
    client = client or get_client()
    pairs = [(m.decode(), int(s)) for m, s in client.zrevrange(key(round_id), 0, n - 1, withscores=True)]
    return _ranked(pairs)


def public_top(rnd, n: int = 10, client=None) -> list[Standing]:
    """What a player may see: nothing for a blind round until it is revealed."""
    from .models import Round

    if rnd.kind == Round.Kind.BLIND and not rnd.revealed:
        return []
    return top(rnd.pk, n, client)


def from_db(round_id: str) -> dict[str, int]:
    """{PLR id: composite score} computed from the scored guesses."""
    best: dict[str, int] = {}
    rows = Guess.objects.filter(round_id=round_id, status=Guess.Status.SCORED).values_list("id", "player_id", "total")
    for guess_id, player_id, total in rows.iterator():
        score = composite(total, offset_ms(guess_id, round_id))
        if score > best.get(player_id, -1):
            best[player_id] = score
    return best


def standings_from_db(round_id: str) -> list[Standing]:
    """Ranked standings from the database: best total, then who reached it first."""
    return _ranked(from_db(round_id).items())


def rebuild(round_id: str, client=None) -> int:
    """Replace the live set with the one computed from the database (atomic)."""
    client = client or get_client()
    scores = from_db(round_id)
    pipe = client.pipeline(transaction=True)
    pipe.delete(key(round_id))
    if scores:
        pipe.zadd(key(round_id), scores)
    pipe.execute()
    return len(scores)


# Boards healed: open rounds, and rounds closed this recently (players still read them).
HEAL_CLOSED_FOR = timedelta(minutes=10)


def sentinel(round_id: str) -> str:
    """The board's sentinel key: its hash tag is the board key, so one slot."""
    return "{" + key(round_id) + "}:healed"


def boards_to_heal() -> list[str]:
    since = timezone.now() - HEAL_CLOSED_FOR
    return list(Round.objects.filter(status__in=(Round.Status.OPEN, Round.Status.REVEALING))
                .values_list("pk", flat=True)) + \
        list(Round.objects.filter(settled_at__gte=since).values_list("pk", flat=True))


def heal(round_ids=None, client=None) -> dict:
    """Re-apply from the database every board whose server may have lost
    writes since it was last healed (see the module doc). Cheap when nothing
    happened: one INFO per primary and one GET per board."""
    client = client or get_client()
    rids = boards_to_heal() if round_ids is None else list(round_ids)
    if not rids:
        return {"boards": 0, "healed": 0}
    runs = cluster.run_ids(client)
    pipe = client.pipeline(transaction=False)
    for rid in rids:
        pipe.get(sentinel(rid))
    healed, restored = [], {}
    for rid, mark in zip(rids, pipe.execute()):
        run_id = runs.get(cluster.node_of(client, key(rid)))
        if run_id is None or (mark is not None and mark.decode() == run_id):
            continue  # the same server has had it all along (or the topology is moving: next pass)
        scores = from_db(rid)
        tx = client.pipeline(transaction=True)  # board and sentinel share a slot
        if scores:
            tx.zadd(key(rid), scores, gt=True, ch=True)  # CH: how many players it moved
        tx.set(sentinel(rid), run_id)
        changed = tx.execute()[0] if scores else 0
        healed.append(rid)
        if changed:
            restored[rid] = changed
    # A board seen for the first time (a new round, a reaper's first pass)
    # that already matched the database is the normal case, not news: only
    # scores the database had to put back -- writes Valkey lost -- are told.
    if restored:
        import logging

        logging.getLogger("games.leaderboard").warning(
            "restored %d score(s) on %d board(s) from the database (Valkey lost writes: a restart, failover "
            "or flush): %s", sum(restored.values()), len(restored),
            ", ".join(f"{rid} ({n})" for rid, n in list(restored.items())[:10]))
    return {"boards": len(rids), "healed": len(healed), "restored": sum(restored.values())}
