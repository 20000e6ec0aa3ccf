"""Several workers in one process: each runs on its own thread until
SIGTERM/SIGINT, and one that ends on its own stops the others.

A worker is anything with ``run()`` and ``stop()`` (a Consumer, a Reaper).
``run_together`` answers False when a worker ended by itself, so the
command can exit non-zero and its supervisor restart it.
"""
from __future__ import annotations

import logging
import os
import signal
import threading

log = logging.getLogger("echomq.supervise")


def run_together(workers) -> bool:
    """Run ``workers`` until SIGTERM/SIGINT (call from the main thread);
    then stop each and wait for them to finish what they hold."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda s, f: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    threads = [threading.Thread(target=w.run, name=getattr(w, "name", type(w).__name__), daemon=True)
               for w in workers]
    healthy = True
    try:
        for t in threads:
            t.start()
        while not stop.wait(0.5):
            if not all(t.is_alive() for t in threads):
                log.error("a worker thread stopped unexpectedly; stopping the others")
                healthy = False
                break
    finally:
        log.info("pid %d stopping %d workers: finishing the jobs in hand", os.getpid(), len(workers))
        for w in workers:
            w.stop()
        for t in threads:
            t.join()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return healthy
