"""Every script file in lua/ has its header, and another package loads its
own scripts with EchoMQ's loader: includes from its own include/, EVALSHA
with the script loaded again after NOSCRIPT, errors typed."""
from __future__ import annotations

import pytest

from echomq import ArgumentError
from echomq.scripts import LUA_DIR, load_from


@pytest.mark.parametrize("path", sorted([*LUA_DIR.glob("*.lua"), *LUA_DIR.glob("games/*.lua")]),
                         ids=lambda p: str(p.relative_to(LUA_DIR)))
def test_every_script_file_has_a_header_naming_keys_argv_and_replies(path):
    head = path.read_text().split("]]", 1)[0]
    assert head.startswith(f"--[[ {path.stem}:"), path
    assert "KEYS[1]" in head and "ARGV[1]" in head and "Repl" in head, path


def test_a_package_loads_its_own_scripts_with_includes_and_noscript_retry(tmp_path, r):
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "check.lua").write_text(
        "local function check(v)\n"
        "  if not tonumber(v) then return redis.error_reply('EMQARG double: want a number') end\n"
        "end\n")
    (tmp_path / "double.lua").write_text(
        '--- @include "check"\n--- @include "check"\n'
        "local bad = check(ARGV[1])\nif bad then return bad end\n"
        "return redis.call('INCRBY', KEYS[1], 2 * tonumber(ARGV[1]))\n")
    script = load_from(tmp_path, "double")
    assert script.source.count("local function check") == 1  # an include comes in once
    r.script_flush()
    assert script(r, ["n"], [3]) == 6  # NOSCRIPT: loaded, then run
    assert script(r, ["n"], [1]) == 8
    with pytest.raises(ArgumentError, match="double"):
        script(r, ["n"], ["x"])
    assert r.get("n") == b"8"
