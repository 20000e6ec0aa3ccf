"""The argument checks the Python API runs before it sends anything.

The bounds are the scripts' own (``lua/include/args.lua``, read once by
``scripts.LIMITS``), so a value refused here would be refused by the script
too; checking first means a bad call costs no round trip and raises
``ArgumentError`` (``InvalidName`` for names and ids) with nothing sent.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from . import ids, keyspace
from .errors import ArgumentError
from .scripts import LIMITS

MAX_MS, MAX_COUNT, MAX_BATCH = LIMITS["MAX_MS"], LIMITS["MAX_COUNT"], LIMITS["MAX_BATCH"]
MAX_TOKEN, MAX_TEXT = LIMITS["MAX_TOKEN"], LIMITS["MAX_TEXT"]
MAX_PROGRESS = LIMITS["MAX_PROGRESS"]


# Valkey and Redis refuse a bulk argument longer than this (proto-max-bulk-len,
# 512 MB by default) by closing the connection: a larger payload is refused
# here, before anything is sent, rather than dropping the connection mid-batch.
MAX_PAYLOAD_BYTES = 512 * 1024 * 1024


def check_payload(payload, what: str = "payload") -> bytes:
    """A job's payload as bytes (str is UTF-8 encoded): bytes-like and at
    most MAX_PAYLOAD_BYTES long, else ArgumentError."""
    if isinstance(payload, str):
        payload = payload.encode()
    if not isinstance(payload, (bytes, bytearray, memoryview)):
        raise ArgumentError(f"{what} must be bytes or str, not {type(payload).__name__}")
    size = payload.nbytes if isinstance(payload, memoryview) else len(payload)
    if size > MAX_PAYLOAD_BYTES:
        raise ArgumentError(f"{what} is {size:,} bytes; the server takes at most {MAX_PAYLOAD_BYTES:,} "
                            f"(put large data elsewhere and enqueue a reference)")
    return bytes(payload)


def check_int(value, what: str, lo: int, hi: int) -> int:
    """An int (not a bool, float, str, NaN or inf) in [lo, hi], else ArgumentError."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ArgumentError(f"{what} must be an integer in [{lo}, {hi}], got {type(value).__name__} {value!r}")
    if not lo <= value <= hi:
        raise ArgumentError(f"{what} must be in [{lo}, {hi}], got {value!r}")
    return value


def check_token(attempts) -> int:
    """A fencing token: the ``attempts`` a claim answered."""
    return check_int(attempts, "attempts (the token)", 1, MAX_TOKEN)


def check_items(items, what: str):
    """An iterable of items (not one str, bytes or mapping, whose iteration
    would hand over characters or keys one by one)."""
    if isinstance(items, (str, bytes, bytearray, memoryview, Mapping)) or not isinstance(items, Iterable):
        raise ArgumentError(f"{what} takes an iterable of items, not one {type(items).__name__}")
    return items


ENQUEUE_OPTIONS = ("priority", "unique_key", "unique_ttl_ms")
# A mapping item's keys: a misspelt one ("delay") would otherwise be dropped
# without a word, and the job admitted as if it had not been given.
ITEM_KEYS = frozenset(("payload", "job_id", "lane", "delay_ms", *ENQUEUE_OPTIONS))


def enqueue_items(items):
    """Each enqueue_many item as (payload, job_id, lane, delay_ms, options):
    an item is a payload, or a mapping with ``payload`` and optional
    ``job_id``, ``lane``, ``delay_ms`` and the ``options`` ``priority``,
    ``unique_key``, ``unique_ttl_ms`` (the values are checked when the call
    is built)."""
    for item in check_items(items, "enqueue_many"):
        if not isinstance(item, Mapping):
            yield item, None, None, None, {}
        elif "payload" not in item:
            raise ArgumentError(f"an enqueue_many item needs a payload: {item!r}")
        elif not item.keys() <= ITEM_KEYS:
            unknown = ", ".join(sorted(repr(k) for k in item.keys() - ITEM_KEYS))
            raise ArgumentError(f"an enqueue_many item takes {', '.join(sorted(ITEM_KEYS))}; not {unknown}")
        else:
            yield (item["payload"], item.get("job_id"), item.get("lane"), item.get("delay_ms"),
                   {k: item[k] for k in ENQUEUE_OPTIONS if item.get(k) is not None})


_TUPLE, _TWO, _INT = {tuple}, {2}, {int}


def check_pairs(pairs, what: str) -> list[tuple[str, int]]:
    """(job id, attempts) pairs, each checked before anything is sent."""
    if type(pairs) is list and pairs and set(map(type, pairs)) == _TUPLE and set(map(len, pairs)) == _TWO:
        # The usual call (a consumer's acks): (str, int) tuples, checked
        # together in a few passes at C speed; anything else is checked
        # one by one below, which names the item at fault.
        job_ids, tokens = zip(*pairs)
        if (set(map(type, tokens)) == _INT and min(tokens) >= 1 and max(tokens) <= MAX_TOKEN
                and ids.all_valid(job_ids, "JOB")):
            return pairs
    out = []
    for item in check_items(pairs, what):
        if type(item) is tuple and len(item) == 2:  # the usual (str, int): the same checks, inline
            job_id, attempts = item
            if (type(job_id) is str and job_id[:3] == "JOB" and type(attempts) is int
                    and 1 <= attempts <= MAX_TOKEN and ids.is_valid(job_id)):
                out.append(item)
                continue
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise ArgumentError(f"{what} takes (job_id, attempts) pairs, got {str(item)[:80]!r}")
        out.append((keyspace.check_job_id(item[0]), check_token(item[1])))
    return out


def check_claim(n: int, lease_ms: int, consumer: str | None) -> str:
    """A claim's arguments; answers the consumer id as the script takes it ('' for none)."""
    check_int(lease_ms, "lease_ms", 1, MAX_MS)
    check_int(n, "n", 1, MAX_BATCH)
    if consumer is None:
        return ""
    consumer = keyspace._text(consumer, "consumer")
    if not ids.is_valid(consumer):
        raise ArgumentError(f"consumer must be a branded id, got {consumer!r}")
    return consumer


def check_json(value, what: str, limit: int) -> str:
    """``value`` as compact JSON of at most ``limit`` bytes (a progress
    value, a flow child's result), else ArgumentError."""
    try:
        text = json.dumps(value, allow_nan=False, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ArgumentError(f"{what} must be JSON-serialisable (no NaN or inf): {exc}") from None
    if len(text.encode()) > limit:
        raise ArgumentError(f"{what} is {len(text.encode())} bytes of JSON, more than {limit}")
    return text


def check_seconds(value, what: str) -> float:
    """A finite number of seconds, > 0 and at most MAX_MS / 1000 (a wait's timeout)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_MS / 1000:
        raise ArgumentError(f"{what} must be a number of seconds in (0, {MAX_MS // 1000}], got {value!r}")
    return float(value)
