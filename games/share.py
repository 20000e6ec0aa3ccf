"""After the round: per-position feedback and the spoiler-free share card.

One square per position, by how far the emoji sat from its place in the
secret (the engine's labels), so a card says how close each guess came
without saying which emojis: the emojis themselves are never on it.
"""
from __future__ import annotations

from . import engine

SQUARES = {"EXACT": "🟩", "ADJACENT": "🟨", "NEAR": "🟧", "FAR": "🟥", "MAX": "🟥", engine.MISS: "⬜"}
WORDS = {"EXACT": "right place", "ADJACENT": "1 place off", "NEAR": "2–3 places off", "FAR": "4 places off",
         "MAX": "5 places off", engine.MISS: "not in the secret"}
# The scoring legend, one row per distance, derived from the engine.
LEGEND = [(SQUARES[label], "right place" if d == 0 else f"{d} place{'s' if d > 1 else ''} off", 100 - 20 * d)
          for d, label in enumerate(engine.LABELS)] + [(SQUARES[engine.MISS], WORDS[engine.MISS], 0)]
MAX_ROWS = 12  # a card stays short enough to paste anywhere


def marks(breakdown: list[dict]) -> list[dict]:
    """The per-position marks of a scored guess, for the reveal."""
    return [{"emoji": m["emoji"], "points": m["points"], "label": m["label"], "square": SQUARES[m["label"]],
             "words": WORDS[m["label"]]} for m in breakdown]


def grid_row(breakdown: list[dict]) -> str:
    return "".join(SQUARES[m["label"]] for m in breakdown)


def card(rnd, guesses, link: str = "") -> str:
    """The copyable card: title, guesses and best, one square row per
    guess (oldest first, the last ``MAX_ROWS``), and ``link``, the round's
    public watch page, where whoever reads it sees how the round went. No
    emoji of the secret."""
    scored = sorted((g for g in guesses if g.breakdown), key=lambda g: g.id)
    if not scored:
        return ""
    best = max(g.total for g in scored)
    head = f"Codemojex · {rnd.title or rnd.pk} ({rnd.kind})"
    tries = f"{len(scored)} guess{'' if len(scored) == 1 else 'es'} · best {best}/{engine.MAX_TOTAL}"
    rows = [grid_row(g.breakdown) for g in scored[-MAX_ROWS:]]
    if len(scored) > MAX_ROWS:
        rows.insert(0, f"… {len(scored) - MAX_ROWS} earlier")
    return "\n".join([head, tries, *rows, *([link] if link else [])])
