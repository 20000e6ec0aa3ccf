"""What a round page shows of the other players, from Valkey only.

The round page and its poll must not pay extra SQL for this, so everything
here reads keys the scoring path already keeps, plus two small ones:

* ``cm:lb:<RND>`` (``games.leaderboard``): how many players have a score and
  the board around you;
* ``{cm:lb:<RND>}:act``, a sorted set of guess ids scored at (ms): "3
  guesses in the last minute", in the board's hash slot. Written by
  :func:`record` in the same round trip as the board's ``ZADD GT`` (``ZADD
  NX``, so a redelivered job counts once), and trimmed to the window there;
* ``cm:ver:<RND>:<PLR>``, bumped when that player's guess is scored (same
  round trip), and ``cm:ver:<RND>``, bumped when the round closes
  (``touch``): with a 10-second time bucket they make the poll's ETag, so
  an idle poll answers 304 without reading the round or the guesses;
* ``cm:names``, a hash PLR id -> username: a player's page view sets their
  own name (the view already has it; at most once a minute per process),
  so neighbours' names are read without a query. A name never set (a player who only used the API) is read
  from the database once and then kept. Each process also keeps the names
  it read for a minute, so a page of a busy round usually costs one round
  trip here: one script call (``_SNAPSHOT``) reads the counts, your rank,
  the top and your neighbours.

Valkey down: ``snapshot`` returns None and the page simply shows less.
"""
from __future__ import annotations

import logging
import time

import redis

from echomq import UNAVAILABLE
from echomq.contrib.django import get_client

from . import leaderboard, rides, scripts

log = logging.getLogger("games.live")

ACTIVITY_WINDOW_MS = 60_000
NAMES = "cm:names"
TOP = 5          # the head of the board shown on the round page
AROUND = 2       # neighbours either side of you


VERSION_TTL_S = 86_400
ETAG_BUCKET_S = 10  # "in the last minute" decays with time: answer in full at least this often


def clock() -> float:
    """Wall time for the ETag buckets (a function, so a test can hold it still)."""
    return time.time()


def activity_key(round_id: str) -> str:
    """In the board's hash slot (``{cm:lb:<RND>}``), so one script reads both."""
    return "{" + leaderboard.key(round_id) + "}:act"


def version_key(round_id: str, player_id: str = "") -> str:
    """The round's version (bumped when it closes), or one player's in it
    (bumped when one of their guesses is scored)."""
    return f"cm:ver:{round_id}:{player_id}" if player_id else f"cm:ver:{round_id}"


def touch(round_id: str, client=None) -> None:
    """Mark the round changed (settled, voided) so every poll answers in
    full; never raises -- at worst the poll notices within ETAG_BUCKET_S."""
    try:
        client = client or get_client()
        client.incr(version_key(round_id))
        client.expire(version_key(round_id), VERSION_TTL_S)
    except Exception as exc:
        log.warning("round %s version not bumped (%s); polls catch up within %ss", round_id, exc, ETAG_BUCKET_S)


