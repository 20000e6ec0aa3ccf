"""Writing conformance cases by hand: a queue's state built job by job, and
script calls by the argument names of the script's header.

A case module under ``echomq/conformance/cases/`` is named after its script
and holds ``CASES``, a list of :func:`case` results::

    case("stale-lower-token",
         "a token below the row's attempts is stale: EMQSTALE, nothing changes",
         World().active(A, token=2),
         call("complete", id=A, token=1))

The generator runs each on a real server and records the reply and the state
after; the case only says what is there before, what is sent and why.
Constants here are fixed so vectors never depend on when they were made:
``LIVE`` is a deadline no run reaches, ``PAST`` one long gone.
"""
from __future__ import annotations

import json

from ..scripts import LIMITS
from . import headers

Q = "conformance"
P = "emq:{" + Q + "}:"
A, B, C, D, E = ("JOB0000000000" + c for c in "ABCDE")  # in mint order: A is the oldest
L1, L2, L3 = ("PLR0000000000" + c for c in "ABC")
CSR = "CSR0000000000A"
GES = "GES0000000000A"  # a well-formed id of another brand
LIVE = 32503680000000   # 3000-01-01 in ms: a lease or run-at that is never due
PAST = 1000             # 1970: long expired, long due, past any retention age
CREATED, CLAIMED = "1000", "2000"
MAX_MS, MAX_COUNT, MAX_BATCH = LIMITS["MAX_MS"], LIMITS["MAX_COUNT"], LIMITS["MAX_BATCH"]
MAX_TOKEN, MAX_TEXT = LIMITS["MAX_TOKEN"], LIMITS["MAX_TEXT"]


def now(offset: int = 0) -> dict:
    """A time relative to the server clock when the state is laid (t0 + offset)."""
    return {"$now": offset}


def key(suffix: str) -> str:
    return P + suffix


def job_key(job_id: str) -> str:
    return P + "job:" + job_id


def lane_key(lane: str, which: str = "pending") -> str:
    return f"{P}g:{lane}:{which}"


