"""The pure linear scoring engine.

One pass over the six positions of a guess: an emoji absent from the secret
scores 0 (MISS); present at secret position j, guessed at position i, it
scores ``100 - 20 * |i - j|``. The total is out of 600. No I/O, no search, no
state, so the worker, settlement and the tests all get the same answer.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

SIZE = 6
MAX_TOTAL = 100 * SIZE
LABELS = ("EXACT", "ADJACENT", "NEAR", "NEAR", "FAR", "MAX")
MISS = "MISS"


@dataclass(frozen=True, slots=True)
class Mark:
    """How one position of a guess scored."""

    position: int
    emoji: str
    found_at: int | None  # the emoji's position in the secret, None when absent
    points: int
    label: str

    def as_dict(self) -> dict:
        return {"position": self.position, "emoji": self.emoji, "found_at": self.found_at,
                "points": self.points, "label": self.label}


@dataclass(frozen=True, slots=True)
class Result:
    total: int
    percentage: int
    marks: tuple[Mark, ...]

    @property
    def perfect(self) -> bool:
        return self.total == MAX_TOTAL

    def breakdown(self) -> list[dict]:
        return [m.as_dict() for m in self.marks]


def score(secret: Sequence[str], guess: Sequence[str]) -> Result:
    """Score ``guess`` against ``secret`` (six distinct emojis).

    Emojis are opaque strings (a multi-codepoint sequence such as 🐕‍🦺 is
    one emoji); a guess may repeat an emoji, each occurrence scored alone.
    """
    if len(secret) != SIZE or len(set(secret)) != SIZE:
        raise ValueError("the secret must be six distinct emojis")
    if len(guess) != SIZE:
        raise ValueError("a guess is exactly six emojis")
    where = {emoji: j for j, emoji in enumerate(secret)}
    marks = []
    for i, emoji in enumerate(guess):
        j = where.get(emoji)
        if j is None:
            marks.append(Mark(i, emoji, None, 0, MISS))
        else:
            d = abs(i - j)
            marks.append(Mark(i, emoji, j, 100 - 20 * d, LABELS[d]))
    total = sum(m.points for m in marks)
    return Result(total, round(total / MAX_TOTAL * 100), tuple(marks))
