"""The cluster run: the same no-op drain on one Valkey node and on a local
3-primary Valkey Cluster with a sharded queue, side by side in one run.

    .venv/bin/python -m bench.cluster            # n=20000 per drain
    .venv/bin/python -m bench.cluster --quick    # n=3000

Each drain: fill n flat jobs, pause the queue, start the worker processes
(echomq.Consumer, no-op handler), reset every node's stats, resume, and time
until every job is completed. Valkey's cost per job is read from each
primary's INFO commandstats (EVALSHA microseconds include the commands the
scripts run) and INFO cpu, summed over the primaries. Rows:

* 1 node, Queue          -- today's layout
* 1 node, ShardedQueue   -- the sharding overhead without a cluster
* 3 primaries, ShardedQueue -- the cluster layout

The machine this runs on is small and shared: the cluster's three primaries,
the workers and this process compete for the same cores, so the cluster row
shows cost per job and "no worse than one node", not the scale-out a cluster
on separate hosts gives (docs/scaling.md does that arithmetic).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

REPO = Path(__file__).resolve().parent.parent
QUEUE = "benchc"


def log(msg: str) -> None:
    print(f"[bench.cluster {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def make_queue(url: str, cluster: bool, shards: int):
    from echomq import Queue, ShardedQueue

    if cluster:
        from redis.cluster import RedisCluster

        client = RedisCluster.from_url(url)
    else:
        client = redis.Redis.from_url(url)
    return ShardedQueue(QUEUE, client, shards=shards) if shards > 1 else Queue(QUEUE, client)


def worker(a) -> int:
    """One worker process: a Consumer with a no-op handler until SIGTERM."""
    from echomq import Consumer

    q = make_queue(a.url, a.cluster, a.shards)
    c = Consumer(q, lambda job: None, concurrency=a.concurrency, prefetch=a.prefetch, lease_ms=30_000)
    print("READY", flush=True)
    c.run()
    return 0


def primaries(url: str, cluster: bool) -> list[redis.Redis]:
    if not cluster:
        return [redis.Redis.from_url(url)]
    from redis.cluster import RedisCluster

    rc = RedisCluster.from_url(url)
    return [redis.Redis(host=n.host, port=n.port) for n in rc.get_primaries()]


def completed(q) -> int:
    shards = getattr(q, "shards", [q])
    pipe = q.client.pipeline(transaction=False)
    for s in shards:
        pipe.hget(s.k_meta, "completed")
    return sum(int(v or 0) for v in pipe.execute())


def drain(label: str, url: str, cluster: bool, shards: int, n: int, workers: int, concurrency: int,
          prefetch: int, logdir: Path, timeout: float) -> dict:
    q = make_queue(url, cluster, shards)
    nodes = primaries(url, cluster)
    for r in nodes:
        r.flushall()
    log(f"{label}: fill {n}")
    for i in range(0, n, 1000):
        q.enqueue_many([b"x"] * min(1000, n - i))
    q.pause()
    argv = [sys.executable, "-m", "bench.cluster", "worker", "--url", url, "--shards", str(shards),
            "--concurrency", str(concurrency), "--prefetch", str(prefetch)] + (["--cluster"] if cluster else [])
    procs = []
    for i in range(workers):
        out = open(logdir / f"{label.replace(' ', '_')}-{i}.log", "w")
        procs.append(subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=out, text=True))
    try:
        for p in procs:
            if p.stdout.readline().strip() != "READY":
                return {"label": label, "status": "worker did not start"}
        for r in nodes:
            r.config_resetstat()
        cpu0 = sum(_cpu(r) for r in nodes)
        t0 = time.perf_counter()
        q.resume()
        while completed(q) < n:
            if time.perf_counter() - t0 > timeout:
                return {"label": label, "status": f"timeout at {completed(q)}/{n}"}
            time.sleep(0.05)
        wall = time.perf_counter() - t0
        cpu = sum(_cpu(r) for r in nodes) - cpu0
        stats = [r.info("commandstats") for r in nodes]
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
    ev_usec = sum(s.get("cmdstat_evalsha", {}).get("usec", 0) for s in stats)
    ev_calls = sum(s.get("cmdstat_evalsha", {}).get("calls", 0) for s in stats)
    counts = q.counts()
    return {"label": label, "status": "ok" if counts["completed"] == n and not counts["pending"] else
            f"CHECK {counts}", "n": n, "wall_s": wall, "rate": n / wall,
            "evalsha_us_per_job": ev_usec / n, "evalsha_calls_per_job": ev_calls / n,
            "cpu_us_per_job": cpu * 1e6 / n, "nodes": len(nodes)}


def _cpu(r: redis.Redis) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.cluster", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd")
    w = sub.add_parser("worker")
    w.add_argument("--url", required=True)
    w.add_argument("--cluster", action="store_true")
    w.add_argument("--shards", type=int, default=1)
    w.add_argument("--concurrency", type=int, default=4)
    w.add_argument("--prefetch", type=int, default=64)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--n", type=int)
    ap.add_argument("--shards", type=int, default=6)
    ap.add_argument("--workers", type=int, default=2, help="worker processes per drain")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--prefetch", type=int, default=64)
    ap.add_argument("--json", metavar="PATH")
    a = ap.parse_args(argv)
    if a.cmd == "worker":
        return worker(a)

    from echomq import embedded

    n = a.n or (3_000 if a.quick else 20_000)
    logdir = Path(tempfile.mkdtemp(prefix="emq-bench-cluster-"))
    log(f"starting one node and a 3-primary cluster (no replicas, no AOF: as the main bench); logs {logdir}")
    single_dir = logdir / "single"
    port = embedded.free_port()
    single = embedded.start_server(single_dir, port, appendonly=False)
    single_url = f"redis://127.0.0.1:{port}/0"
    embedded.wait_ready(single_url, proc=single)
    cluster = embedded.LocalCluster(logdir / "cluster", primaries=3, replicas=0, appendonly=False).start()
    rows = []
    try:
        common = dict(n=n, workers=a.workers, concurrency=a.concurrency, prefetch=a.prefetch, logdir=logdir,
                      timeout=600)
        rows.append(drain("1 node, Queue", single_url, False, 1, **common))
        rows.append(drain(f"1 node, ShardedQueue x{a.shards}", single_url, False, a.shards, **common))
        rows.append(drain(f"3 primaries, ShardedQueue x{a.shards}", cluster.url, True, a.shards, **common))
    finally:
        single.terminate()
        single.wait(10)
        cluster.stop(remove=True)
    print(f"\nEchoMQ cluster bench: n={n} per drain, {a.workers} worker processes x concurrency "
          f"{a.concurrency} prefetch {a.prefetch}; cores {os.cpu_count()} load {os.getloadavg()[0]:.1f} "
          f"(shared machine: figures are noisy, compare rows of this one run)")
    header = ["layout", "status", "jobs/s", "x 1 node", "EVALSHA us/job", "EVALSHA calls/job", "Valkey CPU us/job"]
    base = rows[0].get("rate")
    table = [[r["label"], r["status"], f"{r['rate']:,.0f}" if "rate" in r else "-",
              f"{r['rate'] / base:.2f}x" if "rate" in r and base else "-",
              f"{r['evalsha_us_per_job']:.2f}" if "rate" in r else "-",
              f"{r['evalsha_calls_per_job']:.3f}" if "rate" in r else "-",
              f"{r['cpu_us_per_job']:.1f}" if "rate" in r else "-"] for r in rows]
    widths = [max(len(str(x[i])) for x in [header] + table) for i in range(len(header))]
    for line in [header, ["-" * w for w in widths]] + table:
        print("  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w) for i, (c, w) in enumerate(zip(line, widths))))
    print("EVALSHA us/job: INFO commandstats, summed over the primaries (script time includes the commands it"
          " runs); Valkey CPU: INFO cpu used_cpu_user+sys, summed (includes networking and idle ticks).")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2))
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
