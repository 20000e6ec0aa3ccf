"""The cost of the Django task path against a direct EchoMQ queue, per job.

    .venv/bin/python -m bench.tasks_path            # 2,000 jobs x 3 rounds
    .venv/bin/python -m bench.tasks_path --jobs 500 --rounds 1

Both sides run a handler that does nothing, so the figures are pure overhead:

* direct: ``Queue.enqueue`` of a small JSON payload; a Consumer whose
  handler parses it (what ``run_scoreworker`` does before scoring).
* task:   ``@task(...).enqueue()`` (validation, JSON checks, the result
  record and the job); ``run_tasks``' Runner (result RUNNING, import and
  call, result SUCCESSFUL: two more script calls per job).

One consumer thread, ``prefetch=0`` (the workers' default), one private
valkey-server; direct and task alternate within each round so a noisy
neighbour hurts both. Prints a table: median microseconds per job.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DIRECT = "bench.direct"
TASKS = "default"


def _setup(url: str) -> None:
    sys.path.insert(0, str(REPO))
    os.environ["VALKEY_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "codemojex_site.settings")
    import django

    django.setup()


def _drain(queue, handler, n: int) -> float:
    """Seconds for one consumer to complete ``n`` jobs already queued."""
    from echomq import Consumer

    consumer = Consumer(queue, handler, concurrency=1, beat_ms=50, name=f"bench/{queue.name}")
    start = time.perf_counter()
    thread = threading.Thread(target=consumer.run, daemon=True)
    thread.start()
    while consumer.stats["completed"] < n:
        time.sleep(0.005)
    took = time.perf_counter() - start
    consumer.stop()
    thread.join()
    return took


def run(jobs: int, rounds: int) -> dict:
    from django.tasks import task_backends

    from bench import task_jobs
    from echomq.contrib.django import get_client, get_queue
    from echomq.contrib.django.tasks import Runner

    client = get_client()
    direct, tasks = get_queue(DIRECT), get_queue(TASKS)
    runner = Runner(task_backends["default"])

    def parse(job):
        json.loads(job.payload)

    figures = {k: [] for k in ("direct enqueue", "task enqueue", "direct handle", "task handle")}
    for _ in range(rounds):
        client.flushall()
        t = time.perf_counter()
        for i in range(jobs):
            direct.enqueue(json.dumps({"guess": f"G{i}", "round": "R"}))
        figures["direct enqueue"].append((time.perf_counter() - t) / jobs)
        t = time.perf_counter()
        for i in range(jobs):
            task_jobs.noop.enqueue(f"G{i}", "R")
        figures["task enqueue"].append((time.perf_counter() - t) / jobs)
        figures["direct handle"].append(_drain(direct, parse, jobs) / jobs)
        figures["task handle"].append(_drain(tasks, runner, jobs) / jobs)
    return {k: statistics.median(v) * 1e6 for k, v in figures.items()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    from echomq import embedded

    work = Path(tempfile.mkdtemp(prefix="bench-tasks-"))
    port = embedded.free_port()
    server = embedded.start_server(work, port, appendonly=False)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        embedded.wait_ready(url, proc=server)
        _setup(url)
        import logging

        logging.disable(logging.INFO)  # one log line per task would time the logger
        us = run(args.jobs, args.rounds)
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    rows = [("enqueue", us["direct enqueue"], us["task enqueue"]),
            ("handle (claim, run, settle)", us["direct handle"], us["task handle"])]
    print(f"\nTask path vs direct queue: median us/job over {args.rounds} round(s) of {args.jobs} jobs "
          f"(no-op handler, 1 consumer thread, prefetch 0; shared machine, so compare within a run)\n")
    print(f"{'':30} {'direct':>10} {'task':>10} {'task/direct':>12}")
    for name, d, t in rows:
        print(f"{name:30} {d:10.1f} {t:10.1f} {t / d:11.2f}x")


if __name__ == "__main__":
    main()
