"""Key builders for the ``emq:{q}:<suffix>`` grammar.

Every key of queue ``q`` carries the hash tag ``{q}``, so a queue lives in one
cluster slot and every script touches one slot only. Builders validate names
and ids here, in Python, so an ill-formed value never reaches Valkey.
"""
from __future__ import annotations

import re

from . import ids
from .errors import ArgumentError, InvalidName, KindError

QUEUE_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")
SUFFIX = re.compile(r"[A-Za-z0-9._:-]{1,200}")


def _text(value, what: str) -> str:
    """A name must be text: anything else (an int, None) is a wrong argument,
    not an ill-formed name."""
    if isinstance(value, bytes):
        return value.decode("ascii", "replace")
    if not isinstance(value, str):
        raise ArgumentError(f"{what} must be a str, got {type(value).__name__} {value!r}")
    return value


def check_queue(q: str) -> str:
    q = _text(q, "queue name")
    if not QUEUE_NAME.fullmatch(q) or q == "emq":
        raise InvalidName(f"ill-formed queue name: {q!r} (want [A-Za-z0-9._-]{{1,128}}, not 'emq')")
    return q


def check_job_id(job_id: str) -> str:
    job_id = _text(job_id, "job id")
    if not ids.is_valid(job_id):
        raise InvalidName(f"ill-formed job id: {job_id!r}")
    if job_id[:3] != "JOB":
        raise KindError(f"job id must be JOB-branded, got {job_id!r}")
    return job_id


def check_lane(lane: str) -> str:
    lane = _text(lane, "lane")
    if not ids.is_valid(lane):
        raise InvalidName(f"ill-formed lane name: {lane!r} (lanes are branded ids)")
    return lane


def prefix(q: str) -> str:
    """``emq:{q}:``, the prefix every key of the queue starts with."""
    return f"emq:{{{check_queue(q)}}}:"


def queue_key(q: str, suffix: str) -> str:
    if not isinstance(suffix, str) or not SUFFIX.fullmatch(suffix):
        raise InvalidName(f"ill-formed key suffix: {suffix!r}")
    return prefix(q) + suffix


def job_key(q: str, job_id: str) -> str:
    return prefix(q) + "job:" + check_job_id(job_id)


def lane_key(q: str, lane: str, suffix: str = "pending") -> str:
    """A lane's key; ``pending`` (its ready set) unless ``suffix`` says ``meta``."""
    if suffix not in ("pending", "meta"):
        raise InvalidName(f"unknown lane key suffix: {suffix!r}")
    return f"{prefix(q)}g:{check_lane(lane)}:{suffix}"


def hash_tag(key: str | bytes) -> bytes:
    """The part of ``key`` that Redis Cluster hashes (the first non-empty ``{...}``)."""
    k = key.encode() if isinstance(key, str) else key
    start = k.find(b"{")
    if start != -1:
        end = k.find(b"}", start + 1)
        if end != -1 and end != start + 1:
            return k[start + 1 : end]
    return k


def _crc16_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return table


_TABLE = _crc16_table()


def crc16(data: bytes) -> int:
    """CRC16/XMODEM: polynomial 0x1021, initial value 0."""
    crc = 0
    for b in data:
        crc = ((crc << 8) & 0xFFFF) ^ _TABLE[((crc >> 8) ^ b) & 0xFF]
    return crc


def slot(key: str | bytes) -> int:
    """The cluster slot of ``key``."""
    return crc16(hash_tag(key)) % 16384


# The fixed keys of a queue, for docs, dashboards and the one-slot test.
SUFFIXES = ("pending", "ring", "active", "schedule", "dead", "wake", "meta", "lanes", "done", "done:rows",
            "schedules", "cooling", "events", "events:readers", "waiting")
