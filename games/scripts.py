"""The game's own Lua scripts, ``lua/games/<name>.lua``.

They are loaded with EchoMQ's loader (``echomq.scripts.load_from``: the same
``@include`` handling and NOSCRIPT retry) but are not part of EchoMQ's
bundle: EchoMQ knows nothing of the game.
"""
from __future__ import annotations

from pathlib import Path

from echomq import scripts

DIRECTORY = Path(__file__).resolve().parent.parent / "lua" / "games"


def load(name: str) -> scripts.Script:
    return scripts.load_from(DIRECTORY, name)