class World:
    """A queue's state before a call, built the way the scripts leave it:
    rows with their fields, the ready, active, schedule and dead sets, the
    lanes (their meta, the ``lanes`` set, and the ring: every servable lane,
    in the order the lanes were added, unless :meth:`ring` sets it)."""

    def __init__(self):
        self.keys: dict[str, dict] = {}
        self._lanes: list[str] = []
        self._settings: dict[str, dict] = {}
        self._active: dict[str, int] = {}
        self._active_ids: dict[str, list[str]] = {}
        self._ring: list[str] | None = None

    # -- raw keys ---------------------------------------------------------
    def _hash(self, k: str, fields: dict) -> None:
        h = self.keys.setdefault(k, {"hash": {}})["hash"]
        h.update({f: v if isinstance(v, dict) else str(v) for f, v in fields.items()})
        self.keys[k]["hash"] = dict(sorted(h.items()))

    def _zadd(self, k: str, member: str, score: int) -> None:
        self.keys.setdefault(k, {"zset": {}})["zset"][member] = score

    def raw(self, k: str, spec: dict) -> "World":
        """Any key as it is spelled in a vector (for states no script makes)."""
        self.keys[k] = spec
        return self

    # -- jobs ---------------------------------------------------------------
    def _row(self, job_id, state, attempts, payload, lane, extra) -> None:
        fields = {"state": state, "attempts": attempts, "payload": payload, "created": CREATED}
        if lane:
            fields["lane"] = lane
            self._lane(lane)
        fields.update(extra)
        self._hash(job_key(job_id), fields)

    def _lane(self, lane: str) -> None:
        if lane not in self._lanes:
            self._lanes.append(lane)

    def pending(self, job_id: str, *, lane: str | None = None, payload: str = "p", attempts: int = 0,
                **extra) -> "World":
        """A ready job: in its lane's pending set, or the flat one (score 0)."""
        self._row(job_id, "pending", attempts, payload, lane, extra)
        self._zadd(lane_key(lane) if lane else key("pending"), job_id, 0)
        return self

    def active(self, job_id: str, *, token: int = 1, lane: str | None = None, deadline=LIVE,
               payload: str = "p", consumer: str = CSR, **extra) -> "World":
        """A leased job: attempts = its token, in active scored by its
        deadline (``deadline=None``: a row whose lease entry is missing)."""
        self._row(job_id, "active", token, payload, lane,
                  {"claimed": CLAIMED, "consumer": consumer, **extra})
        if deadline is not None:
            self._zadd(key("active"), job_id, deadline)
        if lane:
            self._active[lane] = self._active.get(lane, 0) + 1
            self._active_ids.setdefault(lane, []).append(job_id)
        return self

    def scheduled(self, job_id: str, *, run_at: int = LIVE, lane: str | None = None, attempts: int = 0,
                  payload: str = "p", **extra) -> "World":
        """A delayed (attempts 0) or retrying job, in schedule scored by its run-at."""
        if attempts:
            extra = {"claimed": CLAIMED, "consumer": CSR, "last_error": "boom", **extra}
        self._row(job_id, "scheduled", attempts, payload, lane, extra)
        self._zadd(key("schedule"), job_id, run_at)
        return self

    def dead(self, job_id: str, *, died: int = PAST, lane: str | None = None, attempts: int = 1,
             payload: str = "p", **extra) -> "World":
        """A dead-lettered job, in dead scored by its time of death."""
        fields = {"claimed": CLAIMED, "consumer": CSR, "died": died, "last_error": "boom", **extra}
        self._row(job_id, "dead", attempts, payload, None, fields)
        if lane:
            self._hash(job_key(job_id), {"lane": lane})
        self._zadd(key("dead"), job_id, died)
        return self

    def done(self, job_id: str, *, finished=PAST, attempts: int = 1, lane: str = "") -> "World":
        """A completed job's retained record (``finished`` may be ``now(-N)``)."""
        fields = {"attempts": attempts, "claimed": 2000, "consumer": CSR, "enqueued": 1000,
                  "finished": finished, "lane": lane}
        record = ({"$json": fields} if isinstance(finished, dict)
                  else json.dumps(fields, separators=(",", ":"), sort_keys=True))
        self._zadd(key("done"), job_id, finished)
        self.keys.setdefault(key("done:rows"), {"hash": {}})["hash"][job_id] = record
        return self

    def flow(self, parent: str, children: dict, *, policy: str = "fail", lane: str | None = None,
             payload: str = "p") -> "World":
        """A flow's parent waiting (``children``: child id -> its record, a
        JSON text, ``{"state":"pending"}`` until it ends), as enqueue_flow
        leaves it. The children's rows (with ``parent=``) are added apart."""
        left = sum(1 for v in children.values() if '"pending"' in v)
        self._row(parent, "waiting", 0, payload, None,
                  {"children": len(children), "children_left": left, "policy": policy})
        if lane:
            self._hash(job_key(parent), {"lane": lane})
        self._zadd(key("waiting"), parent, 1000)
        self.keys[key("flow:" + parent)] = {"hash": dict(sorted(children.items()))}
        return self

    # -- queue and lane settings ------------------------------------------------
    def lane(self, lane: str, *, paused: bool = False, limit: int | None = None) -> "World":
        """A lane's settings (meta ``paused`` / ``limit``)."""
        self._lane(lane)
        s = self._settings.setdefault(lane, {})
        if paused:
            s["paused"] = "1"
        if limit is not None:
            s["limit"] = str(limit)
        return self

    def meta(self, **fields) -> "World":
        """Queue meta fields: paused, counters, retention bounds."""
        self._hash(key("meta"), fields)
        return self

    def wake(self, n: int = 1) -> "World":
        self.keys[key("wake")] = {"list": ["1"] * n}
        return self

    def ring(self, *lanes: str) -> "World":
        """Set the ring as given (a state that breaks the ring invariant)."""
        self._ring = list(lanes)
        return self

    def build(self) -> dict:
        keys = {k: v for k, v in self.keys.items()}
        ring = []
        for lane in self._lanes:
            meta = dict(self._settings.get(lane, {}))
            if self._active.get(lane) and "limit" in meta:  # only a limited lane counts (lua/include/lanes.lua)
                meta["active"] = str(self._active[lane])
                for jid in self._active_ids[lane]:  # and marks the rows it counts
                    row = {**keys[job_key(jid)]["hash"], "counted": "1"}
                    keys[job_key(jid)] = {"hash": dict(sorted(row.items()))}
            if meta:
                keys[lane_key(lane, "meta")] = {"hash": meta}
            pending = lane_key(lane) in keys
            if pending or meta:
                keys.setdefault(key("lanes"), {"set": []})["set"].append(lane)
            limit = int(meta["limit"]) if "limit" in meta else None
            if pending and "paused" not in meta and (limit is None or self._active.get(lane, 0) < limit):
                ring.append(lane)
        ring = ring if self._ring is None else self._ring
        if ring:
            keys[key("ring")] = {"list": ring}
        if key("lanes") in keys:
            keys[key("lanes")]["set"].sort()
        return {k: keys[k] for k in sorted(keys)}


