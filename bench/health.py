"""What the health checks cost: ``python -m bench.health [--requests N] [--database-url URL]``.

One gunicorn sync worker (the site's gunicorn_conf, DEBUG off) on a Valkey of
its own and a PostgreSQL (the machine's ``postgres`` database by default:
``/readyz`` only runs ``SELECT 1``). For ``/healthz``, ``/readyz`` and, as a
yardstick, ``/rules/`` (a small page through every middleware, the way a
browser asks for it), N requests each, one at a time, as a balancer asking
by IP address over plain HTTP would (``/rules/`` with the site's host name
and ``X-Forwarded-Proto: https``): latency median and p99, and the worker's
CPU per request from /proc (10 ms ticks over N requests). The three rows are
measured in turns, in slices, so a noisy spell of a shared machine lands on
all of them. Prints a table.
"""
from __future__ import annotations

import argparse
import http.client
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from echomq import embedded

REPO = Path(__file__).resolve().parent.parent
SITE = "codemojex.example"
PATHS = {"/healthz": {"Host": "10.0.0.7:8000"}, "/readyz": {"Host": "10.0.0.7:8000"},
         "/rules/": {"Host": SITE, "X-Forwarded-Proto": "https"}}


def get(port: int, path: str, headers: dict) -> tuple[int, float]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    start = time.perf_counter()
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        response.read()
    finally:
        connection.close()
    return response.status, time.perf_counter() - start


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000, help="per path (default 1000)")
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench-health-"))
    valkey_port = embedded.free_port()
    valkey = embedded.start_server(tmp / "valkey", valkey_port, appendonly=False)
    valkey_url = f"redis://127.0.0.1:{valkey_port}/0"
    embedded.wait_ready(valkey_url, proc=valkey)
    port = embedded.free_port()
    env = dict(os.environ, DEBUG="0", SECRET_KEY="bench-health-" + "x" * 40, ALLOWED_HOSTS=SITE, BEHIND_PROXY="1",
               DATABASE_URL=args.database_url, VALKEY_URL=valkey_url, STATIC_ROOT=str(tmp / "static"),
               CODEMOJEX_VAR_DIR=str(tmp / "var"), LOG_LEVEL="WARNING")
    print("collecting static files, starting gunicorn (1 sync worker)", flush=True)
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--no-input", "-v", "0"], cwd=REPO, env=env,
                   check=True)
    web = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "python:codemojex_site.gunicorn_conf",
                            "codemojex_site.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
                           cwd=REPO, env=env, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if get(port, "/readyz", PATHS["/readyz"])[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("gunicorn did not answer /readyz with 200 in 60 s")
            time.sleep(0.2)
        worker = int(subprocess.check_output(["pgrep", "-P", str(web.pid)]).split()[0])
        times = {path: [] for path in PATHS}
        cpu = dict.fromkeys(PATHS, 0.0)
        for path, headers in PATHS.items():  # warm-up
            for _ in range(50):
                assert get(port, path, headers)[0] == 200, path
        slices = 10
        for n in range(slices):
            for path, headers in PATHS.items():
                before = cpu_seconds(worker)
                for _ in range(args.requests // slices):
                    times[path].append(get(port, path, headers)[1])
                cpu[path] += cpu_seconds(worker) - before
            print(f"  slice {n + 1}/{slices}", flush=True)
        print(f"\n{'path':<10} {'median ms':>10} {'p99 ms':>8} {'worker CPU µs/request':>22}")
        for path in PATHS:
            ts = sorted(times[path])
            print(f"{path:<10} {ts[len(ts) // 2] * 1000:>10.2f} {ts[int(len(ts) * 0.99)] * 1000:>8.2f} "
                  f"{cpu[path] / len(ts) * 1e6:>22.0f}")
        print(f"\nload average {os.getloadavg()[0]:.1f}; {len(os.sched_getaffinity(0))} cores")
    finally:
        web.send_signal(signal.SIGTERM)
        web.wait(30)
        valkey.terminate()
        valkey.wait(10)
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


if __name__ == "__main__":
    main()
