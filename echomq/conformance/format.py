"""The vector format: how a vector spells values, states and clock rules,
and how what a server answered is matched against it.

docs/protocol.md ("Conformance vectors") is the full description; in short,
a value in a vector is a JSON string (its UTF-8 bytes), an integer, null, an
array, or one of these objects:

    {"$hex": "00ff"}           bytes that are not UTF-8 text
    {"$repeat": ["x", 65537]}  "x" repeated 65537 times (arguments only)
    {"$now": N}                a server-clock value: TIME (ms) during the call
                               plus N; matches v when t0 + N <= v <= t1 + N
    {"$json": X}               a string holding JSON equal to X (X may hold $now)

t0 is the server's TIME (ms, rounded down) read just before the case's
state is laid, t1 just after the call; in a state before the call, ``$now``
is laid as t0 + N. A state maps each key to one typed value, ``{"hash": {...}}``,
``{"zset": {member: score}}``, ``{"list": [...]}``, ``{"set": [...]}``,
``{"string": v}`` or ``{"stream": [[id, {field: value}], ...]}``, with
``"expire_s": N`` when the call gave the key a TTL of N seconds (its PTTL
read after the call is at most N*1000 and at least N*1000 - (t2 - t0), t2 =
TIME after the state was read; a key without ``expire_s`` has no TTL). In a
key name ``$MINUTE`` is floor(t / 60000) for a t in [t0, t1]; a stream id
``$NOW-<seq>`` is ``<ms>-<seq>`` with ms in [t0, t1].
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

KINDS = ("hash", "zset", "list", "set", "string", "stream")
MINUTE = "$MINUTE"
NOW_ID = re.compile(r"^\$NOW-(\d+)$")
DECIMAL = re.compile(rb"^(0|[1-9][0-9]{0,17})$")


class VectorError(ValueError):
    """A vector file that does not follow the format."""


@dataclass(frozen=True)
class Now:
    """A server-clock value: the call's TIME in ms plus ``offset``."""
    offset: int


@dataclass(frozen=True)
class Json:
    """A string holding JSON equal to ``pattern`` (plain JSON with $now markers)."""
    pattern: object


@dataclass
class Entry:
    """One key: its type, its value, and its TTL (``expire_s`` in a vector,
    ``pttl`` in what a server holds: -1 for none)."""
    kind: str
    value: object
    expire_s: int | None = None
    pttl: int = -1


