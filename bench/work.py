"""Jobs that do real work: the default Consumer against the physical limit.

    .venv/bin/python -m bench.work              # 10,000 jobs on 64 lanes, 3 rounds, ~5 minutes
    .venv/bin/python -m bench.work --quick      # 2,000 jobs, 1 round
    .venv/bin/python -m bench.work --base none  # without the rows of main's code
    .venv/bin/python -m bench.work instructions # server instructions per job, this tree and main (callgrind)

The workload: each job's handler does one ``INCR`` on the same Valkey through
one redis-py client that all its threads share (``bench.body``). One worker
process runs pinned to core 0 (``taskset -c 0``), the bench's own
valkey-server pinned to core 1, so the worker has one core and the server the
other, whatever else the machine runs.

Rows, all in each round, rounds interleaved:

* **ceiling**: the same body run by 8 plain threads, no queue at all: what
  one process on one core can do with that client. The limit.
* **EchoMQ** ``Consumer(queue, handler)``: no argument at all, as a user
  first writes it; 10,000 jobs pre-filled on 64 lanes. From this tree, and
  (``--base REF``, default ``main``) from that commit's ``echomq/`` and
  ``lua/`` (``git archive``), side by side.
* **EchoMQ** ``concurrency=8``: the same with 8 handler threads (the
  ceiling's thread count).
* **EchoMQ minimal loop** (this tree only): the default Consumer's busy
  shape with none of its bookkeeping (``bench.echo_worker --mode
  selfloop``): MAX_THREADS threads, each claiming SELF_CLAIM jobs with the
  acks waiting in one round trip, then running them. What the scripts
  and redis-py allow this shape: the Consumer's own cost is the gap
  between the two rows.
* **peers** (``--peers``, default huey and dramatiq): their first adapter
  config (``bench/peers/``, N=8 threads), the same body, jobs without lanes
  (they have none), each in its own venv under ``bench/.venvs``.
* **no-op**: the default Consumer and ``concurrency=8`` with no body (the
  README's drain figure, here on the pinned layout), so a gain on real work
  is not paid for with the no-op drain.

``instructions`` counts what the lane scripts cost the server, free of the
machine's load: valgrind's callgrind on valkey-server, counting only while
a drain of ``--n`` jobs pre-filled on 64 lanes runs (after a warm-up drain
of as many), its claims of ``--claims`` jobs each with the previous claim's
acks in one ``complete_batch`` in the same round trip, as the Consumer's
cycles send them; "acks" counts the ``complete_batch`` calls alone (the jobs
claimed beforehand). From this tree and from ``--base``, one after the other.

jobs/s is timed inside the worker at its handler, ``(n-1) / (t_nth -
t_first)``, as every drain of ``python -m bench``; "of ceiling" is each
round's rate over the same round's ceiling (median, and the range over the
rounds). Worker CPU is the worker process's per job, Valkey's from ``INFO
cpu``. The machine is shared: read the ratios, not the absolute rates.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOAL = 0.70  # the default Consumer's share of the ceiling (issue 21, section 6)


def log(msg: str) -> None:
    print(f"[bench.work {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- the ceiling: plain threads, no queue ---------------------------------------
def ceiling(a) -> int:
    """``threads`` threads run the body until n are done, through one client."""
    import redis

    from bench import body
    from bench.tally import Tally, emit

    tally = Tally(a.n, body=body.make(a.body, redis.Redis.from_url(a.url)))
    left = iter(range(a.n))
    lock = threading.Lock()

    def loop():
        while True:
            with lock:
                if next(left, None) is None:
                    return
            tally.hit()

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(a.threads)]
    emit("READY")
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    emit("RESULT", tally.result(threads=a.threads))
    return 0


# -- server instructions per job (callgrind) ---------------------------------------
def count(a) -> int:
    """(child, with the code to measure first on PYTHONPATH) one valkey-server
    under callgrind; prints the instructions per job of a drain and of its acks."""
    import json

    import redis

    from echomq import Queue, embedded, ids

    def fill(q, n):
        names = [ids.mint("PLR") for _ in range(a.lanes)]
        for i in range(0, n, 1000):
            q.enqueue_many([{"payload": b"x", "lane": names[j % a.lanes]} for j in range(i, min(n, i + 1000))])

    def claim(q, consumer):
        b = q.batch()
        q.add_claim(b, a.claim, lease_ms=600_000, consumer=consumer)
        return q.parse_claim(b.run()[-1])

    def drain(q, consumer):  # each round trip: the previous claim's acks, then the next claim
        held, done = [], 0
        while True:
            b = q.batch()
            if held:
                q.add_complete_batch(b, [(j.id, j.attempts) for j in held])
            q.add_claim(b, a.claim, lease_ms=600_000, consumer=consumer)
            replies = b.run()
            done += len(held)
            held = q.parse_claim(replies[-1])
            if not held:
                return done

    out = {}
    for what in ("drain", "acks"):
        d = Path(tempfile.mkdtemp(prefix="emq-bench-work-cg-"))
        port = embedded.free_port()
        cg = d / "callgrind.out"
        proc = subprocess.Popen(["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={cg}",
                                 str(embedded.binary_path()), "--port", str(port), "--bind", "127.0.0.1", "--dir",
                                 str(d), "--save", "", "--appendonly", "no"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        toggle = lambda on: subprocess.run(["callgrind_control", "-i", "on" if on else "off", str(proc.pid)],
                                           capture_output=True, check=True)
        try:
            embedded.wait_ready(f"redis://127.0.0.1:{port}/0", timeout=120)
            client = redis.Redis(host="127.0.0.1", port=port)
            q, consumer = Queue("bench", client), ids.mint("CSR")
            fill(q, a.n)
            assert drain(q, consumer) == a.n  # warm-up: scripts loaded, the stream at its cap
            fill(q, a.n)
            if what == "drain":
                toggle(True)
                done = drain(q, consumer)
            else:
                held = []
                while jobs := claim(q, consumer):
                    held.append(jobs)
                toggle(True)
                done = 0
                for jobs in held:
                    b = q.batch()
                    q.add_complete_batch(b, [(j.id, j.attempts) for j in jobs])
                    assert b.run()[0] == [1] * len(jobs)
                    done += len(jobs)
            toggle(False)
            assert done == a.n, (done, a.n)
            client.shutdown(nosave=True)
        except redis.exceptions.ConnectionError:
            pass
        finally:
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
        from bench.proc import callgrind_total  # here: a --base tree's worker imports this module too
        total = callgrind_total(d.glob("callgrind.out*"))
        shutil.rmtree(d, ignore_errors=True)
        out[what] = total / a.n
    print(json.dumps(out))
    return 0


def instructions(a, codes) -> int:
    """The instructions table: each code's drain and acks at each claim size."""
    import json

    from bench.runs import PY

    if not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        print("needs valgrind (callgrind_control) on PATH", file=sys.stderr)
        return 2
    claims = [int(c) for c in a.claims.split(",")]
    rows = []
    for who, path, label in codes:
        for c in claims:
            log(f"instructions: {who}, claims of {c} (callgrind, n={a.n})")
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(path), str(REPO)]))
            res = subprocess.run([PY, "-m", "bench.work", "count", "--n", str(a.n), "--claim", str(c),
                                  "--lanes", str(a.lanes)], cwd=path, env=env, capture_output=True, text=True)
            if res.returncode != 0:
                print(res.stderr[-2000:], file=sys.stderr)
                return 1
            rows.append((who, label, c, json.loads(res.stdout.strip().splitlines()[-1])))
    print(f"\nServer instructions per job (callgrind), n={a.n} jobs on {a.lanes} lanes after a warm-up drain: "
          "drain = claims of N with the previous claim's acks (complete_batch) in the same round trip; "
          "acks = the complete_batch calls alone")
    print(f"  {'code':34s} {'claim N':>7s} {'drain':>10s} {'acks':>10s}")
    base = {c: r for who, _, c, r in rows if who != "this tree"}
    for who, label, c, r in rows:
        vs = ""
        if who == "this tree" and c in base:
            vs = f"  ({r['drain'] / base[c]['drain'] - 1:+.1%} drain, {r['acks'] / base[c]['acks'] - 1:+.1%} acks)"
        name = f"this tree {label.split(' (')[0]}" if who == "this tree" else label
        print(f"  {name:34s} {c:7d} {r['drain']:10,.0f} {r['acks']:10,.0f}{vs}")
    return 0


