"""Check a server and the bundle in ``lua/`` against the vectors in
``lua/conformance/``: the coverage first, then every case.

Coverage (:func:`coverage`) is what keeps the vectors complete as the bundle
grows: every script of the bundle (each ``lua/<name>.lua``) has a vector file
with at least one accepted call; every error code the script can answer
(found in its assembled code, :func:`headers.error_codes`) and every code its
header's ``Errors:`` line names is answered by at least one case; every code a
case answers is named there; and the layout recorded in the file is the one
the script's header has now (else the vectors are stale: regenerate them).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..scripts import LUA_DIR, Script, load
from . import format as fmt
from . import headers
from .server import Server

VECTORS_DIR = LUA_DIR / "conformance"


def load_vectors(directory: Path = VECTORS_DIR) -> dict[str, dict]:
    """Every vector file, by script name."""
    docs = {}
    for path in sorted(directory.glob("*.json")):
        doc = json.loads(path.read_text())
        if doc.get("script") != path.stem:
            raise fmt.VectorError(f"{path}: names script {doc.get('script')!r}, not {path.stem!r}")
        docs[path.stem] = doc
    return docs


def error_code(message: str) -> str:
    return message.split(" ", 1)[0]


def coverage(docs: dict[str, dict]) -> list[str]:
    """What the vectors leave uncovered; empty when they cover the bundle."""
    problems = []
    scripts = headers.script_names()
    for name in scripts:
        doc = docs.get(name)
        if doc is None or not doc.get("cases"):
            problems.append(f"{name}: lua/{name}.lua has no vectors (add echomq/conformance/cases/{name}.py "
                            f"and run python -m echomq.conformance.generate)")
            continue
        if doc.get("layout") != headers.layout(name):
            problems.append(f"{name}: the vectors were recorded for KEYS/ARGV {doc.get('layout')}, the header "
                            f"now says {headers.layout(name)}: regenerate them")
        answered = {error_code(c["error"]) for c in doc["cases"] if "error" in c}
        documented = headers.documented_codes(name)
        for code in sorted((headers.error_codes(name) | documented) - answered):
            problems.append(f"{name}: no case answers {code}, which it can answer")
        for code in sorted(answered - documented):
            problems.append(f"{name}: cases answer {code}, which its header's Errors: line does not name")
        if not any("reply" in c for c in doc["cases"]):
            problems.append(f"{name}: no case of an accepted call")
    for name in sorted(set(docs) - set(scripts)):
        problems.append(f"{name}: vectors for a script the bundle does not have (lua/{name}.lua)")
    return problems


def encode_args(values: list) -> list:
    return [fmt.value(v) for v in values]


@dataclass
class Result:
    script: str
    name: str
    rule: str
    diffs: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.diffs


def check(server: Server, script: Script, case: dict) -> list[str]:
    """Run one case; every way the server's answer differs from the vector."""
    before = fmt.state(case["before"])
    outcome, value, after, window = server.run(script, before, case["keys"], encode_args(case["argv"]))
    diffs: list[str] = []
    if "error" in case:
        if outcome != "error" or value != case["error"]:
            got = fmt.show(value) if outcome == "reply" else repr(value)
            diffs.append(f"reply: want error {case['error']!r}, got {outcome} {got}")
    elif outcome == "error":
        diffs.append(f"reply: want {json.dumps(case['reply'])}, got error {value!r}")
    else:
        fmt.match_value(fmt.value(case["reply"]), value, window, "reply", diffs)
    expected = before if case["after"] == "unchanged" else fmt.state(case["after"])
    diffs += fmt.match_state(expected, after, window)
    return diffs


def run(client, docs: dict[str, dict], *, only: str | None = None, report=print) -> list[Result]:
    """Every case (or those whose ``script/name`` contains ``only``), each
    reported as it finishes."""
    server = Server(client)
    results = []
    for name, doc in docs.items():
        script = load(name)
        for case in doc["cases"]:
            label = f"{name}/{case['name']}"
            if only and only not in label:
                continue
            result = Result(name, case["name"], case["rule"], check(server, script, case))
            results.append(result)
            report(result)
    return results
