"""The emoji sets the game ships with (``seed_demo`` loads them).

Each emoji is one opaque string: several are multi-codepoint sequences (ZWJ
sequences like 🐕‍🦺 and 🐻‍❄️, or a base plus VS16 like ❄️), so code must
never split or count them by code point.
"""
from __future__ import annotations

import emoji as emoji_data

# How many emojis a round's keyboard shows unless the operator picks another
# size (at least ``engine.SIZE``, so it holds a secret); a set must fill it.
DEFAULT_KEYBOARD_SIZE = 24
# Variation selectors only choose text or colour presentation: "❄" and "❄️"
# are the same emoji to a player, so they count as a repeat.
_PRESENTATION = str.maketrans("", "", "\ufe0e\ufe0f")

SETS: dict[str, dict] = {
    "animals": {
        "title": "Animals",
        "emojis": [
            "🐶", "🐱", "🐭", "🐹", "🐰", "🦊", "🐻", "🐼", "🐨", "🐯", "🦁", "🐮",
            "🐷", "🐸", "🐵", "🐔", "🐧", "🐦", "🐤", "🦆", "🦅", "🦉", "🦇", "🐺",
            "🐗", "🐴", "🦄", "🐝", "🐛", "🦋", "🐌", "🐞", "🐢", "🐍", "🦎", "🐙",
            "🦑", "🦀", "🐠", "🐬", "🐳", "🦈", "🐊", "🦓", "🦒", "🦘",
            "🐕‍🦺", "🐈‍⬛", "🐻‍❄️", "🐦‍⬛",
        ],
    },
    "food": {
        "title": "Food & drink",
        "emojis": [
            "🍏", "🍎", "🍐", "🍊", "🍋", "🍌", "🍉", "🍇", "🍓", "🫐", "🍈", "🍒",
            "🍑", "🥭", "🍍", "🥥", "🥝", "🍅", "🍆", "🥑", "🥦", "🥕", "🌽", "🌶️",
            "🥔", "🥐", "🥯", "🍞", "🧀", "🥚", "🥞", "🧇", "🥓", "🍔", "🍟", "🍕",
            "🌭", "🌮", "🌯", "🍣", "🍩", "🍪", "🎂", "🍫", "🍿", "☕", "🍵", "🧋",
            "🍋‍🟩", "🍄‍🟫",
        ],
    },
    "travel": {
        "title": "Travel & places",
        "emojis": [
            "🚗", "🚕", "🚙", "🚌", "🚎", "🏎️", "🚓", "🚑", "🚒", "🚐", "🚚", "🚜",
            "🛵", "🏍️", "🚲", "🛴", "🚂", "🚆", "🚇", "🚊", "🚝", "✈️", "🛩️", "🚁",
            "🚀", "🛸", "⛵", "🚤", "🛳️", "⚓", "🗽", "🗼", "🏰", "🏯", "🎡", "🎢",
            "🌋", "🗻", "🏝️", "🏜️", "⛺", "🌉", "🌃", "🌅", "🏳️‍🌈", "🏴‍☠️",
        ],
    },
    "weather": {
        "title": "Sky & weather",
        "emojis": [
            "☀️", "🌤️", "⛅", "🌥️", "☁️", "🌦️", "🌧️", "⛈️", "🌩️", "🌨️", "❄️", "☃️",
            "⛄", "🌬️", "💨", "🌪️", "🌫️", "🌈", "☔", "💧", "🌊", "🔥", "⚡", "🌙",
            "🌛", "🌜", "🌝", "🌞", "⭐", "🌟", "✨", "☄️", "🪐", "🌍", "🌌", "🌠",
            "❤️‍🔥", "😶‍🌫️",
        ],
    },
}


class EmojiSetError(ValueError):
    """An emoji set that cannot make a fair round; the message says why."""


def problems(emojis: object) -> list[str]:
    """Everything wrong with a candidate set, in words fit for an operator.

    A round draws its keyboard from the set and its secret (six distinct
    emojis) from the keyboard, and scoring finds each guessed emoji by
    equality: so the set must be a list of at least ``DEFAULT_KEYBOARD_SIZE``
    entries, each exactly one emoji (one grapheme: a ZWJ sequence, a flag or
    a skin-tone variant counts as one), none repeated."""
    if not isinstance(emojis, list):
        return ["An emoji set is a list of emojis, e.g. [\"🐶\", \"🐱\", …]."]
    out = []
    if len(emojis) < DEFAULT_KEYBOARD_SIZE:
        out.append(f"An emoji set needs at least {DEFAULT_KEYBOARD_SIZE} emojis (a full keyboard); "
                   f"this one has {len(emojis)}.")
    not_single = [e for e in emojis if not isinstance(e, str) or not emoji_data.is_emoji(e)]
    if not_single:
        shown = ", ".join(repr(e) for e in not_single[:5]) + (" …" if len(not_single) > 5 else "")
        out.append(f"Each entry must be exactly one emoji; these are not: {shown}.")
    seen: dict[str, str] = {}
    repeats = []
    for e in emojis:
        if isinstance(e, str):
            bare = e.translate(_PRESENTATION)
            if bare in seen:
                repeats.append(e)
            seen.setdefault(bare, e)
    if repeats:
        out.append(f"Each emoji may appear once; repeated: {' '.join(dict.fromkeys(repeats))}.")
    return out


def check(emojis: object) -> None:
    """Refuse a set that cannot make a round (``EmojiSetError``, a ValueError)."""
    found = problems(emojis)
    if found:
        raise EmojiSetError(" ".join(found))


def validate_emoji_set(emojis: object, field: str | None = None) -> None:
    """The Django-facing check: ``EmojiSet.clean`` and ``Round.clean`` run
    it, so every form that saves a set or adds a round (the admin's included)
    shows the problems on ``field``."""
    from django.core.exceptions import ValidationError

    found = problems(emojis)
    if found:
        raise ValidationError({field: found} if field else found, code="invalid_emoji_set")

