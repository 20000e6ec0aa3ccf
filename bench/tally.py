"""In-process job counting shared by every worker the bench runs.

Each system's no-op handler calls ``Tally.hit()``. The drain rate of every
system (EchoMQ and peers alike) is measured the same way, inside the worker
process: ``(n - 1) / (t_last - t_first)`` between the first and the n-th
handler call, which leaves out interpreter start, imports, connection set-up
and each library's boot steps. The worker's CPU time over the same window is
reported too. No Redis traffic is added per job, unless the run gives a
``body``: the job's own work, run by ``hit()`` before it counts (the
realistic workload of ``bench.work``: one INCR through a shared client).

Workers talk to the harness with lines on stdout:
``READY``, ``PROGRESS <count> <s since first job> <cpu s since then>`` (each second) and ``RESULT <json>``.
This module imports nothing outside the standard library, so it loads in the
peers' venvs.
"""
from __future__ import annotations

import json
import sys
import threading
import time


def emit(kind: str, payload=None) -> None:
    line = kind if payload is None else f"{kind} {payload if isinstance(payload, str) else json.dumps(payload)}"
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class Tally:
    def __init__(self, n: int, on_done=None, *, progress: bool = True, body=None):
        self.n = n
        self.body = body
        self.count = 0
        self.on_done = on_done
        self.done = threading.Event()
        self.t_first = self.t_last = None
        self.cpu_first = self.cpu_last = None
        self._lock = threading.Lock()
        if progress:
            threading.Thread(target=self._progress, daemon=True, name="bench-progress").start()

    def hit(self) -> None:
        if self.body is not None:
            self.body()
        with self._lock:
            self.count += 1
            c = self.count
            if c == 1:
                self.t_first, self.cpu_first = time.perf_counter(), time.process_time()
            if c != self.n:
                return
            self.t_last, self.cpu_last = time.perf_counter(), time.process_time()
        self.done.set()
        if self.on_done is not None:
            self.on_done()

    def _progress(self) -> None:
        # "PROGRESS <count> <seconds since the first job>": lets the harness
        # rate a worker that did not finish within its time budget.
        while not self.done.wait(1.0):
            with self._lock:
                count, first, cpu = self.count, self.t_first, self.cpu_first
            if first is not None:
                emit("PROGRESS", f"{count} {time.perf_counter() - first:.4f} "
                                 f"{time.process_time() - cpu:.4f}")

    def result(self, **extra) -> dict:
        span = (self.t_last - self.t_first) if self.t_last is not None else None
        out = {"n": self.n, "count": self.count, "span_s": span}
        if span and self.n > 1:
            out["rate"] = (self.n - 1) / span
            out["cpu_us_per_job"] = (self.cpu_last - self.cpu_first) / (self.n - 1) * 1e6
        out.update(extra)
        return out


def report_when_done(tally: Tally, **extra) -> None:
    """Print the RESULT line once the tally completes (called from on_done)."""
    emit("RESULT", tally.result(**extra))