def etag(round_id: str, player_id: str, client=None, now: float | None = None,
         ride: rides.Ride | None = None) -> str | None:
    """A weak ETag for a player's poll of a round. It changes at once when
    one of the player's guesses is scored or the round closes, and every
    ETAG_BUCKET_S for the rest (other players' scores, recent activity): so
    a busy round costs each idle poller one full answer per bucket, not one
    per poll. None when Valkey does not answer (the poll answers in full).
    ``ride``: the versions, read with the session (``etag_riding``)."""
    try:
        if ride is not None and ride.meta == (round_id, player_id):
            if ride.error is not None:
                raise ride.error
            mine, closed = ride.reply
        else:
            mine, closed = (client or get_client()).mget(version_key(round_id, player_id), version_key(round_id))
    except UNAVAILABLE:
        return None
    bucket = int((clock() if now is None else now) // ETAG_BUCKET_S)
    return f'W/"{int(mine or 0)}.{int(closed or 0)}.{bucket}"'


def etag_riding(request, who) -> rides.Ride | None:
    """The poll's versions, made to go out with the session's read."""
    round_id = request.resolver_match.kwargs.get("round_id")
    if not round_id:
        return None
    return rides.Ride(("MGET", version_key(round_id, who[1]), version_key(round_id)), who,
                      meta=(round_id, who[1]))


def record_activity(pipe, round_id: str, guess_id: str, now_ms: int | None = None, player_id: str = "") -> None:
    """Queue the activity writes for one scored guess on ``pipe`` (and bump
    its player's version, so their poll answers in full at once)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    key = activity_key(round_id)
    pipe.zadd(key, {guess_id: now_ms}, nx=True)
    pipe.zremrangebyscore(key, 0, now_ms - ACTIVITY_WINDOW_MS)
    pipe.pexpire(key, ACTIVITY_WINDOW_MS * 2)
    if player_id:
        pipe.incr(version_key(round_id, player_id))
        pipe.expire(version_key(round_id, player_id), VERSION_TTL_S)


def record_activity_many(pipe, scored, now_ms: int | None = None) -> None:
    """As :func:`record_activity` for a batch of ``(round_id, player_id,
    guess_id)``: one ZADD, trim and expiry per round, one version bump per
    (round, player)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    per_round: dict[str, dict[str, int]] = {}
    players: set[tuple[str, str]] = set()
    for round_id, player_id, guess_id in scored:
        per_round.setdefault(round_id, {})[guess_id] = now_ms
        players.add((round_id, player_id))
    for round_id, members in per_round.items():
        key = activity_key(round_id)
        pipe.zadd(key, members, nx=True)
        pipe.zremrangebyscore(key, 0, now_ms - ACTIVITY_WINDOW_MS)
        pipe.pexpire(key, ACTIVITY_WINDOW_MS * 2)
    for round_id, player_id in sorted(players):
        pipe.incr(version_key(round_id, player_id))
        pipe.expire(version_key(round_id, player_id), VERSION_TTL_S)


def record(round_id: str, player_id: str, guess_id: str, total: int, client=None) -> None:
    """Apply one scored guess to the round's board (``ZADD GT``: idempotent,
    order-independent) and count it in the recent activity, in one round trip."""
    client = client or get_client()
    pipe = client.pipeline(transaction=False)
    pipe.zadd(leaderboard.key(round_id),
              {player_id: leaderboard.composite(total, leaderboard.offset_ms(guess_id, round_id))}, gt=True)
    record_activity(pipe, round_id, guess_id, player_id=player_id)
    pipe.execute()


def record_many(scored, client=None, *, counters: dict[str, int] | None = None, stats_key: str = "") -> None:
    """Apply many scored guesses ``(round_id, player_id, guess_id, total)``
    in one pipeline: one ``ZADD GT`` per round with each player's best of
    the batch, the rounds' recent activity, and the ``counters`` as
    ``HINCRBY``s on ``stats_key``."""
    client = client or get_client()
    scored = list(scored)
    best: dict[str, dict[str, int]] = {}
    for round_id, player_id, guess_id, total in scored:
        score = leaderboard.composite(total, leaderboard.offset_ms(guess_id, round_id))
        members = best.setdefault(round_id, {})
        if score > members.get(player_id, -1):
            members[player_id] = score
    pipe = client.pipeline(transaction=False)
    for round_id, members in best.items():
        pipe.zadd(leaderboard.key(round_id), members, gt=True)
    record_activity_many(pipe, [(r, p, g) for r, p, g, _ in scored])
    for field, n in (counters or {}).items():
        if n:
            pipe.hincrby(stats_key, field, n)
    if len(pipe):
        pipe.execute()


NAME_MEMO_S = 60.0   # how long this process trusts a name it has read
NAME_MEMO_MAX = 50_000
_name_memo: dict[str, tuple[str, float]] = {}


def _names(client, player_ids: list[str]) -> dict[str, str]:
    """Usernames for the board rows: from this process's memo (a name is
    kept ``NAME_MEMO_S`` seconds: a renamed player shows the old name that
    long), else one HMGET of ``cm:names``, else the database."""
    now = time.monotonic()
    out: dict[str, str] = {}
    ask = []
    for pid in player_ids:
        memo = _name_memo.get(pid)
        if memo is not None and memo[1] > now:
            out[pid] = memo[0]
        else:
            ask.append(pid)
    if not ask:
        return out
    got = dict(zip(ask, client.hmget(NAMES, ask)))
    missing = [p for p, n in got.items() if n is None]
    if missing:  # once per player ever: afterwards the hash has it
        from .models import Player

        found = dict(Player.objects.filter(pk__in=missing).values_list("pk", "user__username"))
        if found:
            client.hset(NAMES, mapping=found)
        got.update({p: found[p] for p in found})
    if len(_name_memo) > NAME_MEMO_MAX:
        _name_memo.clear()
    for pid, name in got.items():
        if name is not None:
            out[pid] = name.decode() if isinstance(name, bytes) else name
            _name_memo[pid] = (out[pid], now + NAME_MEMO_S)
    return {pid: out.get(pid, "(gone)") for pid in player_ids}


def _rows(client, pairs, first_rank: int, me: str) -> list[dict]:
    names = _names(client, [m.decode() for m, _ in pairs])
    out = []
    for i, (member, score) in enumerate(pairs):
        pid = member.decode()
        total, _ = leaderboard.split(score)
        out.append({"rank": first_rank + i, "name": names[pid], "total": total, "me": pid == me})
    return out


_SNAPSHOT = scripts.load("live_snapshot")  # lua/games/live_snapshot.lua: counts, top and neighbours


def _pairs(flat) -> list[tuple[bytes, float]]:
    return [(flat[i], float(flat[i + 1])) for i in range(0, len(flat), 2)]


def _keep_name(client, player_id: str, username: str) -> None:
    """Put the player's own name in ``cm:names`` for the others' boards, at
    most once a minute per process (it rarely changes)."""
    memo = _name_memo.get(player_id)
    if memo is None or memo[0] != username or memo[1] <= time.monotonic():
        client.hset(NAMES, player_id, username)
        _name_memo[player_id] = (username, time.monotonic() + NAME_MEMO_S)


# round id -> whether its page showed the board last time (classic, or a
# revealed blind round): what a ride asks for before the round is read.
_SHOWS_BOARD_MAX = 10_000
_shows_board: dict[str, bool] = {}


def _snapshot_args(round_id: str, player_id: str, board: bool, now_ms: int) -> tuple[list, list]:
    return ([leaderboard.key(round_id), activity_key(round_id)],
            [player_id, now_ms - ACTIVITY_WINDOW_MS, TOP, AROUND, "1" if board else "0"])


def snapshot_riding(request, who) -> rides.Ride | None:
    """The round page's snapshot, made to go out with the session's read
    (``games.rides``). It asks for the board only where the round's page
    showed it before: a sealed blind round's board is never read early."""
    round_id = request.resolver_match.kwargs.get("round_id")
    if not round_id:
        return None
    board = _shows_board.get(round_id, False)
    keys, args = _snapshot_args(round_id, who[1], board, int(time.time() * 1000))
    return rides.Ride(("EVALSHA", _SNAPSHOT.sha, len(keys), *keys, *args), who, script=_SNAPSHOT,
                      meta=(round_id, board))


def snapshot(rnd, player_id: str, username: str, *, board: bool, client=None,
             ride: rides.Ride | None = None) -> dict | None:
    """Players with a score, guesses scored in the last minute and (when
    ``board``, i.e. not a sealed blind round) the top of the board and your
    neighbours: one script call, no SQL in steady state -- or none, when
    ``ride`` brought the same call's reply with the session's read."""
    client = client or get_client()
    if len(_shows_board) >= _SHOWS_BOARD_MAX:
        _shows_board.clear()
    _shows_board[rnd.pk] = board
    try:
        _keep_name(client, player_id, username)
        if ride is not None and ride.meta == (rnd.pk, board) and ride.who[1] == player_id:
            if ride.error is not None:
                raise ride.error
            reply = ride.reply
        else:
            reply = _SNAPSHOT(client, *_snapshot_args(rnd.pk, player_id, board, int(time.time() * 1000)))
        players, recent, rank, top, start, near = reply
        out = {"players": players, "recent": recent, "rank": None if rank < 0 or not board else rank + 1,
               "top": [], "around": []}
        if board:
            out["top"] = _rows(client, _pairs(top), 1, player_id)
            if start >= 0:
                out["around"] = _rows(client, _pairs(near), start + 1, player_id)
        return out
    except UNAVAILABLE as exc:
        log.warning("live snapshot of %s skipped, Valkey unreachable: %s", rnd.pk, exc)
        return None


def players_in(round_ids: list[str], client=None) -> dict[str, int]:
    """Players with a score per round (one pipelined round trip), for the
    lobby and the landing page; {} when Valkey does not answer."""
    if not round_ids:
        return {}
    try:
        pipe = (client or get_client()).pipeline(transaction=False)
        for rid in round_ids:
            pipe.zcard(leaderboard.key(rid))
        return dict(zip(round_ids, pipe.execute()))
    except UNAVAILABLE as exc:
        log.warning("player counts skipped, Valkey unreachable: %s", exc)
        return {}


def activity_words(n: int) -> str:
    if n == 0:
        return "no guesses in the last minute"
    return f"{n} guess{'' if n == 1 else 'es'} in the last minute"


def snapshot_many(round_id: str, player_ids, *, board: bool, client=None) -> dict[str, dict] | None:
    """:func:`snapshot`'s panel for each of ``player_ids`` in one round trip
    (one script call each, pipelined): what a push sends every open round
    page of a round when someone scores. None when Valkey does not answer."""
    client = client or get_client()
    player_ids = list(dict.fromkeys(player_ids))
    now_ms = int(time.time() * 1000)
    try:
        replies = _snapshots(client, [_snapshot_args(round_id, pid, board, now_ms) for pid in player_ids])
        out = {}
        for pid, (players, recent, rank, top, start, near) in zip(player_ids, replies):
            snap = {"players": players, "recent": recent, "rank": None if rank < 0 or not board else rank + 1,
                    "top": [], "around": [], "recent_words": activity_words(recent)}
            if board:
                snap["top"] = _rows(client, _pairs(top), 1, pid)
                if start >= 0:
                    snap["around"] = _rows(client, _pairs(near), start + 1, pid)
            out[pid] = snap
        return out
    except UNAVAILABLE as exc:
        log.warning("live panels of %s skipped, Valkey unreachable: %s", round_id, exc)
        return None


def _snapshots(client, calls: list[tuple[list, list]]) -> list:
    """``_SNAPSHOT`` once per (keys, args), pipelined; loaded and sent again
    after a NOSCRIPT reply. On a cluster each call goes to its board's node
    (both keys share the board's slot)."""
    if not calls:
        return []
    route = getattr(client, "get_node_from_key", None)
    for attempt in (1, 2):
        pipe = client.pipeline(transaction=False)
        for keys, args in calls:
            opts = {"target_nodes": route(keys[0])} if route is not None else {}
            pipe.execute_command("EVALSHA", _SNAPSHOT.sha, len(keys), *keys, *args, **opts)
        replies = pipe.execute(raise_on_error=False)
        if attempt == 1 and any(isinstance(r, redis.exceptions.NoScriptError) for r in replies):
            client.script_load(_SNAPSHOT.source)
            continue
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return replies
    return []  # not reached: the second attempt returns or raises
