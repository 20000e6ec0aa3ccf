"""The game's own Lua scripts, ``lua/games/<name>.lua``.

They are loaded with EchoMQ's loader (``echomq.scripts.load_from``: the same
``@include`` handling and NOSCRIPT retry) but are not part of EchoMQ's
bundle: EchoMQ knows nothing of the game. The codemojex wheel carries them
as ``games/lua/`` (distributions/README.md); ``lua_dir`` finds them there, or
in a checkout's ``lua/games/``.
"""
from __future__ import annotations

from echomq import scripts

DIRECTORY = scripts.lua_dir("games", "lua/games")


def load(name: str) -> scripts.Script:
    return scripts.load_from(DIRECTORY, name)
