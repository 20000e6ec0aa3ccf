"""The measurements. Each returns plain dict rows; __main__ prints them."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from echomq import Queue

from bench.peers import QUEUE, install as peer_install
from bench.proc import WorkerProc, run_once

PY = sys.executable
FILL_CHUNK = 1000


def _q(server) -> Queue:
    return Queue(QUEUE, server.client)


def echo_fill(server, n: int, payload: bytes = b"x") -> float:
    q = _q(server)
    t0 = time.perf_counter()
    for i in range(0, n, FILL_CHUNK):
        q.enqueue_many([payload] * min(FILL_CHUNK, n - i))
    return time.perf_counter() - t0


# -- 1. enqueue ------------------------------------------------------------
def enqueue(server, n_single: int, n_many: int, chunk: int = FILL_CHUNK) -> list[dict]:
    rows = []
    server.flush()
    q = _q(server)
    t0 = time.perf_counter()
    for _ in range(n_single):
        q.enqueue(b"x")
    dt = time.perf_counter() - t0
    rows.append({"system": "EchoMQ", "config": "Queue.enqueue, one call per job", "n": n_single,
                 "rate": n_single / dt})
    server.flush()
    t0 = time.perf_counter()
    for i in range(0, n_many, chunk):
        q.enqueue_many([b"x"] * min(chunk, n_many - i))
    dt = time.perf_counter() - t0
    rows.append({"system": "EchoMQ", "config": f"Queue.enqueue_many, {chunk} per call", "n": n_many,
                 "rate": n_many / dt})
    return rows


# -- 4. script cost inside Valkey -------------------------------------------
def _phase(server, fn, label: str) -> dict:
    """CONFIG RESETSTAT, run fn (it answers how many jobs it moved), read
    INFO commandstats. EVALSHA time includes the commands the script ran."""
    server.client.config_resetstat()
    jobs = fn()
    stats = server.commandstats()
    ev = stats.get("evalsha", {})
    calls = ev.get("calls", 0) or 1
    inner = {k: v["calls"] / calls for k, v in stats.items()
             if k not in ("evalsha", "info") and not k.startswith("config") and v.get("calls")}
    return {"script": label, "calls": int(ev.get("calls", 0)), "jobs": jobs,
            "usec_per_call": ev.get("usec_per_call", 0.0),
            "usec_per_job": ev.get("usec", 0.0) / max(1, jobs),
            "inner": ", ".join(f"{k} {v:.3g}" for k, v in sorted(inner.items(), key=lambda kv: -kv[1]))}


def script_cost(server, n: int, batch: int = 64) -> list[dict]:
    """One phase per script, each on its own counters."""
    server.flush()
    q = _q(server)
    c = server.client
    noop_sha = c.script_load("return 1")
    rows = []

    def floor():
        for _ in range(n):
            c.evalsha(noop_sha, 0)
        return n

    def fill():
        k = 2 * n + batch
        for i in range(0, k, FILL_CHUNK):
            q.enqueue_many([b"x"] * min(FILL_CHUNK, k - i))
        return k

    single, many = [], []

    def claim1():
        for _ in range(n):
            single.extend(q.claim_batch(1))
        return len(single)

    def complete1():
        for j in single:
            q.complete(j.id, j.attempts)
        return len(single)

    def claimN():
        for _ in range(n // batch):
            many.extend(q.claim_batch(batch))
        return len(many)

    def extend():
        q.extend_many([(j.id, j.attempts) for j in many], lease_ms=30_000)
        return len(many)

    def complete_many():
        for i in range(0, len(many), batch):
            q.complete_many([(j.id, j.attempts) for j in many[i:i + batch]])
        return len(many)

    rows.append(_phase(server, floor, "EVALSHA 'return 1' (floor)"))
    rows.append(_phase(server, fill, f"enqueue (via enqueue_many x{FILL_CHUNK})"))
    rows.append(_phase(server, claim1, "claim, n=1"))
    rows.append(_phase(server, complete1, "complete, one job"))
    rows.append(_phase(server, claimN, f"claim, n={batch}"))
    rows.append(_phase(server, extend, "extend (heartbeat), extend_many"))
    rows.append(_phase(server, complete_many, f"complete_many, {batch} per call"))
    return rows


# -- drains ------------------------------------------------------------------
def _drain(server, argv, n: int, budget: float, log: Path, *, echo: bool,
           code_dir: Path | None = None) -> dict:
    """Start the worker, time it, stop it. Fills must already be done."""
    w = WorkerProc(argv, log, code_dir=code_dir)
    row: dict = {"n": n}
    try:
        line = w.next_line(90)
        if line is None or line[0] != "READY":
            row["status"] = "failed: " + ("no READY in 90s" if line is None else f"exited: {w.tail()}")
            return row
        t_ready = line[2]
        cpu0 = server.cpu_s()
        q = _q(server) if echo else None
        t_empty = None
        deadline = t_ready + budget
        result = None
        while time.perf_counter() < deadline:
            line = w.next_line(0.005 if echo and t_empty is None else 0.25)
            if echo and t_empty is None:
                cnt = q.counts()
                if cnt["pending"] == 0 and cnt["active"] == 0:
                    t_empty = time.perf_counter()
            if line is None:
                continue
            if line[0] == "RESULT":
                result, t_result = line[1], line[2]
                break
            if line[0] == "EOF":
                row["status"] = f"failed: worker exited: {w.tail()}"
                return row
        cpu1 = server.cpu_s()
        if result is None or not result.get("rate"):
            prog = w.progress
            if prog and prog[0] > 1 and prog[1] > 0:
                row.update(status=f"partial: {prog[0]} of {n} jobs in the {budget:.0f}s budget",
                           rate=(prog[0] - 1) / prog[1], valkey_us=(cpu1 - cpu0) / prog[0] * 1e6,
                           cpu_us=prog[2] / (prog[0] - 1) * 1e6)
            else:
                row["status"] = f"failed: no job done in {budget:.0f}s ({w.tail()})"
            return row
        row.update(status="ok", rate=result["rate"], cpu_us=result.get("cpu_us_per_job"),
                   valkey_us=(cpu1 - cpu0) / n * 1e6, version=result.get("version"),
                   describe=result.get("describe"), stats=result.get("stats"))
        if echo:
            if not w.wait_exit(15):
                row["status"] = "ok (consumer did not exit within 15s of stop)"
            if t_empty is None:
                cnt = q.counts()
                if cnt["pending"] == 0 and cnt["active"] == 0:
                    t_empty = time.perf_counter()
            if t_empty is not None:
                row["wall_rate"] = n / (t_empty - t_ready)
            cnt = q.counts()
            if cnt["completed"] != n or cnt["pending"] or cnt["active"]:
                row["status"] = f"CHECK: counts after stop {cnt}"
        else:
            row["wall_rate"] = n / (t_result - t_ready)
        return row
    finally:
        w.kill()


def _pf(prefetch) -> str:
    return "auto" if prefetch is None else str(prefetch)


def echo_drain(server, n: int, mode: str, concurrency: int, prefetch: int | None, budget: float,
               logdir: Path, consumer_spec: str, code_dir: Path | None = None, tag: str = "") -> dict:
    """prefetch None: no prefetch flag at all (the Consumer's default)."""
    server.flush()
    echo_fill(server, n)
    argv = [PY, "-m", "bench.echo_worker", "--url", server.url, "--queue", QUEUE, "--n", str(n),
            "--mode", mode, "--concurrency", str(concurrency), "--prefetch", _pf(prefetch),
            "--consumer", consumer_spec]
    tag = f"echo-{mode}-c{concurrency}-p{_pf(prefetch)}{tag}"
    return _drain(server, argv, n, budget, logdir / f"{tag}.log", echo=True, code_dir=code_dir)


def consumer_available(spec: str, code_dir: Path | None = None) -> str | None:
    """None when the consumer class imports in a fresh interpreter, else why not."""
    module, _, attr = spec.partition(":")
    code = f"import {module} as m; getattr(m, {attr or 'Consumer'!r})"
    import os
    import subprocess

    from bench.proc import REPO

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(([str(code_dir)] if code_dir else []) + [str(REPO)]))
    p = subprocess.run([PY, "-c", code], cwd=code_dir or REPO, capture_output=True, text=True,
                       timeout=60, env=env)
    if p.returncode == 0:
        return None
    last = (p.stderr.strip().splitlines() or ["?"])[-1]
    return f"{spec} not importable: {last[:150]}"


