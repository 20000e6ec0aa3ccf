import pytest
import redis

from echomq import ArgumentError, InvalidName, KindError, Queue, Unavailable, ids, keyspace
from echomq.scripts import LUA_DIR, NAMES


def test_crc16_and_slots_match_the_cluster_spec():
    assert keyspace.crc16(b"123456789") == 0x31C3
    assert keyspace.slot("emq:{orders}:pending") == 105
    assert keyspace.slot("emq:{fills}:active") == 4165
    assert keyspace.slot("emq:{payments}:meta") == 8507
    assert keyspace.slot("123456789") == 0x31C3 % 16384
    assert keyspace.hash_tag("a{}b{c}") == b"a{}b{c}"  # an empty tag does not count


def test_key_builders():
    jid = ids.mint("JOB")
    lane = ids.mint("PLR")
    assert keyspace.job_key("cm", jid) == f"emq:{{cm}}:job:{jid}"
    assert keyspace.lane_key("cm", lane) == f"emq:{{cm}}:g:{lane}:pending"
    assert keyspace.queue_key("cm", "pending") == "emq:{cm}:pending"


@pytest.mark.parametrize("name", ["", "emq", "a b", "a{b}", "x" * 129, "é", "cm:x"])
def test_ill_formed_queue_names_are_refused(name):
    with pytest.raises(InvalidName):
        keyspace.queue_key(name, "pending")


@pytest.mark.parametrize("value", [None, 5, 5.0, ["cm"]])
def test_a_non_text_name_is_an_argument_error_not_an_invalid_name(value):
    for build in (lambda: keyspace.queue_key(value, "pending"), lambda: keyspace.job_key("cm", value),
                  lambda: keyspace.lane_key("cm", value), lambda: Queue(value, None)):
        with pytest.raises(ArgumentError) as info:
            build()
        assert not isinstance(info.value, InvalidName)


@pytest.mark.parametrize("job_id", ["", "JOB", "JOB0KHTOWnGLu", "JOBAzL8n0Y58m8", "JOB0KHTOWnGL}C"])
def test_ill_formed_job_ids_are_refused(job_id):
    with pytest.raises(InvalidName):
        keyspace.job_key("cm", job_id)


def test_non_job_brand_is_a_kind_error():
    with pytest.raises(KindError):
        keyspace.job_key("cm", ids.mint("PLR"))


def test_lane_must_be_a_branded_id():
    with pytest.raises(InvalidName):
        keyspace.lane_key("cm", "player-1")


def test_refused_before_the_wire():
    """A client pointed at a closed port raises Unavailable on any send;
    ill-formed input must fail with our typed error instead."""
    dead = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    with pytest.raises(InvalidName):
        Queue("no spaces", dead)
    q = Queue("ok", dead)
    for call in (
        lambda: q.enqueue(b"x", job_id="JOBnope"),
        lambda: q.enqueue(b"x", job_id=ids.mint("GES")),
        lambda: q.enqueue(b"x", lane="not-a-lane"),
        lambda: q.complete("JOB123", 1),
        lambda: q.retry("bad", 1),
        lambda: q.extend("bad", 1),
        lambda: q.requeue_dead("bad"),
        lambda: q.remove("bad"),
        lambda: q.lanes.pause("bad"),
        lambda: q.enqueue_many([b"ok", {"payload": b"x", "job_id": "bad"}]),
    ):
        with pytest.raises(InvalidName):
            call()
    for call in (lambda: q.enqueue(b"x", delay_ms=-1), lambda: q.claim(lease_ms=0),
                 lambda: q.extend(ids.mint("JOB"), 1, lease_ms=10**30)):
        with pytest.raises(ArgumentError):
            call()
    with pytest.raises(Unavailable) as info:
        q.enqueue(b"x")  # a well-formed call does reach for the wire
    assert isinstance(info.value, redis.exceptions.ConnectionError)  # old catches still hold


def test_every_key_of_a_queue_is_in_one_slot(r):
    q = Queue("orders", r)
    lanes = [ids.mint("PLR") for _ in range(3)]
    for i in range(9):
        q.enqueue(b"x", lane=lanes[i % 3])
    q.enqueue_many([b"flat"] * 4)
    q.enqueue(b"later", delay_ms=60_000)
    q.lanes.limit(lanes[0], 5)
    jobs = q.claim_batch(3, lease_ms=60_000)  # flat jobs first
    q.retry(jobs[0].id, jobs[0].attempts, delay_ms=0, max_attempts=1, error="x")
    q.complete(jobs[1].id, jobs[1].attempts)
    keys = q.keys()
    assert {k.split(":")[2] for k in keys} >= {"pending", "active", "schedule", "dead", "ring", "wake",
                                                "meta", "lanes", "job", "g"}
    assert {keyspace.slot(k) for k in keys} == {105}


def test_every_script_has_a_header_naming_keys_argv_and_replies():
    for name in NAMES:
        head = (LUA_DIR / f"{name}.lua").read_text().split("]]", 1)[0]
        assert "KEYS[1]" in head and "ARGV[1]" in head and "Repl" in head, name
