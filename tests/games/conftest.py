"""Fixtures for the game tests: the real test database, the session's real
Valkey (``echomq.contrib.django`` is pointed at it and it is flushed per
test), and small factories."""
from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from echomq import Drop, Retry
from echomq.contrib import django as emq_django
from echomq.contrib.django import get_queue
from games import metrics as game_metrics
from games import rounds, wallet
from games.emoji_sets import SETS
from games.models import EmojiSet, Round
from games.players import ensure_player


def _private_test_database() -> None:
    """Give this pytest process its own test database.

    Several sessions run the suite in this checkout at once, and with the
    fixed test database name each one's setup destroys the others' database
    mid-run. A per-process name (pid) keeps them apart; worker subprocesses
    are pointed at whatever name is in effect (see ``procs.database_url``).

    For SQLite, also remove stale ``-wal``/``-shm`` files of that name: Django
    deletes an old test database file but not its companions, and a new
    database opened next to a stale ``-shm`` fails with "disk I/O error"."""
    from django.conf import settings

    db = settings.DATABASES["default"]  # the same dict the connection reads
    test = db.setdefault("TEST", {})
    tag = os.getpid()
    if db["ENGINE"].endswith("sqlite3"):
        base = test.get("NAME") or str(Path(settings.VAR_DIR) / "test-codemojex.sqlite3")
        stem, dot, ext = base.rpartition(".")
        name = f"{stem}-{tag}.{ext}" if dot else f"{base}-{tag}"
        for suffix in ("", "-wal", "-shm"):
            try:
                os.remove(name + suffix)
            except FileNotFoundError:
                pass
        test["NAME"] = name
    else:
        test["NAME"] = f"{test.get('NAME') or 'test_' + db['NAME']}_{tag}"


_private_test_database()


@pytest.fixture(scope="session", autouse=True)
def _remove_sqlite_companions():
    """Django removes the SQLite test database at the end, not its -wal/-shm."""
    yield
    from django.conf import settings

    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        for suffix in ("-wal", "-shm"):
            try:
                os.remove(db["TEST"]["NAME"] + suffix)
            except (FileNotFoundError, KeyError):
                pass


@pytest.fixture(autouse=True)
def valkey(valkey_server):
    """A flushed client on the test Valkey, which the game code now uses."""
    game_metrics.COUNTS.discard()  # an earlier test's unsent counts are not this test's
    client = valkey_server.client()
    client.flushall()
    emq_django.reset_client(valkey_server.url)
    yield client
    client.close()


@pytest.fixture
def emoji_set(db):
    spec = SETS["animals"]
    return EmojiSet.objects.get_or_create(slug="animals", defaults={"title": spec["title"], "emojis": spec["emojis"]})[0]


@pytest.fixture
def make_player(db):
    counter = iter(range(1, 10**6))

    def make(name: str | None = None, *, keys: int = 10, clips: int = 0, diamonds: int = 0):
        user = get_user_model().objects.create_user(name or f"player{next(counter)}", password=None)
        player = ensure_player(user)
        for currency, amount in (("keys", keys), ("clips", clips), ("diamonds", diamonds)):
            if amount:
                wallet.grant(player, currency, amount)
        return player

    return make


@pytest.fixture
def make_round(emoji_set):
    def make(*, secret: list[str] | None = None, keyboard_size=None, **kw) -> Round:
        kw.setdefault("duration", timedelta(hours=1))
        rnd = rounds.create_round(emoji_set, keyboard_size=keyboard_size, **kw)
        if secret is not None:
            return with_secret(rnd, secret)
        return rnd

    return make


def with_secret(rnd: Round, secret: list[str]) -> Round:
    """Fix a round's secret for a test (and its commitment, if blind)."""
    assert set(secret) <= set(rnd.keyboard) and len(set(secret)) == 6
    rnd.secret = list(secret)
    if rnd.kind == Round.Kind.BLIND:
        rnd.commitment = rounds.commitment(secret, rnd.nonce)
    rnd.save(update_fields=["secret", "commitment"])
    return rnd


def drain(queue_name: str, handler, *, lease_ms: int = 10_000, limit: int = 10_000) -> dict:
    """Run ``handler`` over a queue until it is empty, the way a consumer
    would (complete on return or Drop, retry otherwise). For tests that call
    the handler without starting worker processes."""
    q = get_queue(queue_name)
    seen = {"completed": 0, "dropped": 0, "retried": 0}
    for _ in range(limit):
        job = q.claim(lease_ms=lease_ms)
        if job is None:
            break
        try:
            handler(job)
        except Drop:
            seen["dropped"] += 1
            q.complete(job.id, job.attempts)
        except Retry as exc:
            seen["retried"] += 1
            q.retry(job.id, job.attempts, delay_ms=0, error=str(exc))
        else:
            seen["completed"] += 1
            q.complete(job.id, job.attempts)
    return seen


def queue_depth(name: str) -> int:
    c = get_queue(name).counts()
    return c["pending"] + c["active"] + c["scheduled"]
