"""Running the Node client (clients/node) from the tests: its CLI as a real
process, with its output in a log file the test reads."""
from __future__ import annotations

import shutil
import signal
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NODE_DIR = ROOT / "clients" / "node"
CLI = NODE_DIR / "bin" / "echomq.js"


def node() -> str:
    """The node binary; skips (saying why) where there is none, fails where
    the client's npm dependencies were not installed (./dev test runs npm ci)."""
    path = shutil.which("node")
    if path is None:
        pytest.skip("node is not installed: the Node client cannot run here")
    if not (NODE_DIR / "node_modules" / "iovalkey").is_dir():
        pytest.fail("clients/node has no node_modules: run ./dev test (it runs npm ci there)")
    return path


def url_of(client) -> str:
    """The redis:// URL of a redis-py client's server and database."""
    kw = client.connection_pool.connection_kwargs
    auth = f":{kw['password']}@" if kw.get("password") else ""
    return f"redis://{auth}{kw.get('host', '127.0.0.1')}:{kw.get('port', 6379)}/{kw.get('db', 0)}"


def run(*args, input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the CLI to its end."""
    return subprocess.run([node(), str(CLI), *args], input=input, capture_output=True, text=True,
                          timeout=timeout, cwd=NODE_DIR)


class NodeProc:
    """A long-running CLI process (a consumer) with its output in ``log``."""

    def __init__(self, log: Path, *args):
        self.log = log
        self._out = open(log, "wb")
        self.popen = subprocess.Popen([node(), str(CLI), *args], stdout=self._out, stderr=subprocess.STDOUT,
                                      cwd=NODE_DIR)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, sig=None, timeout: float = 30) -> int:
        """Send SIGTERM (or ``sig``) and wait for the exit code."""
        if self.popen.poll() is None:
            self.popen.send_signal(sig or signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        finally:
            self._out.close()

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(10)
        self._out.close()
