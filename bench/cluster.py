"""The cluster run: the same no-op drain on one Valkey node and on a local
3-primary Valkey Cluster with a sharded queue, side by side in one run.

    .venv/bin/python -m bench.cluster            # n=20000 per drain
    .venv/bin/python -m bench.cluster --quick    # n=3000
    .venv/bin/python -m bench.cluster instructions   # server instructions per job (valgrind)
    .venv/bin/python -m bench.cluster latency        # wake latency, this tree vs main, quiet and busy

Each drain: fill n flat jobs, pause the queue, start the worker processes
(echomq.Consumer, no-op handler), reset every node's stats, resume, and time
until every job is completed. Valkey's cost per job is read from each
primary's INFO commandstats (EVALSHA microseconds include the commands the
scripts run) and INFO cpu, summed over the primaries. Rows:

* 1 node, Queue          -- today's layout
* 1 node, ShardedQueue   -- the sharding overhead without a cluster
* 3 primaries, ShardedQueue -- the cluster layout

``latency``: enqueue -> handler start on a 16-shard queue over the 3
primaries, one idle consumer process (concurrency 2), an open-loop producer
(40 jobs/s, each on a new lane, so on any shard; the payload is the time
just before its enqueue, as the test of an idle sharded consumer takes it,
so a producer the machine delays does not count). The consumer parks
between jobs, so each job is a wake-up. Rows: this tree and
``--base`` (main), each quiet and busy (``--busy`` processes spinning on
the CPU beside it, as other sessions do on this machine), interleaved over
``--rounds``; p50/p90/p99/max in ms.

The machine this runs on is small and shared: the cluster's three primaries,
the workers and this process compete for the same cores, so the cluster row
shows cost per job and "no worse than one node", not the scale-out a cluster
on separate hosts gives (docs/scaling.md does that arithmetic).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
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


# -- wake latency on a sharded queue --------------------------------------------
LAT_QUEUE = "benchlat"


def lat_worker(a) -> int:
    """One idle consumer: the handler records now - payload (ms); prints
    READY, then a RESULT line with the latencies once n jobs are done, and
    a STAGES line: per job, when the parked call answered and when the
    claim's reply came back (the wake-up's stages, for where the time goes)."""
    from redis.cluster import RedisCluster

    from echomq import Consumer, ShardedQueue
    from echomq.sharded import ShardParking

    q = ShardedQueue(LAT_QUEUE, RedisCluster.from_url(a.url), shards=a.shards)
    got: list[float] = []
    stages: list[tuple[float, float]] = []  # (answered, claimed) - payload, ms
    marks = {"answered": 0.0, "claimed": 0.0}
    warm = [True]
    done = threading.Event()
    select, parse_claim = ShardParking._select, q.parse_claim

    def timed_select(self, timeout_s):
        out = select(self, timeout_s)
        marks["answered"] = time.time() * 1000  # the parked call's answer read
        return out

    def timed_parse_claim(reply):
        marks["claimed"] = time.time() * 1000  # the claim's reply in hand
        return parse_claim(reply)

    ShardParking._select, q.parse_claim = timed_select, timed_parse_claim

    def handler(job):
        if warm:
            warm.clear()
            return  # the warm-up job
        now, sent = time.time() * 1000, float(job.payload)
        got.append(now - sent)
        stages.append((marks["answered"] - sent, marks["claimed"] - sent))
        if len(got) >= a.n:
            done.set()

    c = Consumer(q, handler, concurrency=2)
    threading.Thread(target=lambda: (done.wait(), c.stop()), daemon=True).start()
    print("READY", flush=True)
    c.run()
    print("RESULT " + json.dumps(got), flush=True)
    print("STAGES " + json.dumps(stages), flush=True)
    return 0


FLOOR_KEY = "benchlat-floor"


def lat_floor(a) -> int:
    """The floor: the least a wake-up can cost here. One thread parked in a
    bare ``BLPOP`` on one of the cluster's primaries records now - payload
    (ms) as soon as the call answers: no claim, no thread hand-off, no
    echomq. Prints READY, then RESULT once n are in."""
    from redis.cluster import RedisCluster

    r = RedisCluster.from_url(a.url).get_node_from_key(FLOOR_KEY).redis_connection  # the node's own client
    r.delete(FLOOR_KEY)
    got: list[float] = []
    print("READY", flush=True)
    seen = 0
    while seen <= a.n:  # the first is the warm-up
        answer = r.blpop([FLOOR_KEY], timeout=1)
        if answer is None:
            continue
        if seen:
            got.append(time.time() * 1000 - float(answer[1]))
        seen += 1
    print("RESULT " + json.dumps(got), flush=True)
    return 0


def latency_row(url: str, shards: int, code: Path | None, n: int, rate: float, busy: int, logdir: Path,
                tag: str, floor: bool = False) -> dict:
    from redis.cluster import RedisCluster

    from echomq import ShardedQueue, ids

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(([str(code)] if code else []) + [str(REPO)]))
    argv = [sys.executable, "-m", "bench.cluster", "lat-floor" if floor else "lat-worker", "--url", url,
            "--shards", str(shards), "--n", str(n)]
    # The spinners: plain processes at the default niceness, placed by the
    # kernel like everything else here, as another session's tests are.
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    with open(logdir / f"lat-{tag}.log", "w") as err:
        proc = subprocess.Popen(argv, cwd=code or REPO, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        if proc.stdout.readline().strip() != "READY":
            return {"status": "worker did not start"}
        rc = RedisCluster.from_url(url)
        if floor:
            send = lambda: rc.lpush(FLOOR_KEY, f"{time.time() * 1000:.3f}")
        else:
            q = ShardedQueue(LAT_QUEUE, rc, shards=shards)
            send = lambda: q.enqueue(f"{time.time() * 1000:.3f}".encode(), lane=ids.mint("PLR"))
        time.sleep(1.0)  # let it park on every shard
        send()  # warm-up, not counted
        time.sleep(0.5)
        t0 = time.perf_counter()
        for i in range(n):
            due = t0 + i / rate
            left = due - time.perf_counter()
            if left > 0:
                time.sleep(left)
            send()
        line = proc.stdout.readline()
        if not line.startswith("RESULT "):
            return {"status": "no result"}
        total = json.loads(line[7:])
        lat = sorted(total)
        pick = lambda xs, p: xs[min(len(xs) - 1, int(round(p / 100 * len(xs))) - 1)]
        row = {"status": "ok", "p50": pick(lat, 50), "p90": pick(lat, 90), "p99": pick(lat, 99), "max": lat[-1],
               "n": len(lat)}
        line = proc.stdout.readline()
        if line.startswith("STAGES "):  # per job: enqueue -> answered -> claimed -> handler
            marks = json.loads(line[7:])
            for name, part in (("wake", [m[0] for m in marks]), ("claim", [m[1] - m[0] for m in marks]),
                               ("hand-off", [t - m[1] for t, m in zip(total, marks)])):
                part.sort()
                row[f"{name} p50"], row[f"{name} p99"] = pick(part, 50), pick(part, 99)
        return row
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        for sp in spinners:
            sp.kill()
            sp.wait()


FLOOR = "floor: bare BLPOP"


def latency(a) -> int:
    from bench.work import base_code

    from echomq import embedded

    logdir = Path(tempfile.mkdtemp(prefix="emq-bench-lat-"))
    codes = [("this tree", None)]
    if a.base != "none":
        base_code(a.base, logdir / "base")
        codes.append((a.base, logdir / "base"))
    n = a.n or (100 if a.quick else 400)
    rounds = a.rounds or (1 if a.quick else 2)
    log(f"starting a 3-primary cluster (no replicas, no AOF); logs {logdir}")
    cluster = embedded.LocalCluster(logdir / "cluster", primaries=3, replicas=0, appendonly=False).start()
    if a.floor:
        codes.append((FLOOR, None))
    rows = [(who, code, busy) for busy in sorted({0, a.busy}) for who, code in codes]
    got: dict[tuple, list[dict]] = {(who, busy): [] for who, _, busy in rows}
    load0 = os.getloadavg()[0]
    try:
        for r in range(rounds):
            for who, code, busy in rows:
                log(f"round {r + 1}/{rounds}: {who}, {'busy' if busy else 'quiet'}: {n} jobs at {a.rate:.0f}/s")
                got[(who, busy)].append(latency_row(cluster.url, a.shards, code, n, a.rate, busy, logdir,
                                                    f"{r}-{who.replace(' ', '_').replace(':', '')}-{busy}",
                                                    floor=who == FLOOR))
    finally:
        cluster.stop(remove=True)
    print(f"\nEchoMQ wake latency, enqueue -> handler start (ms): ShardedQueue x{a.shards} on 3 primaries, one "
          f"idle consumer (concurrency 2), {n} jobs at {a.rate:.0f}/s per row, each on a new lane; busy = "
          f"{a.busy} processes spinning beside it; {rounds} round(s), rows interleaved; "
          f"cores {os.cpu_count()}, load {load0:.1f} -> {os.getloadavg()[0]:.1f}")
    header = ["code", "machine", "p50", "p90", "p99", "max", "status"]
    table = []
    for who, _, busy in rows:
        res = got[(who, busy)]
        bad = next((x["status"] for x in res if x["status"] != "ok"), "")
        ok = [x for x in res if x["status"] == "ok"]
        if not ok:
            table.append([who, "busy" if busy else "quiet", "-", "-", "-", "-", bad])
            continue
        med = lambda k: statistics.median(x[k] for x in ok)
        table.append([who, "busy" if busy else "quiet", f"{med('p50'):.1f}", f"{med('p90'):.1f}", f"{med('p99'):.1f}",
                      f"{max(x['max'] for x in ok):.1f}", bad])
    widths = [max(len(str(x[i])) for x in [header] + table) for i in range(len(header))]
    for line in [header, ["-" * w for w in widths]] + table:
        print("  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w) for i, (c, w) in enumerate(zip(line, widths))))
    print("p50/p90/p99: the median over the rounds of each round's percentile; max: the worst job of any round.")
    staged = [(who, busy) for who, _, busy in rows if all("wake p50" in x for x in got[(who, busy)]) and got[(who, busy)]]
    if staged:
        print("\nWhere it goes (ms, p50 / p99 of each stage, medians over the rounds): wake = enqueue -> the parked "
              "call's answer read; claim = -> the claim's reply; hand-off = -> the handler's thread starts it.")
        for who, busy in staged:
            med = lambda k: statistics.median(x[k] for x in got[(who, busy)])
            print(f"  {who:<10} {'busy' if busy else 'quiet':<5}  " + "   ".join(
                f"{k} {med(k + ' p50'):.1f} / {med(k + ' p99'):.1f}" for k in ("wake", "claim", "hand-off")))
    if a.floor:
        print(f"{FLOOR}: one thread parked in a bare BLPOP on one primary, the producer LPUSHes the stamp: "
              "the wake-up with no claim and no hand-off (2 scheduler wake-ups: the node, the thread; echomq's "
              "path has 4: the node, the consumer's parked thread, the node for the claim, the same thread, which "
              "runs the handler).")
    shutil.rmtree(logdir, ignore_errors=True)
    return 0


def primaries(url: str, cluster: bool) -> list[redis.Redis]:
    if not cluster:
        return [redis.Redis.from_url(url)]
    from redis.cluster import RedisCluster

    rc = RedisCluster.from_url(url)
    return [redis.Redis(host=n.host, port=n.port) for n in rc.get_primaries()]


def completed(q) -> int:
    """Jobs completed so far, summed over the shards: one plain pipeline per
    node (a cluster pipeline would cost this process more CPU on the
    cluster row, on the cores the drain runs on)."""
    from echomq.cluster import pipeline

    shards = getattr(q, "shards", [q])
    return sum(int(v or 0) for v in pipeline(q.client, [(("HGET", s.k_meta, "completed"), s.k_meta) for s in shards]))


def last_finish_ms(q) -> int | None:
    """The server clock (ms) of the newest completed-job record over the
    shards (the score in ``done``, written by the complete that finished it),
    or None when no shard keeps records."""
    from echomq.cluster import pipeline

    keys = [s.prefix + "done" for s in getattr(q, "shards", [q])]
    replies = pipeline(q.client, [(("ZREVRANGE", k, 0, 0, "WITHSCORES"), k) for k in keys])
    scores = []
    for r in replies:
        if r and not isinstance(r, Exception):  # [member, score], or redis-py's [(member, score)]
            scores.append(float(r[0][1] if isinstance(r[0], (tuple, list)) else r[1]))
    return int(max(scores)) if scores else None


POLL_S = 0.05  # how often the bench asks whether the drain is done (the end itself comes from the servers)


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
        sys0 = sum(_cpu(r, "sys") for r in nodes)
        spids = [int(r.info("server")["process_id"]) for r in nodes]
        sw0 = sum(_switches(pid) for pid in spids)
        wcpu0 = sum(_proc_cpu(p.pid) for p in procs)
        bcpu0 = _self_cpu()
        sec, usec = nodes[0].time()  # every node runs on this host's clock
        start_ms = sec * 1000 + usec // 1000
        t0 = time.perf_counter()
        q.resume()
        polls = 1
        while completed(q) < n:
            polls += 1
            if time.perf_counter() - t0 > timeout:
                return {"label": label, "status": f"timeout at {completed(q)}/{n}"}
            time.sleep(POLL_S)
        seen = time.perf_counter() - t0
        bcpu = _self_cpu() - bcpu0
        # The drain ends with its last completion, on the servers' clock: exact
        # to a millisecond whatever the poll interval, so the bench polls
        # seldom and its own calls hardly touch the servers and cores it measures.
        end_ms = last_finish_ms(q)
        wall = (end_ms - start_ms) / 1000 if end_ms and end_ms > start_ms else seen
        cpu = sum(_cpu(r) for r in nodes) - cpu0
        sys_cpu = sum(_cpu(r, "sys") for r in nodes) - sys0
        switches = sum(_switches(pid) for pid in spids) - sw0
        wcpu = sum(_proc_cpu(p.pid) for p in procs) - wcpu0
        stats = [r.info("commandstats") for r in nodes]
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
    # What the same servers burn doing nothing for as long as the drain took
    # (server cron, and on a cluster the cluster bus): the fixed cost inside
    # "Valkey CPU us/job", which does not grow with the jobs.
    idle0 = sum(_cpu(r) for r in nodes)
    time.sleep(wall)  # the measurement window itself
    idle = sum(_cpu(r) for r in nodes) - idle0
    ev_usec = sum(s.get("cmdstat_evalsha", {}).get("usec", 0) for s in stats)
    ev_calls = sum(s.get("cmdstat_evalsha", {}).get("calls", 0) for s in stats)
    commands: dict[str, list[int]] = {}  # every command the servers ran (scripts' commands included)
    for s in stats:
        for name, v in s.items():
            c = commands.setdefault(name.removeprefix("cmdstat_"), [0, 0])
            c[0] += v.get("calls", 0)
            c[1] += v.get("usec", 0)
    counts = q.counts()
    return {"label": label, "status": "ok" if counts["completed"] == n and not counts["pending"] else
            f"CHECK {counts}", "n": n, "wall_s": wall, "rate": n / wall,
            "evalsha_us_per_job": ev_usec / n, "evalsha_calls_per_job": ev_calls / n,
            "cpu_us_per_job": cpu * 1e6 / n, "idle_us_per_job": idle * 1e6 / n,
            "worker_cpu_us_per_job": wcpu * 1e6 / n, "nodes": len(nodes), "commands": commands,
            "sys_us_per_job": sys_cpu * 1e6 / n, "switches_per_1k_jobs": switches * 1000 / n,
            "bench_cpu_us_per_job": bcpu * 1e6 / n, "seen_s": seen, "polls": polls}


def _proc_cpu(pid: int) -> float:
    """CPU seconds of a process so far, all its threads, from the scheduler's
    nanosecond counters (/proc/<pid>/stat counts 10 ms ticks: too coarse for
    a drain of half a second)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that just ended
    return total / 1e9


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _cpu(r: redis.Redis, which: str = "both") -> float:
    info = r.info("cpu")
    if which == "sys":
        return float(info["used_cpu_sys"])
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _switches(pid: int) -> int:
    """Context switches of a process so far, voluntary and not, all its threads."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if "ctxt_switches:" in line:
                total += int(line.split()[1])
    return total


def _summary(runs: list[dict], base: list[dict]) -> dict:
    """One row: the medians of a layout's drains, and the lowest and highest
    ratio to the 1-node Queue drain of the same round (the drains that ran
    side by side)."""
    ok = [r for r in runs if r["status"] == "ok"]
    if len(ok) < len(runs):
        return next(r for r in runs if r["status"] != "ok")
    ratios = sorted(r["rate"] / b["rate"] for r, b in zip(runs, base) if b.get("rate"))
    row = {k: statistics.median(r[k] for r in ok) for k in ok[0] if isinstance(ok[0][k], float)}
    row.update(label=ok[0]["label"], status="ok", n=ok[0]["n"], nodes=ok[0]["nodes"],
               ratio_lo=ratios[0], ratio_hi=ratios[-1])
    return row


# -- exact counts: server instructions per job (callgrind) --------------------
# CPU time per job on a small shared machine moves 10-30% between drains of
# the same layout; instructions do not. `python -m bench.cluster instructions`
# runs every valkey-server under valgrind's callgrind, instrumented only while
# a deterministic driver drains n jobs (after a warm-up drain of n), and
# prints the servers' instructions per job. Two simulated consumers take
# turns, each holding two claims and acking the oldest as it claims again, as
# Consumer does; claims alternate 65 and 3 jobs, the sizes the drain's real
# consumers claim (docs/scaling.md).
INSTR_LAYOUTS = [("1 node, Queue", 0, 1), ("1 node, ShardedQueue", 0, None), ("1-primary cluster, Queue", 1, 1),
                 ("1-primary cluster, ShardedQueue", 1, None), ("3 primaries, ShardedQueue", 3, None)]


def _instructions(label: str, primaries_: int, shards: int, n: int, claims: list[int], logdir: Path) -> float:
    from redis.cluster import RedisCluster

    from echomq import Queue, ShardedQueue, embedded, ids

    ports = [embedded.cluster_port() for _ in range(max(1, primaries_))]
    procs, outs = [], []
    for port in ports:
        node_dir = logdir / f"{label.replace(' ', '_').replace(',', '')}-{port}"
        node_dir.mkdir(parents=True)
        args = [str(embedded.binary_path()), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(node_dir),
                "--save", "", "--appendonly", "no"]
        if primaries_:
            args += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                     "--cluster-node-timeout", "5000"]
        outs.append(node_dir / "callgrind.out")
        procs.append(subprocess.Popen(["valgrind", "--tool=callgrind", "--instr-atstart=no",
                                       f"--callgrind-out-file={outs[-1]}", *args],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        for port in ports:
            embedded.wait_ready(f"redis://127.0.0.1:{port}/0", timeout=120)
        url = f"redis://127.0.0.1:{ports[0]}/0"
        if primaries_:
            embedded.join_cluster(ports, primaries_, timeout=180)
        client = RedisCluster.from_url(url) if primaries_ else redis.Redis.from_url(url)
        queues = [ShardedQueue(QUEUE, client, shards=shards) if shards > 1 else Queue(QUEUE, client) for _ in range(2)]
        names = [ids.mint("CSR") for _ in queues]

        def drain() -> int:
            held: list[list] = [[], []]
            turn, done, live = [0, 0], 0, {0, 1}
            while live:
                for c in sorted(live):
                    q, batch = queues[c], queues[c].batch()
                    ack = held[c].pop(0) if len(held[c]) >= 2 else []
                    if ack:
                        q.add_complete_batch(batch, [(j.id, j.attempts) for j in ack])
                    q.add_claim(batch, claims[turn[c] % len(claims)], lease_ms=30_000, consumer=names[c])
                    turn[c] += 1
                    jobs = q.parse_claim(batch.run()[-1])
                    done += len(ack)
                    if jobs:
                        held[c].append(jobs)
                    elif not getattr(q, "has_hot", lambda: False)():
                        rest = [j for js in held[c] for j in js]
                        if rest:
                            q.complete_many([(j.id, j.attempts) for j in rest])
                        done += len(rest)
                        held[c] = []
                        live.discard(c)
            return done

        for _ in range(2):  # a warm-up drain, then the measured one
            for i in range(0, n, 1000):
                queues[0].enqueue_many([b"x"] * min(1000, n - i))
            for q in queues:
                if hasattr(q, "mark_hot"):
                    q.mark_hot(range(shards))
            if _ == 1:
                for proc in procs:
                    subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], capture_output=True, check=True)
            drained = drain()
        for proc in procs:
            subprocess.run(["callgrind_control", "-i", "off", str(proc.pid)], capture_output=True, check=True)
        if drained != n:
            raise RuntimeError(f"{label}: drained {drained} of {n}")
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(120)
    from bench.proc import callgrind_total  # here: a --base tree's worker imports this module too
    total = sum(callgrind_total(out.parent.glob(out.name + "*")) for out in outs)
    return total / n


def instructions(a) -> int:
    import shutil

    if not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        print("needs valgrind (callgrind_control) on PATH", file=sys.stderr)
        return 2
    n = a.n or (2_000 if a.quick else 20_000)
    claims = [int(x) for x in a.claims.split(",")]
    logdir = Path(tempfile.mkdtemp(prefix="emq-bench-instr-"))
    print(f"\nEchoMQ cluster bench, server instructions per job (callgrind): n={n}, 2 consumers, claims "
          f"{'/'.join(map(str, claims))}, two in flight each; {a.shards} shards")
    base = None
    for label, primaries_, shards in INSTR_LAYOUTS:
        shards = shards or a.shards
        log(f"{label}: under callgrind")
        per_job = _instructions(label, primaries_, shards, n, claims, logdir)
        base = base or per_job
        print(f"  {label + (f' x{shards}' if shards > 1 else ''):36s} {per_job:10,.0f}  {per_job / base - 1:+6.1%}",
              flush=True)
    return 0


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
    i = sub.add_parser("instructions", help="server instructions per job under callgrind (needs valgrind)")
    i.add_argument("--n", type=int)
    i.add_argument("--quick", action="store_true")
    i.add_argument("--shards", type=int, default=6)
    i.add_argument("--claims", default="65,3", help="claim sizes, in turn (default 65,3)")
    lw = sub.add_parser("lat-worker", help="(internal) the latency run's consumer")
    lw.add_argument("--url", required=True)
    lw.add_argument("--shards", type=int, default=16)
    lw.add_argument("--n", type=int, required=True)
    lf = sub.add_parser("lat-floor", help="(internal) the latency run's bare BLPOP thread")
    lf.add_argument("--url", required=True)
    lf.add_argument("--shards", type=int, default=16)
    lf.add_argument("--n", type=int, required=True)
    lt = sub.add_parser("latency", help="wake latency on a 16-shard queue, this tree vs --base, quiet and busy")
    lt.add_argument("--quick", action="store_true", help="100 jobs per row, 1 round")
    lt.add_argument("--n", type=int, help="jobs per row (default 400)")
    lt.add_argument("--rate", type=float, default=40.0, help="jobs/s of the open-loop producer")
    lt.add_argument("--shards", type=int, default=16)
    lt.add_argument("--busy", type=int, default=2, help="CPU spinners beside the busy rows")
    lt.add_argument("--rounds", type=int, help="default 2; quick 1")
    lt.add_argument("--base", default="main", help="also run main's code ('none': not)")
    lt.add_argument("--no-floor", dest="floor", action="store_false",
                    help="leave out the floor rows (a bare BLPOP wake-up under the same load)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--n", type=int)
    ap.add_argument("--shards", type=int, default=6)
    ap.add_argument("--workers", type=int, default=2, help="worker processes per drain")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--prefetch", type=int, default=64)
    ap.add_argument("--rounds", type=int, help="drains per layout, rows interleaved (default 5, --quick 1)")
    ap.add_argument("--json", metavar="PATH")
    a = ap.parse_args(argv)
    if a.cmd == "worker":
        return worker(a)
    if a.cmd == "instructions":
        return instructions(a)
    if a.cmd == "lat-worker":
        return lat_worker(a)
    if a.cmd == "lat-floor":
        return lat_floor(a)
    if a.cmd == "latency":
        return latency(a)

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
    layouts = [("1 node, Queue", single_url, False, 1),
               (f"1 node, ShardedQueue x{a.shards}", single_url, False, a.shards),
               (f"3 primaries, ShardedQueue x{a.shards}", cluster.url, True, a.shards)]
    rounds = a.rounds or (1 if a.quick else 5)
    runs: list[list[dict]] = [[] for _ in layouts]
    try:
        common = dict(n=n, workers=a.workers, concurrency=a.concurrency, prefetch=a.prefetch, logdir=logdir,
                      timeout=600)
        for k in range(rounds):  # rows interleaved, so a load change on the machine hits them all
            for i, (label, url, on_cluster, shards) in enumerate(layouts):
                runs[i].append(drain(label, url, on_cluster, shards, **common))
    finally:
        single.terminate()
        single.wait(10)
        cluster.stop(remove=True)
    rows = [_summary(r, runs[0]) for r in runs]
    for r in rows:
        if "rate" in r and "rate" in rows[0]:
            r["ratio"] = r["rate"] / rows[0]["rate"]
    print(f"\nEchoMQ cluster bench: n={n} per drain, {a.workers} worker processes x concurrency "
          f"{a.concurrency} prefetch {a.prefetch}, same for every row; {rounds} round(s), rows interleaved, "
          f"medians shown; cores {os.cpu_count()} load {os.getloadavg()[0]:.1f}")
    header = ["layout", "status", "jobs/s", "x 1 node", "(paired)", "EVALSHA us/job", "EVALSHA calls/job",
              "Valkey CPU us/job", "of it idle", "worker CPU us/job"]
    ok = [r for r in rows if "rate" in r]
    table = [[r["label"], r["status"]] + ([f"{r['rate']:,.0f}", f"{r['ratio']:.2f}x",
              f"{r['ratio_lo']:.2f}-{r['ratio_hi']:.2f}", f"{r['evalsha_us_per_job']:.2f}",
              f"{r['evalsha_calls_per_job']:.3f}", f"{r['cpu_us_per_job']:.1f}", f"{r['idle_us_per_job']:.1f}",
              f"{r['worker_cpu_us_per_job']:.1f}"] if r in ok else ["-"] * 8) for r in rows]
    widths = [max(len(str(x[i])) for x in [header] + table) for i in range(len(header))]
    for line in [header, ["-" * w for w in widths]] + table:
        print("  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w) for i, (c, w) in enumerate(zip(line, widths))))
    print("jobs/s: median over the rounds; x 1 node: that median / the 1-node Queue's; (paired): lowest-highest "
          "ratio to the 1-node Queue drain of the same round. "
          "EVALSHA us/job: INFO commandstats, summed over the primaries (wall time inside the scripts, "
          "which counts a server descheduled mid-script). Valkey CPU: INFO cpu used_cpu_user+sys over the "
          "drain, summed; 'of it idle': the same servers' CPU over an idle interval as long as the drain "
          "(cron, cluster bus). Worker CPU: the worker processes' user+sys.")
    if len(ok) == len(rows):
        one, clu = rows[0], rows[-1]
        busy = lambda r: r["cpu_us_per_job"] - r["idle_us_per_job"]
        met = clu["ratio"] >= 1.0
        print(f"\nIssue 13: throughput on 3 primaries = {clu['ratio']:.2f}x one node's (bar >= 1.00x: "
              f"{'met' if met else 'NOT met'}); Valkey CPU per job {clu['cpu_us_per_job']:.1f} vs "
              f"{one['cpu_us_per_job']:.1f} us ({busy(clu):.1f} vs {busy(one):.1f} without the idle servers' share), "
              f"script time {clu['evalsha_us_per_job']:.1f} vs {one['evalsha_us_per_job']:.1f} us, "
              f"workers' CPU {clu['worker_cpu_us_per_job']:.1f} vs {one['worker_cpu_us_per_job']:.1f} us.")
        cores = os.cpu_count() or 1
        total = lambda r: r["cpu_us_per_job"] + r["worker_cpu_us_per_job"]
        diff = total(clu) / total(one) - 1
        same = ("both rows cost about the same CPU" if abs(diff) < 0.1 else
                f"the cluster row costs {abs(diff):.0%} {'more' if diff > 0 else 'less'} CPU")
        print(f"Why not 3x: the {clu['nodes']} primaries, the {a.workers} workers and this process share {cores} "
              f"cores (load {os.getloadavg()[0]:.1f}): no primary has a core of its own, so there is nothing for the "
              f"cluster to scale onto here. Per job {same} (Valkey + workers: "
              f"{total(clu):.1f} vs {total(one):.1f} us; were the drain CPU-bound, that alone would give "
              f"{total(one) / total(clu):.2f}x)"
              + ("." if met else "; the rest of the gap to 1.00x is the shared cores' noise (see the paired column)."))
    if a.json:
        Path(a.json).write_text(json.dumps({"rows": rows, "runs": runs}, indent=2))
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
