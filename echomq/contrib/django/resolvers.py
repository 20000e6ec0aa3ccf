"""How the queue pages link a job to the application's own records.

EchoMQ knows jobs, not guesses or rounds: an application registers one
``Resolver`` per queue (typically in its ``AppConfig.ready``), and the
dashboard asks it what a job is about. So the job page can link to "guess
GES…, player alice, round RND…", say what the database knows of a job that
has finished (and left no row), warn on the confirmation page what removing
it means, offer an extra way to remove it (e.g. "remove and refund"), and
find jobs by the application's ids in the dashboard's search box, and name
a queue's lanes (a lane is an application id: "alice" reads better than
``PLR0Sb0dMhvlxI``). This module imports nothing of the application.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass
class RemoveOption:
    """An extra button on a job's remove-confirmation page. ``run(user)``
    does the application's part (it must be safe to call twice) and answers
    a sentence for the operator; the dashboard removes the job after it."""

    name: str
    label: str
    explain: str
    permission: str | None
    run: Callable


@dataclass
class About:
    """What the application knows of one job."""

    title: str
    links: list[tuple[str, str]] = field(default_factory=list)  # (label, url)
    facts: list[tuple[str, str]] = field(default_factory=list)  # (name, value), from the database
    on_remove: str = ""  # what removing the job means, in words
    on_requeue: str = ""
    remove_options: list[RemoveOption] = field(default_factory=list)


@dataclass
class Found:
    """One search result: a job of a queue, with a label."""

    queue: str
    job_id: str
    label: str


class Resolver:
    """Subclass and override what the queue's jobs support."""

    def describe(self, job_id: str, payload: bytes | None, user) -> About | None:
        """What the job is about; ``payload`` is None when the job has no row
        (finished, removed, or never enqueued)."""
        return None

    def search(self, term: str, user) -> list[Found]:
        """Jobs this queue holds (or held) for an application id or name."""
        return []

    def lane_labels(self, lanes: list[str], user) -> dict[str, str]:
        """A readable name for each lane it knows (lanes left out show as
        their ids); one call per page, for every lane the page shows."""
        return {}


_registry: dict[str, Resolver] = {}


def register(queue: str, resolver: Resolver) -> None:
    _registry[queue] = resolver


def unregister(queue: str) -> None:
    _registry.pop(queue, None)


def resolver_for(queue: str) -> Resolver | None:
    return _registry.get(queue)


def registered() -> dict[str, Resolver]:
    return dict(_registry)
