"""Flows (Queue.enqueue_flow, lua/enqueue_flow.lua, lua/include/flow.lua): the
parent is admitted once every child has ended; a child that does not
complete fails the parent ("fail") or is reported to it ("ignore"); a child
counts once however often it is delivered; bad arguments change nothing.
On Valkey and Redis 7.0, a sharded queue and the cluster; the crash test
SIGKILLs a real worker process in the middle of a flow."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from echomq import Queue, ShardedQueue, StaleToken, WrongState, ids
from echomq.errors import ArgumentError

from .helpers import snapshot

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def q(any_server):
    return Queue("fl", any_server)


def run_children(q, flow, *, fail=(), result=True):
    """Claim and end every child: complete (leaving a result), or dead for those in ``fail``."""
    jobs = {j.id: j for j in q.claim_batch(len(flow.children) + 5, lease_ms=60_000)}
    assert set(jobs) == set(flow.children)  # the parent is not ready while its children run
    for cid in flow.children:
        job = jobs[cid]
        if cid in fail:
            q.retry(cid, job.attempts, max_attempts=1, error=f"child {cid} broke")
        else:
            if result:
                job.set_result({"child": cid, "n": flow.children.index(cid)})
            q.complete(cid, job.attempts)


def test_the_parent_runs_after_every_child_completed(q, any_server):
    lane = ids.mint("PLR")
    flow = q.enqueue_flow({"payload": b"sum", "lane": lane}, [b"a", {"payload": b"b", "lane": lane}, b"c"])
    assert flow.status == "enqueued" and len(flow.children) == 3
    parent = q.job(flow.parent)
    assert (parent["state"], parent["children"], parent["children_left"], parent["policy"]) == \
        ("waiting", 3, 3, "fail")
    assert q.counts()["waiting"] == 1 and q.counts()["pending"] == 3
    jobs = q.claim_batch(10, lease_ms=60_000)
    assert sorted(j.id for j in jobs) == sorted(flow.children)
    for k, job in enumerate(jobs[:2]):
        job.set_result({"k": k})
        q.complete(job.id, job.attempts)
        assert q.job(flow.parent)["state"] == "waiting" and q.claim(lease_ms=1000) is None
    q.complete(jobs[2].id, jobs[2].attempts)  # no result left: null
    assert q.job(flow.parent)["state"] == "pending" and q.counts()["waiting"] == 0
    parent = q.claim(lease_ms=60_000)
    assert (parent.id, parent.payload, parent.lane) == (flow.parent, b"sum", lane)
    assert parent.children_results() == {
        jobs[0].id: {"state": "completed", "result": {"k": 0}},
        jobs[1].id: {"state": "completed", "result": {"k": 1}},
        jobs[2].id: {"state": "completed", "result": None}}
    assert [e.type for e in q.events("0") if e.job == flow.parent] == ["enqueued", "admitted", "claimed"]
    q.complete(parent.id, parent.attempts)
    assert not any_server.exists(q.prefix + "flow:" + flow.parent)  # its children's record goes with it
    assert q.children_results(flow.parent) == {}


def test_a_dead_child_fails_the_parent_naming_it(q):
    flow = q.enqueue_flow(b"p", [b"a", b"b", b"c"])
    bad = flow.children[1]
    jobs = {j.id: j for j in q.claim_batch(3, lease_ms=60_000)}
    q.retry(bad, jobs[bad].attempts, max_attempts=1, error="boom")
    parent = q.job(flow.parent)
    assert parent["state"] == "dead" and bad in parent["last_error"] and "dead" in parent["last_error"]
    dead = [e for e in q.events("0") if e.job == flow.parent and e.type == "dead"]
    assert [e.data for e in dead] == [{"child": bad, "child_state": "dead"}]
    assert q.wait(flow.parent, 1) == "dead"
    for cid in (flow.children[0], flow.children[2]):  # the others run on; the parent stays dead, once
        q.complete(cid, jobs[cid].attempts)
    assert q.job(flow.parent)["state"] == "dead" and q.counts()["dead_total"] == 2
    assert q.children_results(flow.parent)[bad] == {"state": "dead", "error": "boom"}
    q.requeue_dead(flow.parent)  # an operator may still run it: it reads what happened
    parent = q.claim(lease_ms=60_000)
    assert parent.id == flow.parent and parent.children_results()[flow.children[0]]["state"] == "completed"


def test_ignore_runs_the_parent_and_tells_it_which_failed(q):
    flow = q.enqueue_flow(b"p", [b"a", b"b", b"c"], on_child_failure="ignore")
    run_children(q, flow, fail={flow.children[0]})
    parent = q.claim(lease_ms=60_000)
    assert parent.id == flow.parent
    results = parent.children_results()
    assert results[flow.children[0]] == {"state": "dead", "error": f"child {flow.children[0]} broke"}
    assert [results[c]["state"] for c in flow.children[1:]] == ["completed", "completed"]


@pytest.mark.parametrize("how", ["cancel", "remove"])
def test_a_child_cancelled_or_removed_is_a_failure(q, how):
    flow = q.enqueue_flow(b"p", [b"a", b"b"])
    getattr(q, how)(flow.children[0])
    want = "cancelled" if how == "cancel" else "removed"
    assert q.job(flow.parent)["state"] == "dead"
    assert q.children_results(flow.parent)[flow.children[0]] == {"state": want}


def test_a_redelivered_child_counts_once(q, any_server):
    flow = q.enqueue_flow(b"p", [b"a", b"b"])
    a, b = q.claim_batch(2, lease_ms=60_000)
    any_server.zadd(q.k_active, {a.id: 0})  # a's worker died
    assert q.reap() == 1
    again = q.claim(lease_ms=60_000)
    assert again.id == a.id and again.attempts == 2
    with pytest.raises(StaleToken):
        q.complete(a.id, a.attempts)  # the dead worker's late ack counts for nothing
    q.complete(again.id, again.attempts)
    assert q.complete(a.id, a.attempts) is False  # nor once the row is gone
    assert q.job(flow.parent)["children_left"] == 1 and q.job(flow.parent)["state"] == "waiting"
    q.complete(b.id, b.attempts)
    assert q.job(flow.parent)["children_left"] == 0
    assert [e.type for e in q.events("0")].count("admitted") == 1


def test_a_requeued_child_that_completes_later_updates_its_record_only(q):
    flow = q.enqueue_flow(b"p", [b"a", b"b"], on_child_failure="ignore")
    a, b = q.claim_batch(2, lease_ms=60_000)
    q.retry(a.id, a.attempts, max_attempts=1, error="first try")
    q.requeue_dead(a.id)
    again = q.claim(lease_ms=60_000)
    q.complete(again.id, again.attempts)
    assert q.job(flow.parent)["children_left"] == 1  # counted when it first ended
    assert q.children_results(flow.parent)[a.id] == {"state": "completed", "result": None}
    q.complete(b.id, b.attempts)
    assert q.job(flow.parent)["state"] == "pending"


@pytest.mark.parametrize("how", ["remove", "cancel"])
def test_a_parent_removed_while_waiting_leaves_its_children_alone(q, any_server, how):
    flow = q.enqueue_flow(b"p", [b"a"])
    assert getattr(q, how)(flow.parent) == ("waiting" if how == "remove" else "cancelled")
    assert q.counts()["waiting"] == 0 and not any_server.exists(q.prefix + "flow:" + flow.parent)
    child = q.claim(lease_ms=60_000)
    assert q.complete(child.id, child.attempts) is True
    assert q.job(flow.parent) is None and "admitted" not in [e.type for e in q.events("0")]


def test_a_duplicate_flow_changes_nothing(q, any_server):
    pid = ids.mint("JOB")
    first = q.enqueue_flow({"payload": b"p", "job_id": pid}, [b"a"])
    before = snapshot(any_server, q)
    again = q.enqueue_flow({"payload": b"p2", "job_id": pid}, [b"x", b"y"])
    assert (again.status, again.parent) == ("duplicate", first.parent)
    assert snapshot(any_server, q) == before


def test_a_child_that_exists_is_refused_and_changes_nothing(q, any_server):
    taken, _ = q.enqueue(b"exists")
    before = snapshot(any_server, q)
    with pytest.raises(WrongState):
        q.enqueue_flow(b"p", [b"a", {"payload": b"b", "job_id": taken}])
    assert snapshot(any_server, q) == before


def test_bad_flows_are_refused_before_sending(any_server):
    q = Queue("fl", any_server)
    pid = ids.mint("JOB")
    bad = [
        lambda: q.enqueue_flow(b"p", []),
        lambda: q.enqueue_flow(b"p", b"child"),
        lambda: q.enqueue_flow(b"p", [b"a"], on_child_failure="skip"),
        lambda: q.enqueue_flow(b"p", [{"payload": b"a", "delay_ms": 5}]),
        lambda: q.enqueue_flow(b"p", [{"job_id": pid}]),
        lambda: q.enqueue_flow(b"p", [7]),
        lambda: q.enqueue_flow({"payload": b"p", "job_id": pid}, [{"payload": b"a", "job_id": pid}]),
        lambda: q.enqueue_flow(b"p", [{"payload": b"a", "lane": "nope"}]),
        lambda: q.enqueue_flow({"payload": b"p", "job_id": ids.mint("GES")}, [b"a"]),
        lambda: q.enqueue_flow(b"p", [b"a"] * 10_001),
    ]
    for call in bad:
        with pytest.raises(ArgumentError):
            call()
    assert any_server.dbsize() == 0


def test_a_flow_on_a_sharded_queue_stays_on_its_parents_shard(valkey_server):
    client = valkey_server.client()
    client.flushall()
    sq = ShardedQueue("fls", client, shards=4)
    lane = ids.mint("PLR")
    flow = sq.enqueue_flow({"payload": b"p", "lane": lane}, [{"payload": b"c", "lane": ids.mint("PLR")}
                                                             for _ in range(6)])
    shard = sq.shard_for(lane=lane)
    assert all(shard.job(c) is not None for c in flow.children)
    jobs = sq.claim_batch(10, lease_ms=60_000)
    sq.complete_many([(j.id, j.attempts) for j in jobs])
    parent = sq.claim(lease_ms=60_000)
    assert parent.id == flow.parent and len(parent.children_results()) == 6


def _lane_off(sq, shard: int) -> str:
    """A lane whose shard is not ``shard``."""
    while True:
        lane = ids.mint("PLR")
        if sq.shard_index(lane=lane) != shard:
            return lane


def _job_id_off(sq, shard: int) -> str:
    """A JOB id whose own shard (no lane) is not ``shard``."""
    while True:
        job_id = ids.mint("JOB")
        if sq.shard_index(job_id=job_id) != shard:
            return job_id


@pytest.mark.parametrize("where", ["one node", "cluster"])
def test_a_sharded_flow_sees_ids_that_exist_on_other_shards(where, request):
    """The flow goes to the parent's shard; a child's id that exists on
    another shard (enqueued on its lane's shard, or on its id's) is refused
    as on a plain queue (WrongState, nothing written anywhere), and a parent
    id that exists on another shard is a duplicate (nothing written)."""
    if where == "one node":
        client = request.getfixturevalue("valkey_server").client()
    else:
        client = request.getfixturevalue("valkey_cluster").client()
    client.flushall()
    sq = ShardedQueue("flx", client, shards=4)
    plane = ids.mint("PLR")
    home = sq.shard_index(lane=plane)
    lane = _lane_off(sq, home)
    on_lane, _ = sq.enqueue(b"on its lane's shard", lane=lane)
    flat, _ = sq.enqueue(b"on its id's shard", job_id=_job_id_off(sq, home))
    before = snapshot(client, sq)
    for taken, child_lane in ((on_lane, lane), (flat, None), (on_lane, None)):
        with pytest.raises(WrongState, match=taken):
            sq.enqueue_flow({"payload": b"p", "lane": plane},
                            [b"a", {"payload": b"b", "job_id": taken, "lane": child_lane}])
        assert snapshot(client, sq) == before
    again = sq.enqueue_flow({"payload": b"p", "job_id": flat, "lane": plane}, [b"a"])
    assert (again.status, again.parent) == ("duplicate", flat)
    assert snapshot(client, sq) == before
    flow = sq.enqueue_flow({"payload": b"p", "lane": plane}, [b"a", {"payload": b"b", "lane": lane}])
    assert flow.status == "enqueued" and all(sq.shards[home].job(c) for c in flow.children)
    retried = sq.enqueue_flow({"payload": b"p", "job_id": flow.parent, "lane": plane},
                              [{"payload": b"a", "job_id": c} for c in flow.children])
    assert retried.status == "duplicate"  # the parent first, as on a plain queue: not the existing children
    mixed = sq.enqueue_flow({"payload": b"p", "job_id": flow.parent, "lane": plane},
                            [{"payload": b"a", "job_id": on_lane}])
    assert mixed.status == "duplicate"  # so even with a child that another shard holds


def test_a_flow_on_the_cluster(valkey_cluster):
    client = valkey_cluster.client()
    q = Queue("flc", client)
    flow = q.enqueue_flow(b"p", [b"a", b"b"], on_child_failure="ignore")
    run_children(q, flow, fail={flow.children[1]})
    parent = q.claim(lease_ms=60_000)
    assert parent.id == flow.parent and parent.children_results()[flow.children[1]]["state"] == "dead"
    q.complete(parent.id, parent.attempts)
    assert q.wait(flow.parent, 1) == "completed"


# -- crash: real worker processes ------------------------------------------------
def test_a_sigkilled_child_worker_releases_the_parent_exactly_once(valkey_server, r, tmp_path):
    """Two worker processes run a flow of 8 children; the first to take the
    child marked 'kill' SIGKILLs itself holding it (and whatever else it
    holds). The reaper returns its jobs and the survivor finishes them: each
    child completes once, the parent is admitted once, and it sees every child
    completed."""
    q = Queue("crashflow", r)
    flow = q.enqueue_flow(b"parent", [b"kill"] + [b"ok"] * 7)
    kill_child = flow.children[0]
    logs, procs = [], []
    try:
        for i in range(2):
            logs.append(open(tmp_path / f"worker-{i}.log", "w+"))
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "tests.echomq.worker_proc", "--url", valkey_server.url, "--queue", "crashflow",
                 "--mode", "flow", "--lease-ms", "2000", "--beat-ms", "100"],
                cwd=ROOT, stdout=logs[-1], stderr=subprocess.STDOUT))
        _, pid = r.blpop(["killed"], timeout=60)
        victim = next(p for p in procs if p.pid == int(pid))
        assert victim.wait(30) == -signal.SIGKILL
        survivor = next(p for p in procs if p is not victim)
        reaped = 0
        while not r.blpop(["parent-done"], timeout=0.1):  # leases run out on the server clock
            reaped += q.reap()
            assert survivor.poll() is None, Path(logs[procs.index(survivor)].name).read_text()
        assert reaped >= 1
        assert q.wait(flow.parent, 30) == "completed"  # its handler ran; now its ack
        runs = [x.decode() for x in r.lrange("runs", 0, -1)]
        assert runs.count(kill_child) >= 2  # the victim's run, then the survivor's
        assert {k.decode(): v.decode() for k, v in r.hgetall("parent-saw").items()} == \
            {c: "completed" for c in flow.children}
        events = list(q.events("0"))
        # Admitted exactly once, completed once. (On a loaded machine a late
        # heartbeat may let a lease run out and the parent run again, as any
        # job may: delivery is at least once; its release is exactly once.)
        mine = [e.type for e in events if e.job == flow.parent]
        assert (mine[0], mine.count("admitted"), mine.count("completed"), mine[-1]) == ("enqueued", 1, 1, "completed")
        assert mine.index("admitted") < mine.index("claimed")
        for child in flow.children:
            assert [e.type for e in events if e.job == child].count("completed") == 1
        os.kill(survivor.pid, signal.SIGTERM)
        assert survivor.wait(30) == 0
        assert q.counts()["completed"] == 9 and q.counts()["active"] == 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        for log in logs:
            log.close()