# -- mixed handlers over two consumers ------------------------------------------
def mix(server, prefetch: int | None, *, fast: int, slow: int, slow_ms: int, consumers: int,
        concurrency: int, logdir: Path, consumer_spec: str, code_dir: Path | None = None,
        timeout: float = 120.0) -> dict:
    """``consumers`` consumer processes start on an empty queue; once all are
    READY, ``fast`` 1 ms jobs and ``slow`` jobs of ``slow_ms`` (spread evenly
    among them) are enqueued in one call; timed until counts() shows them all
    completed. A consumer that sits on prefetched jobs behind slow handlers
    makes this slower than prefetch=0."""
    server.flush()
    argv = [PY, "-m", "bench.echo_worker", "--url", server.url, "--queue", QUEUE, "--n", "1",
            "--mode", "mix", "--concurrency", str(concurrency), "--prefetch", _pf(prefetch),
            "--consumer", consumer_spec]
    procs = [WorkerProc(argv, logdir / f"mix-{_pf(prefetch)}-{i}.log", code_dir=code_dir)
             for i in range(consumers)]
    row = {"prefetch": _pf(prefetch), "fast": fast, "slow": slow, "slow_ms": slow_ms,
           "consumers": consumers, "concurrency": concurrency}
    try:
        for w in procs:
            line = w.next_line(90)
            if line is None or line[0] != "READY":
                row["status"] = f"failed: no READY ({w.tail()})"
                return row
        every = max(1, (fast + slow) // max(1, slow))
        payloads = [str(slow_ms if i % every == every // 2 and i // every < slow else 1).encode()
                    for i in range(fast + slow)]
        q = _q(server)
        total = len(payloads)
        t0 = time.perf_counter()
        q.enqueue_many(payloads)
        while q.counts()["completed"] < total:
            if time.perf_counter() - t0 > timeout:
                row["status"] = f"partial: {q.counts()['completed']} of {total} in {timeout:.0f}s"
                return row
            time.sleep(0.005)  # polling the server: the event is in another process
        row.update(status="ok", seconds=time.perf_counter() - t0,
                   slow_jobs=sum(p != b"1" for p in payloads))
        return row
    finally:
        for w in procs:
            w.kill()


# -- 3. latency ----------------------------------------------------------------
def latency(server, rate: float, seconds: float, concurrency: int, prefetch: int,
            logdir: Path, consumer_spec: str, code_dir: Path | None = None) -> dict:
    server.flush()
    n = int(rate * seconds)
    argv = [PY, "-m", "bench.echo_worker", "--url", server.url, "--queue", QUEUE, "--n", str(n),
            "--mode", "latency", "--concurrency", str(concurrency), "--prefetch", _pf(prefetch),
            "--consumer", consumer_spec]
    w = WorkerProc(argv, logdir / f"latency-c{concurrency}-p{_pf(prefetch)}.log", code_dir=code_dir)
    row = {"rate": rate, "n": n, "concurrency": concurrency, "prefetch": prefetch}
    try:
        line = w.next_line(90)
        if line is None or line[0] != "READY":
            row["status"] = f"failed: no READY ({w.tail()})"
            return row
        time.sleep(0.2)  # let the consumer park on its wake list
        q = _q(server)
        wall0, perf0 = time.time(), time.perf_counter()
        worst_lag = 0.0
        for i in range(n):
            due = perf0 + i / rate
            now = time.perf_counter()
            if due > now:
                time.sleep(due - now)
            else:
                worst_lag = max(worst_lag, now - due)
            # The intended send time, so a producer that falls behind counts
            # against the queue (no coordinated omission).
            q.enqueue(repr(wall0 + i / rate).encode())
        line = w.next_line(max(30.0, seconds))
        if line is None or line[0] != "RESULT":
            row["status"] = f"failed: {'timeout' if line is None else w.tail()}"
            return row
        row.update(status="ok", producer_lag_ms=worst_lag * 1000, **line[1].get("latency_ms", {}))
        w.wait_exit(15)
        return row
    finally:
        w.kill()


# -- 5. peers --------------------------------------------------------------------
def peer_drain(server, peer: str, config: str, n: int, concurrency: int, budget: float,
               logdir: Path, fill_budget: float) -> dict:
    py = str(peer_install.venv_python(peer))
    log = logdir / f"peer-{peer}-{config}.log"
    server.flush()
    base = [py, "-m", "bench.peers.run", peer]
    opts = ["--url", server.url, "--concurrency", str(concurrency)]
    filled, err = run_once(base + ["fill", "--n", str(n), "--fill-budget", str(fill_budget)] + opts,
                           log, timeout=fill_budget + 90)
    if filled is None:
        return {"status": f"skipped: fill failed: {err}"}
    n = filled.get("filled", n)
    row = _drain(server, base + ["work", "--n", str(n), "--config", config] + opts, n, budget, log,
                 echo=False)
    row.setdefault("version", filled.get("version"))
    row["fill_rate"] = filled.get("fill_rate")
    row["fill_method"] = filled.get("method")
    return row


def peer_configs(peer: str) -> dict | str:
    """The adapter's CONFIGS, read inside the peer's venv; or why not."""
    py = peer_install.venv_python(peer)
    import json
    import subprocess

    from bench.proc import REPO

    code = (f"import json, bench.peers.{peer}_peer as m, importlib.metadata as md; "
            f"print(json.dumps({{'configs': m.CONFIGS, 'version': md.version(m.DIST)}}))")
    try:
        p = subprocess.run([str(py), "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                           env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"import failed: {exc}"
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["?"])[-1]
        return f"import failed: {last[:150]}"
    return json.loads(p.stdout.strip().splitlines()[-1])