# -- calls ------------------------------------------------------------------

# When a script gains an argument, give it here the value that keeps the old
# behaviour (say {"enqueue": {"priority": 0}}): every case written before it
# then sends it and still pins what it pinned.
DEFAULTS: dict[str, dict] = {"enqueue": {"priority": 0, "unique_key": "", "unique_ttl_ms": 0}}


def _text(v) -> object:
    return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


def call(script: str, *, pairs=None, keys: dict | None = None, argv: dict | None = None,
         drop: int = 0, extra: tuple = (), **named) -> dict:
    """The KEYS and ARGV of ``script`` from its header's names: ``P`` is the
    vectors' queue unless given; KEYS come from the header's templates
    (``<id>``, ``<lane>``, ``<name>`` filled from the arguments, on the vectors' queue).
    ``pairs`` fills a repeated (a, b) tail (or (a, b, c)); ``keys={i: k}`` / ``argv={i: v}``
    replace position i (1-based); ``drop`` / ``extra`` shorten or lengthen ARGV."""
    lay = headers.layout(script)
    named = {"P": P, **DEFAULTS.get(script, {}), **named}
    missing = [n for n in lay["argv"] if n not in named]
    if missing:
        raise TypeError(f"call({script!r}) needs {missing} (its header's ARGV)")
    unknown = set(named) - set(lay["argv"])
    if unknown:
        raise TypeError(f"call({script!r}): {sorted(unknown)} are not in its header's ARGV {lay['argv']}")
    args = [_text(named[n]) for n in lay["argv"]]
    for group in pairs or ():
        args += [_text(v) for v in group]
    ks = []
    for _, template in lay["keys"]:
        k = template.replace("emq:{q}:", P)
        for name in ("id", "lane", "name"):
            if f"<{name}>" in k:
                k = k.replace(f"<{name}>", str(named.get(name) or (pairs[0][0] if pairs else "")))
        ks.append(k)
    for i, k in (keys or {}).items():
        ks[i - 1] = k
    for i, v in (argv or {}).items():
        args[i - 1] = _text(v)
    if drop:
        args = args[:-drop]
    return {"script": script, "keys": ks, "argv": args + [_text(v) for v in extra]}


def case(name: str, rule: str, world: World | None, sent: dict) -> dict:
    """One vector: its name (unique in its script), the rule it pins (one
    line), the state before and the call."""
    if "\n" in rule or not rule.strip():
        raise ValueError(f"case {name}: the rule is one line of text")
    return {"name": name, "rule": rule, "before": (world or World()).build(),
            "script": sent["script"], "keys": sent["keys"], "argv": sent["argv"]}


# -- refusals: every argument position, with representative bad values ------

