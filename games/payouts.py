"""How a round pays: the one home of the payout rules.

Settlement calls ``split`` to pay; the rules page, the round page and the
notifications call ``explain`` and ``place`` to say what was (or will be)
paid. Both read the same functions and constants, so the words cannot drift
from the money.

The rules, per kind (``standings`` are ranked best total first, a tie
ordered by who reached that total first -- see ``games.leaderboard``):

* classic: the best total takes the pool. Players *tied* at the best total
  share it evenly by integer division; the remainder of that division (the
  dust) stays with the house. Who reached it first does not matter here.
* blind: the top K players with a total above 0 (K = number of weights, or
  fewer players) get ``pool * w // sum(used weights)``; a tie is broken by
  who reached the total first, so tied players get different shares; the
  dust goes to rank 1.
* in both, nobody with a total above 0 means nobody is paid (the house keeps
  the pool).
"""
from __future__ import annotations

import functools

from dataclasses import dataclass

from .engine import MAX_TOTAL

CLASSIC, BLIND = "classic", "blind"
# Where the rounding dust goes, named once for the code and the words.
DUST = {CLASSIC: "house", BLIND: "rank 1"}
# Whether players tied on total share (classic) or are ordered by time (blind).
TIES_SHARE = {CLASSIC: True, BLIND: False}


@dataclass(frozen=True)
class _Fake:
    """A stand-in standing for ``explain``'s worked examples."""

    rank: int
    player_id: str
    total: int


def classic(standings, pool: int) -> tuple[list[tuple], int]:
    """[(standing, diamonds)], house. Tied best totals share evenly."""
    if not standings or standings[0].total == 0 or pool == 0:
        return [], pool
    best = standings[0].total
    winners = [s for s in standings if s.total == best]
    share = pool // len(winners)
    return [(s, share) for s in winners if share], pool - share * len(winners)


def blind(standings, pool: int, weights: list[int]) -> tuple[list[tuple], int]:
    """[(standing, diamonds)], house. Top K by rank (ties to the earliest)."""
    ranked = [s for s in standings if s.total > 0][: len(weights)]
    if not ranked or pool == 0:
        return [], pool
    used = weights[: len(ranked)]
    shares = [pool * w // sum(used) for w in used]
    shares[0] += pool - sum(shares)  # the dust to rank 1
    return [(s, amt) for s, amt in zip(ranked, shares) if amt], 0


def split(kind: str, standings, pool: int, weights: list[int] | None = None) -> tuple[list[tuple], int]:
    """The payouts of a round of ``kind``; what settlement pays."""
    if kind == CLASSIC:
        return classic(standings, pool)
    return blind(standings, pool, list(weights or []))


def place(kind: str, standings, standing) -> tuple[int, int]:
    """(place, how many share it) as a player should be told it.

    Blind ranks are distinct (ties go to the earliest), so the place is the
    rank. In a classic round tied totals share a place -- the standard
    competition ranking (1, 1, 3) -- since they share the prize too."""
    if not TIES_SHARE[kind]:
        return standing.rank, 1
    higher = sum(1 for s in standings if s.total > standing.total)
    same = sum(1 for s in standings if s.total == standing.total)
    return higher + 1, same


def row(kind: str, standings, standing, prize: int) -> dict:
    """One payout as settlement records it in ``Round.result``: ``rank`` is
    the leaderboard order, ``place`` and ``tied`` what the player is told."""
    where, tied = place(kind, standings, standing)
    return {"rank": standing.rank, "place": where, "tied": tied, "player": standing.player_id,
            "total": standing.total, "prize": prize}


def told(kind: str, payout: dict) -> str:
    """How a payout reads to its winner, e.g. "You tied for #1 (2 players
    share the pool) with 160/600 and won 💎 10."; older results without a
    ``place`` read by rank."""
    where, tied = payout.get("place", payout["rank"]), payout.get("tied", 1)
    head = f"You tied for #{where} ({tied} players share the pool)" if tied > 1 else f"You placed #{where}"
    return f"{head} with {payout['total']}/{MAX_TOTAL} and won 💎 {payout['prize']}."


def _fake(totals: list[int]) -> list[_Fake]:
    return [_Fake(i, f"p{i}", t) for i, t in enumerate(totals, start=1)]


def explain(kind: str, pool: int, weights: list[int] | None = None) -> dict:
    """What a round of ``kind`` with this pool pays, in words and worked
    examples computed by the very functions that pay.

    ``summary`` is one line for the round page; ``lines`` the full rule;
    ``table`` a list of (label, diamonds) examples."""
    weights = list(weights or [])
    if kind == CLASSIC:
        one, _ = classic(_fake([MAX_TOTAL - 100, 300]), pool)
        two, _ = classic(_fake([400, 400, 100]), pool)
        three, house3 = classic(_fake([400, 400, 400]), pool)
        share1 = one[0][1] if one else 0
        summary = (f"Best total takes the pool (💎 {pool}); players tied at the best total split it evenly.")
        lines = [
            "The player with the best total takes the whole pool.",
            "Players tied at the best total split the pool evenly; who reached it first does not matter "
            "(the leaderboard lists them in that order, but they share one place and one prize).",
            f"The leftover of an uneven split stays with the {DUST[CLASSIC]}; so does the pool if nobody "
            "scores above 0.",
            "A perfect 600 ends the round at once.",
        ]
        table = [("Alone at the top", share1),
                 ("2 tied at the top, each", two[0][1] if two else 0),
                 ("3 tied at the top, each", three[0][1] if three else 0)]
        if house3:
            table.append(("3 tied: leftover to the house", house3))
        return {"kind": kind, "summary": summary, "lines": lines, "table": table,
                "ties_share": True, "dust": DUST[kind], "weights": None}
    paid, _ = blind(_fake([MAX_TOTAL - 100 * i for i in range(len(weights))]), pool, weights)
    shown = "/".join(str(w) for w in weights)
    summary = (f"Top {len(weights)} share the pool (💎 {pool}) by weights {shown}; "
               f"equal totals go to whoever reached them first.")
    lines = [
        "No scores are shown while the round runs; at the end the secret is revealed and checked "
        "against the commitment published at the start.",
        f"The top {len(weights)} players with a total above 0 are paid by the weights {shown}: "
        "each gets pool × weight ÷ the sum of the weights used, rounded down.",
        "Equal totals are ordered by who reached the total first, so they get different shares.",
        "With fewer players than weights, only their weights are used, so they share the whole pool.",
        f"The rounding leftover goes to {DUST[BLIND]}; nobody above 0 means the pool stays with the house.",
    ]
    table = [(f"#{s.rank}", amt) for s, amt in paid]
    return {"kind": kind, "summary": summary, "lines": lines, "table": table,
            "ties_share": False, "dust": DUST[kind], "weights": weights}


@functools.lru_cache(maxsize=1024)
def _explained(kind: str, pool: int, weights: tuple[int, ...] | None) -> dict:
    return explain(kind, pool, list(weights) if weights is not None else None)


def explain_round(rnd) -> dict:
    """``explain`` for this round's kind, pool and weights, worked out once
    per process for each (every round page and lobby row shows it). The
    answer is shared: read it, do not change it."""
    return _explained(rnd.kind, rnd.prize_pool, tuple(rnd.weights) if rnd.kind == BLIND else None)