@dataclass(frozen=True)
class Window:
    """The server clock around one case: TIME before its state was laid (t0),
    after the call (t1), and after the state was read back (t2)."""
    t0: int
    t1: int
    t2: int = 0

    def minutes(self) -> list[int]:
        return list(range(self.t0 // 60000, self.t1 // 60000 + 1))


# -- decoding a vector ----------------------------------------------------

def value(v):
    """A vector value as bytes / int / None / list / Now / Json."""
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, bool):
        raise VectorError(f"no booleans in vectors: {v!r}")
    if isinstance(v, (int, type(None))):
        return v
    if isinstance(v, list):
        return [value(x) for x in v]
    if isinstance(v, dict) and len(v) == 1:
        (tag, arg), = v.items()
        if tag == "$hex":
            return bytes.fromhex(arg)
        if tag == "$repeat":
            text, times = arg
            return text.encode() * times
        if tag == "$now":
            return Now(int(arg))
        if tag == "$json":
            return Json(arg)
    raise VectorError(f"not a vector value: {v!r}")


def entry(spec: dict) -> Entry:
    kinds = [k for k in spec if k in KINDS]
    if len(kinds) != 1 or set(spec) - {kinds[0], "expire_s"}:
        raise VectorError(f"a key's state is one of {KINDS} (and expire_s), got {sorted(spec)}")
    kind, raw = kinds[0], spec[kinds[0]]
    if kind == "hash":
        val = {f: value(v) for f, v in raw.items()}
    elif kind == "zset":
        val = [(m, value(s)) for m, s in raw.items()]
    elif kind in ("list", "set"):
        val = [value(x) for x in raw]
    elif kind == "string":
        val = value(raw)
    else:
        val = [(i, {f: value(v) for f, v in fields.items()}) for i, fields in raw]
    return Entry(kind, val, spec.get("expire_s"))


def state(spec: dict) -> dict[str, Entry]:
    return {key: entry(e) for key, e in spec.items()}


def resolve(v, t0: int):
    """A decoded value as it is laid before the call: ``$now`` + N becomes
    t0 + N, ``$json`` its JSON text."""
    if isinstance(v, Now):
        return t0 + v.offset
    if isinstance(v, Json):
        return json.dumps(_resolve_json(v.pattern, t0), separators=(",", ":"), sort_keys=True).encode()
    if isinstance(v, list):
        return [resolve(x, t0) for x in v]
    return v


def _resolve_json(p, t0: int):
    if isinstance(p, dict) and set(p) == {"$now"}:
        return t0 + p["$now"]
    if isinstance(p, dict):
        return {k: _resolve_json(x, t0) for k, x in p.items()}
    if isinstance(p, list):
        return [_resolve_json(x, t0) for x in p]
    return p


def now_offsets(spec) -> set[int]:
    """Every N of a ``{"$now": N}`` in a vector's JSON (a state, say)."""
    if isinstance(spec, dict):
        if set(spec) == {"$now"}:
            return {spec["$now"]}
        return set().union(*(now_offsets(v) for v in spec.values())) if spec else set()
    if isinstance(spec, list):
        return set().union(*(now_offsets(v) for v in spec)) if spec else set()
    return set()


# -- matching what a server holds -----------------------------------------

def _as_int(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, bytes) and DECIMAL.match(v):
        return int(v)
    return None


def show(v) -> str:
    if isinstance(v, bytes):
        text = v.decode("utf-8", "backslashreplace")
        return repr(text if len(text) <= 80 else text[:77] + "...")
    if isinstance(v, Now):
        return f"now+{v.offset}" if v.offset else "now"
    if isinstance(v, Json):
        return "json " + json.dumps(v.pattern)
    return repr(v)


def _json_matches(pattern, doc, w: Window) -> bool:
    if isinstance(pattern, dict) and set(pattern) == {"$now"}:
        return (isinstance(doc, int) and not isinstance(doc, bool)
                and w.t0 + pattern["$now"] <= doc <= w.t1 + pattern["$now"])
    if isinstance(pattern, dict):
        return (isinstance(doc, dict) and set(doc) == set(pattern)
                and all(_json_matches(pattern[k], doc[k], w) for k in pattern))
    if isinstance(pattern, list):
        return (isinstance(doc, list) and len(doc) == len(pattern)
                and all(_json_matches(p, d, w) for p, d in zip(pattern, doc)))
    return type(doc) is type(pattern) and doc == pattern


def match_value(exp, act, w: Window, where: str, diffs: list[str]) -> None:
    """Append to ``diffs`` how ``act`` (what the server answered or holds)
    differs from ``exp`` (a decoded vector value)."""
    def bad():
        diffs.append(f"{where}: want {show(exp)}, got {show(act)}")

    if isinstance(exp, Now):
        v = _as_int(act)
        if v is None or not w.t0 + exp.offset <= v <= w.t1 + exp.offset:
            diffs.append(f"{where}: want now+{exp.offset} within [{w.t0 + exp.offset}, {w.t1 + exp.offset}], "
                         f"got {show(act)}")
    elif isinstance(exp, Json):
        try:
            doc = json.loads(act)
        except (TypeError, ValueError):
            return bad()
        if not _json_matches(exp.pattern, doc, w):
            diffs.append(f"{where}: want {show(exp)}, got {show(act)}")
    elif isinstance(exp, list):
        if not isinstance(act, list) or len(act) != len(exp):
            return bad()
        for i, (e, a) in enumerate(zip(exp, act)):
            match_value(e, a, w, f"{where}[{i}]", diffs)
    elif isinstance(exp, int):
        if _as_int(act) != exp or isinstance(act, bytes):
            bad()
    elif exp != act:
        bad()


def _resolve(key: str, actual: dict, w: Window) -> str:
    if MINUTE not in key:
        return key
    options = [key.replace(MINUTE, str(m)) for m in w.minutes()]
    return next((k for k in options if k in actual), options[0])


def match_state(expected: dict[str, Entry], actual: dict[str, Entry], w: Window) -> list[str]:
    """Every difference between an expected state and the keys a server holds."""
    diffs: list[str] = []
    named = {_resolve(k, actual, w): e for k, e in expected.items()}
    for key in sorted(set(named) - set(actual)):
        diffs.append(f"{key}: missing (want {named[key].kind})")
    for key in sorted(set(actual) - set(named)):
        diffs.append(f"{key}: not expected, holds {actual[key].kind} {show_entry(actual[key])}")
    for key in sorted(set(named) & set(actual)):
        exp, act = named[key], actual[key]
        if exp.kind != act.kind:
            diffs.append(f"{key}: want a {exp.kind}, got a {act.kind}")
            continue
        _match_entry(key, exp, act, w, diffs)
        if exp.expire_s is None and act.pttl != -1:
            diffs.append(f"{key}: want no TTL, got {act.pttl} ms")
        elif exp.expire_s is not None:
            hi = exp.expire_s * 1000
            lo = hi - max(0, w.t2 - w.t0) - 1
            if not lo <= act.pttl <= hi:
                diffs.append(f"{key}: want a TTL set to {exp.expire_s} s (PTTL in [{lo}, {hi}]), got {act.pttl}")
    return diffs


def show_entry(e: Entry) -> str:
    text = repr(e.value)
    return text if len(text) <= 120 else text[:117] + "..."


def _match_entry(key: str, exp: Entry, act: Entry, w: Window, diffs: list[str]) -> None:
    if exp.kind == "hash":
        for f in sorted(set(exp.value) - set(act.value)):
            diffs.append(f"{key}: field {f} missing (want {show(exp.value[f])})")
        for f in sorted(set(act.value) - set(exp.value)):
            diffs.append(f"{key}: field {f} not expected, holds {show(act.value[f])}")
        for f in sorted(set(exp.value) & set(act.value)):
            match_value(exp.value[f], act.value[f], w, f"{key} {f}", diffs)
    elif exp.kind == "zset":
        want, got = dict(exp.value), dict(act.value)
        if set(want) != set(got):
            diffs.append(f"{key}: members want {sorted(want)}, got {sorted(got)}")
        for m in sorted(set(want) & set(got)):
            match_value(want[m], got[m], w, f"{key} score of {m}", diffs)
    elif exp.kind == "set":
        if sorted(exp.value) != sorted(act.value):
            diffs.append(f"{key}: want {sorted(map(show, exp.value))}, got {sorted(map(show, act.value))}")
    elif exp.kind == "stream":
        if len(exp.value) != len(act.value):
            diffs.append(f"{key}: want {len(exp.value)} entries, got {len(act.value)}")
            return
        for (eid, efields), (aid, afields) in zip(exp.value, act.value):
            m = NOW_ID.match(eid)
            ms, _, seq = aid.partition("-")
            if m and not (w.t0 <= int(ms) <= w.t1 and seq == m.group(1)):
                diffs.append(f"{key}: entry id want <now>-{m.group(1)}, got {aid}")
            elif not m and eid != aid:
                diffs.append(f"{key}: entry id want {eid}, got {aid}")
            if set(efields) != set(afields):
                diffs.append(f"{key} {aid}: fields want {sorted(efields)}, got {sorted(afields)}")
            for f in sorted(set(efields) & set(afields)):
                match_value(efields[f], afields[f], w, f"{key} {aid} {f}", diffs)
    else:
        match_value(exp.value, act.value, w, key, diffs)


# -- encoding what a server answered (the generator) ----------------------

class Ambiguous(Exception):
    """A recorded number fits more than one clock rule (the call's window
    was wide); the generator runs the case again."""


@dataclass
class Clock:
    """Turns recorded server-clock values into ``$now`` markers: a value v
    is now + N when t0 + N <= v <= t1 + N for N = 0 or one of the call's
    ``*_ms`` arguments (``offsets``)."""
    window: Window
    offsets: set[int] = field(default_factory=lambda: {0})

    def mark(self, v: int):
        hits = [n for n in sorted(self.offsets) if self.window.t0 + n <= v <= self.window.t1 + n]
        if len(hits) > 1:
            raise Ambiguous(f"{v} is now+{hits[0]} or now+{hits[1]}")
        return {"$now": hits[0]} if hits else v


def _json_clock(doc, clock: Clock):
    """``doc`` with its clock values marked, and whether there were any."""
    if isinstance(doc, bool) or doc is None or isinstance(doc, str):
        return doc, False
    if isinstance(doc, int):
        marked = clock.mark(doc)
        return marked, marked is not doc
    if isinstance(doc, list):
        pairs = [_json_clock(x, clock) for x in doc]
        return [p for p, _ in pairs], any(c for _, c in pairs)
    if isinstance(doc, dict):
        pairs = {k: _json_clock(x, clock) for k, x in doc.items()}
        return {k: p for k, (p, _) in sorted(pairs.items())}, any(c for _, c in pairs.values())
    return doc, False


def encode(v, clock: Clock | None = None):
    """A recorded value (bytes, int, float score, None, list) as a vector
    value; with a ``clock``, server-clock values become ``$now`` markers."""
    if isinstance(v, list):
        return [encode(x, clock) for x in v]
    if isinstance(v, Now):  # a decoded vector value, encoded back
        return {"$now": v.offset}
    if isinstance(v, Json):
        return {"$json": v.pattern}
    if isinstance(v, float):
        if not v.is_integer():
            return v
        v = int(v)
    if isinstance(v, int) and not isinstance(v, bool):
        return clock.mark(v) if clock else v
    if v is None:
        return None
    if isinstance(v, bytes):
        if len(v) > 256 and v == v[:1] * len(v) and v[0] < 128:
            return {"$repeat": [v[:1].decode(), len(v)]}
        if clock and DECIMAL.match(v):
            marked = clock.mark(int(v))
            if isinstance(marked, dict):
                return marked
        if clock and v[:1] == b"{":
            try:
                doc = json.loads(v)
            except ValueError:
                doc = None
            if isinstance(doc, dict):
                marked, clocked = _json_clock(doc, clock)
                if clocked:
                    return {"$json": marked}
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError:
            return {"$hex": v.hex()}
    raise VectorError(f"cannot encode {v!r}")


def encode_entry(e: Entry, clock: Clock | None = None) -> dict:
    if e.kind == "hash":
        val = {f: encode(e.value[f], clock) for f in sorted(e.value)}
    elif e.kind == "zset":
        val = {m: encode(s, clock) for m, s in e.value}
    elif e.kind == "set":
        val = [encode(x) for x in sorted(e.value)]
    elif e.kind == "list":
        val = [encode(x, clock) for x in e.value]
    elif e.kind == "string":
        val = encode(e.value, clock)
    else:
        val = []
        for i, fields in e.value:
            ms, _, seq = i.partition("-")
            if clock and clock.window.t0 <= int(ms) <= clock.window.t1:
                i = f"$NOW-{seq}"
            val.append([i, {f: encode(x, clock) for f, x in fields.items()}])
    out = {e.kind: val}
    if e.pttl > 0:
        out["expire_s"] = -(-e.pttl // 1000)
    elif e.expire_s is not None:  # an entry of a vector's state encodes back to itself
        out["expire_s"] = e.expire_s
    return out


def encode_key(key: str, clock: Clock | None) -> str:
    head, _, last = key.rpartition(":")
    if clock and head and last.isdigit() and int(last) in clock.window.minutes():
        return f"{head}:{MINUTE}"
    return key


def encode_state(s: dict[str, Entry], clock: Clock | None = None) -> dict:
    return {encode_key(k, clock): encode_entry(s[k], clock) for k in sorted(s)}
