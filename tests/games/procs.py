"""Starting ``manage.py`` processes against the test database and Valkey,
and waiting on conditions (never a bare sleep)."""
from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings

ROOT = Path(settings.BASE_DIR)


def database_url() -> str:
    """The test database (pytest-django has renamed NAME by now)."""
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return "sqlite:///" + str(Path(db["NAME"]).resolve())
    auth = db.get("USER") or ""
    if db.get("PASSWORD"):
        auth += ":" + db["PASSWORD"]
    return f"postgres://{auth}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


def env_for(valkey_url: str, node: int) -> dict:
    env = dict(os.environ)
    env.update(DATABASE_URL=database_url(), VALKEY_URL=valkey_url, PYTHONUNBUFFERED="1",
               ECHOMQ_NODE_ID=str(node), LOG_LEVEL="INFO")
    return env


class Proc:
    """One ``manage.py`` child with its output in a log file."""

    _node = itertools.count()

    def __init__(self, args: list[str], valkey_url: str, log_dir: Path, name: str):
        self.args, self.valkey_url, self.log_dir, self.name = args, valkey_url, log_dir, name
        self.starts = 0
        self.popen: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        self.starts += 1
        log = open(self.log_dir / f"{self.name}.{self.starts}.log", "wb")
        self.popen = subprocess.Popen([sys.executable, "manage.py", *self.args], cwd=ROOT, stdout=log,
                                      stderr=subprocess.STDOUT, env=env_for(self.valkey_url, 100 + next(self._node) % 900))
        log.close()

    def ready(self, marker: str) -> bool:
        """Whether the current incarnation has logged ``marker`` (e.g. its consumer started)."""
        path = self.log_dir / f"{self.name}.{self.starts}.log"
        return path.exists() and marker in path.read_text(errors="replace")

    def kill(self) -> None:
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(10)

    def terminate(self, timeout: float = 30) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                return self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
                raise
        return self.popen.returncode

    def output(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.log_dir.glob(f"{self.name}.*.log")))


def wait_for(predicate, *, timeout: float, every: float = 0.1, what: str = "condition"):
    """Poll ``predicate`` until it is truthy or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


def wait_for_progress(done, progress, *, stall_s: float, cap_s: float, every: float = 0.25,
                      what: str = "condition"):
    """Poll ``done`` until truthy; fail if ``progress()`` has not changed for
    ``stall_s`` seconds (stuck) or after ``cap_s`` seconds in all. A slow,
    loaded machine passes; a stuck system fails fast."""
    start = last_change = time.monotonic()
    last = progress()
    while not done():
        now = time.monotonic()
        value = progress()
        if value != last:
            last, last_change = value, now
        if now - last_change > stall_s:
            raise AssertionError(f"no progress for {stall_s}s (at {last}) waiting for {what}")
        if now - start > cap_s:
            raise AssertionError(f"timed out after {cap_s}s (at {last}) waiting for {what}")
        time.sleep(every)
