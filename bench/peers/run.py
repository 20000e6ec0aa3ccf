"""Subprocess entry for one peer: ``python -m bench.peers.run PEER fill|work``.

Runs in the peer's own venv; imports only the standard library, the peer's
adapter, bench.tally and bench.body (redis-py, for ``--body incr``).
"""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import time
from importlib import metadata

from bench import body
from bench.tally import Tally, emit

FILL_CHUNK = 2000  # adapters fill in chunks so a slow one can stop at its budget


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("peer")
    ap.add_argument("action", choices=("fill", "work", "version"))
    ap.add_argument("--url", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--config", default=None)
    ap.add_argument("--body", choices=body.BODIES, default="noop", help="each job's work (bench.body)")
    ap.add_argument("--fill-budget", type=float, default=60.0,
                    help="stop filling (at a chunk boundary) after this many seconds")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    mod = importlib.import_module(f"bench.peers.{a.peer}_peer")
    version = metadata.version(mod.DIST)
    if a.action == "version":
        emit("RESULT", {"version": version})
        return 0
    if a.action == "fill":
        t0 = time.perf_counter()
        filled, method = 0, ""
        while filled < a.n and (filled == 0 or time.perf_counter() - t0 < a.fill_budget):
            k = min(FILL_CHUNK, a.n - filled)
            method = mod.fill(a.url, k)
            filled += k
        dt = time.perf_counter() - t0
        emit("RESULT", {"version": version, "fill_s": dt, "filled": filled, "fill_rate": filled / dt,
                        "method": method})
        return 0
    config = a.config or next(iter(mod.CONFIGS))
    tally = Tally(a.n, body=body.make(a.body, url=a.url))
    tally.on_done = lambda: emit("RESULT", tally.result(version=version, config=config,
                                                        describe=mod.CONFIGS[config]))
    mod.work(a.url, a.n, a.concurrency, config, tally, lambda: emit("READY"))
    # Adapters block until killed; one that returns (burst mode) waits here.
    tally.done.wait(60)
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