BAD = {  # kind -> (value, name, why)
    "P": [("", "empty", "empty"), ("emq:{conformance}", "no-colon", "without the closing colon"),
          ("emq:{emq}:", "reserved", "naming the reserved queue emq"),
          ("emq:{a b}:", "space", "with a space in the queue name"),
          ("emq:{" + "x" * 129 + "}:", "long", "with a 129-character queue name")],
    "id": [("", "empty", "empty"), ("JOB000000000A", "short", "of 13 bytes"),
           ("job0000000000A", "lower-brand", "with a lower-case brand"),
           ("JOB000000000:A", "colon", "with a ':' among the base62 digits"),
           ("JOBAzL8n0Y58m8", "over", "above 2^63-1 (AzL8n0Y58m7)")],
    "lane": [("PLR000000000A", "short", "of 13 bytes"), ("plr0000000000A", "lower-brand", "with a lower-case brand"),
             ("PLR000000000}A", "brace", "with a '}' among the base62 digits")],
    "int": [("", "empty", "empty"), ("01", "leading-zero", "with a leading zero"), ("-1", "sign", "with a sign"),
            ("+1", "plus", "with a plus sign"), ("1.5", "fraction", "with a fraction"),
            ("1e3", "exponent", "with an exponent"), ("nan", "nan", "nan"), (" 1", "space", "with a space")],
    "text": [({"$repeat": ["x", MAX_TEXT + 1]}, "long", f"of {MAX_TEXT + 1} bytes, one past MAX_TEXT")],
}


def refusals(script: str, world: World, good: dict, kinds: dict, *, note: str = "nothing changes") -> list[dict]:
    """Refused calls of ``script``: ``good`` (named arguments of a valid call
    on ``world``) with one argument made bad at a time, each KEYS position
    naming another key, and ARGV one short and one long. ``kinds`` maps an
    argument to ``"P"``, ``"id"`` (a job id: another brand is EMQKIND),
    ``"lane"``, ``"lane?"`` (or ''), ``"csr?"`` (a branded id or ''),
    ``("int", lo, hi)``, ``"text"`` or a list of (value, name, why) of its own."""
    out = []

    def refuse(name, rule, **over):
        out.append(case(name, rule, world, call(script, **{**good, **over})))

    for arg, kind in kinds.items():
        if isinstance(kind, list):
            bad = kind
        elif isinstance(kind, tuple):
            _, lo, hi = kind
            bad = list(BAD["int"]) + [(str(hi + 1), "above", f"of {hi + 1}, one above its bound")]
            if lo > 0:
                bad.append((str(lo - 1), "below", f"of {lo - 1}, one below its bound"))
        else:
            bad = list(BAD[{"P": "P", "id": "id", "text": "text"}.get(kind, "lane")])
            if kind == "lane":
                bad.insert(0, ("", "empty", "empty (a lane is required here)"))
        for value, slug, why in bad:
            what = "the prefix" if arg == "P" else arg
            refuse(f"bad-{arg}-{slug}", f"{what} {why} is refused with EMQARG; {note}", **{arg: value})
        if kind == "id":
            refuse(f"bad-{arg}-kind", f"a well-formed {arg} of another brand (GES) is refused with EMQKIND; {note}",
                   **{arg: GES})
    lay = headers.layout(script)
    for i, (kname, template) in enumerate(lay["keys"], start=1):
        wrong = (job_key(E) if "<id>" in template else lane_key(L3, "meta") if "<lane>" in template
                 else template.replace("emq:{q}:", P) + "x")
        if wrong == call(script, **good)["keys"][i - 1]:
            wrong = job_key(D)
        out.append(case(f"bad-key-{i}", f"KEYS[{i}] ({kname}) must be the key the arguments name: "
                        f"another is refused with EMQARG; {note}", world,
                        call(script, keys={i: wrong}, **good)))
    out.append(case("arity-short", f"one ARGV short is refused with EMQARG; {note}", world,
                    call(script, drop=1, **good)))
    out.append(case("arity-long", f"one ARGV too many is refused with EMQARG; {note}", world,
                    call(script, extra=("x",), **good)))
    return out
