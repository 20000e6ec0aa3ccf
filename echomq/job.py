"""The job a consumer holds."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Job:
    """A claimed job. ``attempts`` is the fencing token: pass it back to
    complete, retry, extend or release; it holds only while this claim does."""

    id: str
    payload: bytes
    attempts: int
    lane: str | None = None
    queue: str = ""

    @property
    def token(self) -> int:
        return self.attempts
