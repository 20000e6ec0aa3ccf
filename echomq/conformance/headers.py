"""What a script's own text says about it: its layout and its error codes.

Each ``lua/<name>.lua`` opens with a ``--[[ ... ]]`` header naming its KEYS
(``KEYS[i] <name>  <key template>``), its ARGV (``ARGV[i] <name>  <about>``,
or ``ARGV[i], ARGV[j]  <a>, <b> ...`` for a repeated pair, ``ARGV[i], ARGV[j],
ARGV[k]  <a>, <b>, <c> ...`` for a repeated triple) and its replies and
errors. :func:`layout` reads the first two, which the vectors record and the
Node client's table must agree with; :func:`error_codes` finds every
``EMQ<CODE>`` the assembled script can answer, by following calls from the
script's own code through the functions its includes define.
"""
from __future__ import annotations

import re

from ..scripts import LUA_DIR, load

_HEADER = re.compile(r"\A--\[\[(.*?)\]\]", re.S)
_KEY = re.compile(r"^KEYS\[(\d+)\]\s+(.+?)\s+(emq:\S+)", re.M)
_ARG = re.compile(r"^ARGV\[(\d+)\]\s+([A-Za-z_]+)\b", re.M)
_REPEATED = re.compile(r"^((?:ARGV\[\d+\], )+ARGV\[\d+\])\s+([A-Za-z_]+(?:, [A-Za-z_]+)+)\b", re.M)
_CODE = re.compile(r"\bEMQ[A-Z]+\b")
_FUNC = re.compile(r"^local function (\w+)\(.*?^end\b", re.M | re.S)


def script_names() -> list[str]:
    """Every script of the bundle: one ``lua/<name>.lua`` per transition."""
    return sorted(p.stem for p in LUA_DIR.glob("*.lua"))


def header(name: str) -> str:
    text = (LUA_DIR / f"{name}.lua").read_text()
    m = _HEADER.match(text)
    if not m:
        raise ValueError(f"lua/{name}.lua has no --[[ header ]] naming its KEYS and ARGV")
    return m.group(1)


def layout(name: str) -> dict:
    """``{"keys": [[name, template], ...], "argv": [name, ...]}``, plus
    ``"argv_repeated": [a, b]`` when the tail of ARGV repeats a pair (or a
    triple: ``[a, b, c]``)."""
    text = header(name)
    keys = sorted((int(i), n, t) for i, n, t in _KEY.findall(text))
    argv = sorted((int(i), n) for i, n in _ARG.findall(text))
    if [i for i, *_ in keys] != list(range(1, len(keys) + 1)) or [i for i, _ in argv] != list(range(1, len(argv) + 1)):
        raise ValueError(f"lua/{name}.lua: KEYS and ARGV in its header must be numbered 1, 2, ... in full")
    out = {"keys": [[n, t] for _, n, t in keys], "argv": [n for _, n in argv]}
    group = _REPEATED.search(text)
    if group:
        names = group.group(2).split(", ")
        if len(names) != group.group(1).count("ARGV["):
            raise ValueError(f"lua/{name}.lua: its repeated ARGV line names {len(names)} arguments for "
                             f"{group.group(1).count('ARGV[')} positions")
        out["argv_repeated"] = names
    return out


def documented_codes(name: str) -> set[str]:
    """The error codes the ``Errors:`` part of the script's header names."""
    _, found, errors = header(name).partition("Errors:")
    if not found:
        raise ValueError(f"lua/{name}.lua: its header has no Errors: line")
    return set(_CODE.findall(errors))


def _code_only(lua: str) -> str:
    lua = re.sub(r"--\[\[.*?\]\]", "", lua, flags=re.S)
    return re.sub(r"--[^\n]*", "", lua)


def error_codes(name: str) -> set[str]:
    """Every EMQ code the assembled script can answer: those its own code
    raises, and those of every function it reaches through calls (each
    ``local function`` of the bundle runs to the first ``end`` in column 0,
    the style of lua/)."""
    code = _code_only(load(name).source)
    functions = {m.group(1): m.group(0) for m in _FUNC.finditer(code)}
    top = _FUNC.sub("", code)
    calls = re.compile(r"\b(" + "|".join(map(re.escape, functions)) + r")\s*\(") if functions else None
    seen, todo, codes = set(), [top], set()
    while todo:
        body = todo.pop()
        codes |= set(_CODE.findall(body))
        for fn in (calls.findall(body) if calls else ()):
            if fn not in seen:
                seen.add(fn)
                todo.append(functions[fn])
    return codes
