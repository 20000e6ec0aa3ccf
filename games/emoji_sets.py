"""The emoji sets the game ships with (``seed_demo`` loads them).

Each emoji is one opaque string: several are multi-codepoint sequences (ZWJ
sequences like 🐕‍🦺 and 🐻‍❄️, or a base plus VS16 like ❄️), so code must
never split or count them by code point.
"""
from __future__ import annotations

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


def check(emojis: list[str]) -> None:
    """Refuse a set that cannot make a round: fewer than 6 or repeated emojis."""
    if len(emojis) < 6:
        raise ValueError("an emoji set needs at least six emojis")
    if len(set(emojis)) != len(emojis):
        raise ValueError("an emoji set must not repeat an emoji")
    if any(not isinstance(e, str) or not e or e.isspace() for e in emojis):
        raise ValueError("every emoji must be a non-empty string")
