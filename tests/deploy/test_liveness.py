"""Liveness of the worker processes (echomq.health): ``--health-port`` on
the four worker commands as real processes, a loop that really hangs, and
systemd's notify socket played by the test."""
from __future__ import annotations

import json
import os
import socket
import threading
import urllib.error
import urllib.request

import pytest

from echomq import Queue, Reaper, health
from echomq.embedded import free_port
from tests.games.procs import Proc, wait_for


def healthz(port: int) -> tuple[int, dict] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    except OSError:
        return None


def test_a_hung_loop_turns_healthz_503_and_a_moving_one_back_to_200(r):
    stuck, entered = threading.Event(), threading.Event()
    hang = threading.Event()

    def settle_rounds():  # a periodic task that hangs when asked to, as one waiting on a lost database would
        if hang.is_set():
            entered.set()
            stuck.wait(30)

    reaper = Reaper([Queue("lv", r)], interval_ms=10, tasks=[settle_rounds])
    liveness = health.Liveness([reaper], stale_after_s=0.5)
    server = health.serve(liveness, 0)
    port = server.server_address[1]
    assert healthz(port) == (200, {"status": "alive", "loops": {"reaper-0": "starting"}})
    thread = threading.Thread(target=reaper.run)
    thread.start()
    try:
        wait_for(lambda: healthz(port) == (200, {"status": "alive", "loops": {"reaper-0": "ok"}}), timeout=10,
                 what="the first pass")
        hang.set()
        assert entered.wait(10)
        status, body = wait_for(lambda: (got := healthz(port)) and got[0] == 503 and got, timeout=10,
                                what="the hung loop to count as stalled")
        assert body["status"] == "stalled" and body["stalled"] == ["reaper-0"]
        assert body["loops"]["reaper-0"].startswith("stalled: no pass for ")
        hang.clear()
        stuck.set()
        wait_for(lambda: healthz(port) == (200, {"status": "alive", "loops": {"reaper-0": "ok"}}), timeout=10,
                 what="alive again once the loop moves")
    finally:
        reaper.stop()
        stuck.set()
        thread.join(10)
        server.shutdown()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_every_worker_command_answers_healthz_on_its_port(valkey_server, tmp_path):
    commands = {"run_scoreworker": ["scoreworker/cm"], "run_notifier": ["settler"],
                "run_tasks": ["tasks/cm.tasks", "tasks/default", "reaper-2"], "run_reaper": ["reaper-0"]}
    procs = {}
    try:
        for name in commands:
            port = free_port()
            procs[name] = (Proc([name, "--health-port", str(port)], valkey_server.url, tmp_path, name), port)
        for name, (proc, port) in procs.items():
            got = wait_for(lambda: (got := healthz(port)) and got[1]["loops"] and "starting" not in
                           got[1]["loops"].values() and got or proc.popen.poll() is not None,
                           timeout=60, what=f"{name}'s /healthz")
            assert proc.popen.poll() is None, proc.output()
            assert got == (200, {"status": "alive", "loops": dict.fromkeys(commands[name], "ok")}), (name, got)
    finally:
        codes = {name: proc.terminate() for name, (proc, _) in procs.items()}
    assert codes == dict.fromkeys(commands, 0), {n: p.output()[-2000:] for n, (p, _) in procs.items()}


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_systemd_hears_ready_then_watchdog_pings(valkey_server, tmp_path):
    address = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(address)
        sock.settimeout(60)
        os.environ.update(NOTIFY_SOCKET=address, WATCHDOG_USEC="400000")  # a ping every 0.2 s
        try:
            proc = Proc(["run_reaper"], valkey_server.url, tmp_path, "reaper")
        finally:
            del os.environ["NOTIFY_SOCKET"], os.environ["WATCHDOG_USEC"]
        try:
            heard = [sock.recv(256).decode() for _ in range(3)]
        finally:
            code = proc.terminate()
    assert heard == ["READY=1", "WATCHDOG=1", "WATCHDOG=1"], proc.output()
    assert code == 0
