"""Branded ids: a 3-letter brand and 11 base62 characters, 14 ASCII bytes.

The 11 characters carry a 63-bit snowflake ``(ms << 22) | (node << 12) | seq``
with milliseconds counted from 2024-01-01T00:00:00Z. The alphabet is in ASCII
order and the width is fixed, so mint order, integer order, byte order and a
sorted set's lexicographic order are all the same order. That is what lets a
score-0 sorted set hand out the oldest job with ZPOPMIN.
"""
from __future__ import annotations

import os
import re
import threading
import time

from .errors import ArgumentError, InvalidName

ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
WIDTH = 11
LENGTH = 3 + WIDTH
MAX_N = (1 << 63) - 1
EPOCH_MS = 1704067200000  # 2024-01-01T00:00:00Z

NODE_BITS = 10
SEQ_BITS = 12
MAX_NODE = (1 << NODE_BITS) - 1
MAX_SEQ = (1 << SEQ_BITS) - 1
MAX_MINT_SEQ = (1 << (SEQ_BITS - 1)) - 1  # a minter's per-ms sequence; the top half is schedule ticks'

_INDEX = {c: i for i, c in enumerate(ALPHABET)}
_BRAND = re.compile(r"[A-Z]{3}")


_PAIRS = [a + b for a in ALPHABET for b in ALPHABET]  # two digits at a time: 62**2 strings


def _encode_n(n: int) -> str:
    """``n`` (0 <= n <= MAX_N) as WIDTH base62 digits, two per division."""
    out = []
    for _ in range(WIDTH // 2):
        n, r = divmod(n, 3844)
        out.append(_PAIRS[r])
    out.append(ALPHABET[n])  # WIDTH is odd: one digit is left, and n < 62 here
    return "".join(reversed(out))


MAX_PAYLOAD = _encode_n(MAX_N)  # "AzL8n0Y58m7"
_SHAPE = re.compile(r"[A-Z]{3}[0-9A-Za-z]{11}")


def encode(brand: str, n: int) -> str:
    """Return the branded id for ``brand`` and integer ``n``."""
    if not isinstance(brand, str) or not _BRAND.fullmatch(brand):
        raise InvalidName(f"brand must be three upper-case letters, got {brand!r}")
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= MAX_N:
        raise InvalidName(f"n must be an integer in [0, 2**63-1], got {n!r}")
    return brand + _encode_n(n)


def is_valid(s: object) -> bool:
    """True when ``s`` has the shape of a branded id (str or bytes)."""
    if isinstance(s, bytes):
        try:
            s = s.decode("ascii")
        except UnicodeDecodeError:
            return False
    if not isinstance(s, str) or len(s) != LENGTH or not _SHAPE.fullmatch(s):
        return False
    # Fixed width and ASCII-ordered alphabet: string comparison is numeric comparison.
    return s[3:] <= MAX_PAYLOAD


def all_valid(strings, brand: str) -> bool:
    """True when every item of ``strings`` (a non-empty sequence) is a str
    with the shape of a ``brand`` id, as ``is_valid`` checks one: the
    strings joined and matched by one regex, and the largest compared with
    the largest id (a consumer's acks check a few dozen ids per round trip,
    and one ``is_valid`` call each cost more than the rest of the ack)."""
    shape = _MANY.get(brand)
    if shape is None:
        if not _BRAND.fullmatch(brand):
            raise InvalidName(f"brand must be three upper-case letters, got {brand!r}")
        one = brand + "[0-9A-Za-z]{%d}" % WIDTH
        shape = _MANY.setdefault(brand, re.compile(f"{one}(?:\n{one})*"))
    try:
        joined = "\n".join(strings)  # TypeError: an item that is not a str
    except TypeError:
        return False
    # As long as n ids and their n - 1 newlines: no item holds a newline,
    # so the ids the regex found are the items. Fixed width, one brand and
    # an ASCII-ordered alphabet: the largest string is the largest number.
    return (len(joined) == len(strings) * (LENGTH + 1) - 1 and shape.fullmatch(joined) is not None
            and max(strings)[3:] <= MAX_PAYLOAD)


_MANY: dict[str, re.Pattern] = {}


def parse(s: str | bytes) -> tuple[str, int]:
    """Split a branded id into ``(brand, n)``; InvalidName (a ValueError) when ill-formed."""
    if not is_valid(s):
        raise InvalidName(f"ill-formed branded id: {s!r}")
    if isinstance(s, bytes):
        s = s.decode("ascii")
    n = 0
    for c in s[3:]:
        n = n * 62 + _INDEX[c]
    return s[:3], n


def brand_of(s: str | bytes) -> str:
    return parse(s)[0]


class Minter:
    """Mints strictly increasing snowflakes for one node; safe across threads.

    When the wall clock stalls or steps back we keep counting from the last
    value, and a full sequence borrows into the next millisecond, so ids never
    repeat or go backwards within a process. A minter's sequence is 0..2047
    (MAX_MINT_SEQ): ids with the sequence's top bit set are the ticks of
    schedules (:func:`echomq.schedules.tick_job_id`), so no minted id is one.
    """

    def __init__(self, node: int | None = None, clock=time.time_ns):
        if node is None:
            node = int(os.environ.get("ECHOMQ_NODE_ID", os.getpid())) & MAX_NODE
        if not 0 <= node <= MAX_NODE:
            raise ArgumentError(f"node id must be in [0, {MAX_NODE}], got {node}")
        self.node = node
        self._clock = clock
        self._lock = threading.Lock()
        self._last_ms = -1
        self._seq = 0

    def next_n(self) -> int:
        with self._lock:
            now = self._clock() // 1_000_000 - EPOCH_MS
            if now > self._last_ms:
                self._last_ms, self._seq = now, 0
            elif self._seq < MAX_MINT_SEQ:
                self._seq += 1
            else:
                self._last_ms, self._seq = self._last_ms + 1, 0
            return (self._last_ms << (NODE_BITS + SEQ_BITS)) | (self.node << SEQ_BITS) | self._seq

    def mint(self, brand: str) -> str:
        if brand.__class__ is not str or brand not in _BRANDS_SEEN:  # checked once per brand; n is ours
            encode(brand, 0)  # InvalidName for a bad brand (a list, say, before it reaches the set)
            _BRANDS_SEEN.add(brand)
        return brand + _encode_n(self.next_n())


_BRANDS_SEEN: set[str] = set()
_default = Minter()


def set_node(node: int) -> None:
    """Choose this process's node id (0..1023) for ids minted by :func:`mint`."""
    global _default
    _default = Minter(node)


def mint(brand: str) -> str:
    """Mint a new branded id with the process-wide minter."""
    return _default.mint(brand)


def minted_at_ms(s: str | bytes) -> int:
    """Unix milliseconds at which a snowflake id was minted."""
    return (parse(s)[1] >> (NODE_BITS + SEQ_BITS)) + EPOCH_MS
