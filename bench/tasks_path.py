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
valkey-server; direct and task alternate within each round (and which goes
first alternates between rounds) so a noisy neighbour hurts both. Prints
microseconds per job: wall time, and CPU time (this process plus the
valkey-server's), which other load on a shared machine sways far less.
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


def _drain(queue, handler, n: int) -> None:
    """Run one consumer until it has completed ``n`` jobs already queued."""
    from echomq import Consumer

    consumer = Consumer(queue, handler, concurrency=1, beat_ms=50, name=f"bench/{queue.name}")
    thread = threading.Thread(target=consumer.run, daemon=True)
    thread.start()
    while consumer.stats["completed"] < n:
        time.sleep(0.005)
    consumer.stop()
    thread.join()


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

    def enqueue_direct():
        for i in range(jobs):
            direct.enqueue(json.dumps({"guess": f"G{i}", "round": "R"}))

    def enqueue_task():
        for i in range(jobs):
            task_jobs.noop.enqueue(f"G{i}", "R")

    steps = {"direct enqueue": enqueue_direct, "task enqueue": enqueue_task,
             "direct handle": lambda: _drain(direct, parse, jobs), "task handle": lambda: _drain(tasks, runner, jobs)}
    def server_cpu() -> float:
        info = client.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

    figures = {(k, m): [] for k in steps for m in ("wall", "cpu")}
    for n in range(rounds):
        client.flushall()
        first, second = ("direct", "task") if n % 2 == 0 else ("task", "direct")  # alternate who goes first
        for step in (f"{first} enqueue", f"{second} enqueue", f"{first} handle", f"{second} handle"):
            wall, cpu, srv = time.perf_counter(), time.process_time(), server_cpu()
            steps[step]()
            figures[step, "wall"].append((time.perf_counter() - wall) / jobs * 1e6)
            figures[step, "cpu"].append((time.process_time() - cpu + server_cpu() - srv) / jobs * 1e6)
    return figures


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
        figures = run(args.jobs, args.rounds)
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nTask path vs direct queue: us per job, median of {args.rounds} round(s) of {args.jobs} jobs "
          f"(no-op handler, 1 consumer thread, prefetch 0).\nwall: elapsed time, swayed by other load on a shared "
          f"machine; cpu: this process's CPU time plus valkey-server's (INFO cpu), the cost itself.\n")
    print(f"{'':28} {'direct':>8} {'task':>8} {'ratio':>7}   {'direct':>8} {'task':>8} {'ratio':>7}")
    print(f"{'':28} {'wall':>8} {'wall':>8} {'':>7}   {'cpu':>8} {'cpu':>8}")
    for name in ("enqueue", "handle"):
        cells = []
        for metric in ("wall", "cpu"):
            d = statistics.median(figures[f"direct {name}", metric])
            t = statistics.median(figures[f"task {name}", metric])
            cells.append(f"{d:8.0f} {t:8.0f} {t / d:6.2f}x")
        print(f"{name + (' (claim, run, settle)' if name == 'handle' else ''):28} " + "   ".join(cells))


if __name__ == "__main__":
    main()