# -- the harness -----------------------------------------------------------------
def pin(argv: list[str], core: int | None) -> list[str]:
    return argv if core is None else ["taskset", "-c", str(core), *argv]


def pin_pid(pid: int, core: int) -> None:
    """Every thread of a running process onto ``core``."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        os.sched_setaffinity(int(task.name), {core})


def base_code(ref: str, dest: Path) -> str:
    """``echomq/`` and ``lua/`` of commit ``ref`` into ``dest``; its label."""
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", ref, "echomq", "lua"], cwd=REPO, capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    sha = subprocess.run(["git", "rev-parse", "--short", ref], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout.strip()
    return f"{ref} {sha}"


def run_row(server, row: dict, n: int, lanes: int, logdir: Path, core: int | None, tag: str) -> dict:
    from bench.proc import WorkerProc, run_once
    from bench.runs import PY

    server.flush()
    out = {"status": "ok"}
    kind = row["kind"]
    if kind == "ceiling":
        argv = [PY, "-m", "bench.work", "ceiling", "--url", server.url, "--n", str(n),
                "--threads", str(row["threads"]), "--body", row["body"]]
        code = None
    elif kind == "echo":
        mode = row.get("mode", "consumer")
        argv = [PY, "-m", "bench.echo_worker", "--url", server.url, "--queue", "bench", "--n", str(n),
                "--mode", mode, "--fill", str(n), "--lanes", str(lanes), "--body", row["body"]]
        if mode == "consumer":
            argv += ["--defaults"] if row["concurrency"] is None else ["--concurrency", str(row["concurrency"])]
        code = row["code"]
    else:
        from bench.peers import install as peer_install

        py = str(peer_install.venv_python(row["peer"]))
        base = [py, "-m", "bench.peers.run", row["peer"]]
        opts = ["--url", server.url, "--concurrency", str(row["threads"])]
        filled, err = run_once(base + ["fill", "--n", str(n), "--fill-budget", "120"] + opts,
                               logdir / f"{tag}-fill.log", timeout=300)
        if filled is None:
            return {"status": f"fill failed: {err}"}
        n = filled.get("filled", n)
        argv = base + ["work", "--n", str(n), "--config", row["short"], "--body", row["body"]] + opts
        code = None
    w = WorkerProc(pin(argv, core), logdir / f"{tag}.log", code_dir=code)
    try:
        line = w.next_line(120)
        if line is None or line[0] != "READY":
            return {"status": "failed: " + ("no READY" if line is None else w.tail())}
        cpu0 = server.cpu_s()
        line = w.next_line(180)
        cpu1 = server.cpu_s()
        if line is None or line[0] != "RESULT" or not line[1].get("rate"):
            return {"status": "failed: " + ("timeout" if line is None else w.tail())}
        res = line[1]
        out.update(rate=res["rate"], cpu_us=res.get("cpu_us_per_job"), valkey_us=(cpu1 - cpu0) / n * 1e6,
                   stats=res.get("stats"))
        if kind == "echo":
            w.wait_exit(30)
            counts = res.get("counts") or {}
            if counts.get("completed") != n or counts.get("pending") or counts.get("active"):
                out["status"] = f"CHECK counts {counts}"
        count = int(server.client.get("bench:work:count") or 0)
        if row["body"] == "incr" and count < n:
            out["status"] = f"CHECK: {count} INCRs for {n} jobs"
        return out
    finally:
        w.kill()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.work", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd")
    c = sub.add_parser("ceiling", help="(internal) the plain-threads ceiling, one process")
    c.add_argument("--url", required=True)
    c.add_argument("--n", type=int, required=True)
    c.add_argument("--threads", type=int, default=8)
    c.add_argument("--body", default="incr")
    k = sub.add_parser("count", help="(internal) one callgrind count, with the code to measure on PYTHONPATH")
    k.add_argument("--n", type=int, default=2000)
    k.add_argument("--claim", type=int, default=64)
    k.add_argument("--lanes", type=int, default=64)
    i = sub.add_parser("instructions", help="server instructions per job, this tree and --base (needs valgrind)")
    i.add_argument("--n", type=int, default=2000)
    i.add_argument("--claims", default="64,128", help="claim sizes, comma list")
    i.add_argument("--lanes", type=int, default=64)
    i.add_argument("--base", default="main")
    ap.add_argument("--quick", action="store_true", help="2,000 jobs, 1 round")
    ap.add_argument("--n", type=int, help="jobs per row (default 10000; quick 2000)")
    ap.add_argument("--lanes", type=int, default=64)
    ap.add_argument("--rounds", type=int, help="default 3; quick 1")
    ap.add_argument("--threads", type=int, default=8, help="threads of the ceiling, the peers and the c=N rows")
    ap.add_argument("--base", default="main", help="also run the EchoMQ rows from this commit ('none': not)")
    ap.add_argument("--peers", default="huey,dramatiq", help="comma list, or 'none'")
    ap.add_argument("--no-noop", action="store_true", help="leave out the no-op rows")
    ap.add_argument("--no-pin", action="store_true", help="do not pin the worker and the server")
    ap.add_argument("--keep-logs", action="store_true")
    a = ap.parse_args(argv)
    if a.cmd == "ceiling":
        return ceiling(a)
    if a.cmd == "count":
        return count(a)

    from bench.__main__ import fmt_rate, fmt_us, snapshot, table

    if a.cmd == "instructions":
        logdir = Path(tempfile.mkdtemp(prefix="emq-bench-work-"))
        try:
            codes = [("this tree", logdir / "tree", snapshot(logdir / "tree"))]
            if a.base != "none":
                codes.append((a.base, logdir / "base", base_code(a.base, logdir / "base")))
            return instructions(a, codes)
        finally:
            shutil.rmtree(logdir, ignore_errors=True)
    n = a.n or (2_000 if a.quick else 10_000)
    rounds = a.rounds or (1 if a.quick else 3)
    N = a.threads
    pinned = not a.no_pin and shutil.which("taskset") and (os.cpu_count() or 1) >= 2
    core = 0 if pinned else None
    logdir = Path(tempfile.mkdtemp(prefix="emq-bench-work-"))
    tree = logdir / "tree"
    label = snapshot(tree)
    sys.path.insert(0, str(tree))
    for mod in [m for m in sys.modules if m == "echomq" or m.startswith("echomq.")]:
        del sys.modules[mod]
    codes = [("this tree", tree, label)]
    if a.base != "none":
        codes.append((a.base, logdir / "base", base_code(a.base, logdir / "base")))

    rows = [{"name": "ceiling", "config": f"{N} plain threads, no queue", "kind": "ceiling", "threads": N,
             "body": "incr"}]
    for who, path, _ in codes:
        rows.append({"name": f"EchoMQ ({who})", "config": "Consumer(queue, handler)", "kind": "echo",
                     "code": path, "concurrency": None, "body": "incr", "default": who == "this tree"})
        rows.append({"name": f"EchoMQ ({who})", "config": f"Consumer(queue, handler, concurrency={N})",
                     "kind": "echo", "code": path, "concurrency": N, "body": "incr"})
        if who == "this tree":
            rows.append({"name": f"EchoMQ ({who})", "config": "minimal loop: the Consumer's shape, no bookkeeping",
                         "kind": "echo", "code": path, "concurrency": None, "body": "incr", "mode": "selfloop"})
    peers = [] if a.peers in ("", "none") else [p.strip() for p in a.peers.split(",") if p.strip()]
    from bench.peers import install as peer_install
    from bench.runs import peer_configs

    blocks = peer_install.blocks()
    skipped = []
    for p in peers:
        reason = peer_install.install(p, blocks[p], log=log) if p in blocks else "no block"
        info = peer_configs(p) if reason is None else reason
        if isinstance(info, str):
            skipped.append((p, info))
            continue
        cfg = next(iter(info["configs"]))
        rows.append({"name": f"{p} {info['version']}", "config": f"{cfg}: {info['configs'][cfg]}",
                     "kind": "peer", "peer": p, "threads": N, "body": "incr", "short": cfg})
    if not a.no_noop:
        for who, path, _ in codes:
            rows.append({"name": f"EchoMQ ({who})", "config": "no-op: Consumer(queue, handler)", "kind": "echo",
                         "code": path, "concurrency": None, "body": "noop"})
            rows.append({"name": f"EchoMQ ({who})", "config": f"no-op: concurrency={N}", "kind": "echo",
                         "code": path, "concurrency": N, "body": "noop"})

    from bench.server import Server

    server = Server()
    if pinned:
        pin_pid(server.proc.pid, 1)
    log(f"valkey {server.version} on core {1 if pinned else 'any'}, workers on core {core if pinned else 'any'}; "
        f"n={n}, {len(rows)} rows x {rounds} rounds; logs {logdir}")
    load0 = os.getloadavg()[0]
    results: list[list[dict]] = [[] for _ in rows]
    try:
        for r in range(rounds):
            for i, row in enumerate(rows):
                log(f"round {r + 1}/{rounds}: {row['name']} {row['config'][:60]}")
                results[i].append(run_row(server, row, n, a.lanes, logdir, core, f"r{r}-{i}"))
    finally:
        server.stop()

    ceil = [res.get("rate") for res in results[0]]
    table_rows, summary = [], {}
    for row, res in zip(rows, results):
        ok = [x for x in res if x.get("rate")]
        bad = next((x["status"] for x in res if x["status"] != "ok"), "")
        if not ok:
            table_rows.append([row["name"], row["config"][:60], "-", "-", "-", "-", "-", bad[:80]])
            continue
        shares = sorted(x["rate"] / c for x, c in zip(res, ceil) if x.get("rate") and c)
        rate = statistics.median(x["rate"] for x in ok)
        share = statistics.median(shares) if shares else None
        summary[id(row)] = share
        table_rows.append([row["name"], row["config"][:60], fmt_rate(rate),
                           f"{share:.0%}" if share else "-",
                           f"{shares[0]:.0%}-{shares[-1]:.0%}" if shares else "-",
                           fmt_us(statistics.median(x["cpu_us"] for x in ok if x.get("cpu_us") is not None)),
                           fmt_us(statistics.median(x["valkey_us"] for x in ok)), bad[:80]])
    head = (f"EchoMQ bench.work: each job does one INCR through one shared redis-py client; n={n} per row "
            f"({a.lanes} lanes for EchoMQ), {rounds} round(s), rows interleaved, medians shown\n"
            f"code: this tree {label}" + "".join(f"; {who}: {lab}" for who, _, lab in codes[1:]) +
            (f"\nworker pinned to core {core}, valkey to core 1" if pinned else "\nnot pinned"))
    print(head + f"; cores {os.cpu_count()}, load {load0:.1f} -> {os.getloadavg()[0]:.1f}")
    print(table("Jobs that do real work (one INCR each), one worker process",
                ["system", "config", "jobs/s", "of ceiling", "(rounds)", "worker us/job", "valkey us/job",
                 "status"], table_rows,
                "of ceiling: each round's rate / that round's ceiling (median; range over the rounds)."
                + "".join(f"\n  skipped {p}: {why}" for p, why in skipped)))
    default = next((r for r in rows if r.get("default")), None)
    share = summary.get(id(default)) if default else None
    if share is not None:
        print(f"\n== Goal: the default Consumer(queue, handler) reaches at least {GOAL:.0%} of the ceiling\n"
              f"{'MET' if share >= GOAL else 'NOT MET'} ({share:.0%} of the ceiling, median over {rounds} round(s))")
    if not a.keep_logs:
        shutil.rmtree(logdir, ignore_errors=True)
    else:
        print(f"logs: {logdir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
