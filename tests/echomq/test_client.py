"""``echomq.client.Client``: single commands over the thread's own
connection, with redis-py's replies, errors and retries unchanged."""
from __future__ import annotations

import threading

import pytest
import redis

from echomq.client import Client
from echomq.contrib.django import retry_policy


@pytest.fixture
def client(valkey_server):
    c = Client.from_url(valkey_server.url, socket_timeout=2, retry=retry_policy())
    c.flushall()
    yield c
    c.close()


def test_replies_are_parsed_as_redis_py_parses_them(client):
    assert client.set("k", "v") is True
    assert client.get("k") == b"v"
    assert client.mget(["k", "missing"]) == [b"v", None]
    client.hset("h", mapping={"a": "1"})
    assert client.hgetall("h") == {b"a": b"1"}
    assert client.exists("k", "missing") == 1


def test_a_thread_keeps_one_connection_and_other_threads_their_own(client):
    mine = {client.client_id() for _ in range(5)}
    theirs = []
    t = threading.Thread(target=lambda: theirs.append(client.client_id()))
    t.start()
    t.join()
    assert len(mine) == 1 and theirs[0] not in mine


def test_threads_that_come_and_go_do_not_use_up_a_bounded_pool(valkey_server):
    """Each thread's own connection is outside the pool's count: a pool of
    two lends its two to pipelines however many threads have come and gone."""
    pool = redis.ConnectionPool.from_url(valkey_server.url, max_connections=2)
    c = Client(connection_pool=pool)
    try:
        answers = []
        for _ in range(5):
            t = threading.Thread(target=lambda: answers.append(c.ping()))
            t.start()
            t.join()
        assert answers == [True] * 5
        with c.pipeline() as p1, c.pipeline() as p2:
            assert p1.ping().execute() == [True] and p2.ping().execute() == [True]
    finally:
        c.close()


def test_pipelines_and_transactions_still_work_through_the_pool(client):
    with client.pipeline() as pipe:
        pipe.set("a", 1).incr("a")
        assert pipe.execute() == [True, 2]
    with client.pipeline(transaction=True) as pipe:
        pipe.incr("a").get("a")
        assert pipe.execute() == [3, b"3"]


def test_a_reply_error_keeps_the_connection(client):
    before = client.client_id()
    with pytest.raises(redis.exceptions.NoScriptError):
        client.evalsha("0" * 40, 0)
    with pytest.raises(redis.exceptions.ResponseError):
        client.execute_command("INCR", "k", "extra")
    assert client.client_id() == before


def test_a_connection_the_server_closed_is_replaced_by_the_retry(client, valkey_server):
    before = client.client_id()
    valkey_server.client().client_kill_filter(_id=before)
    assert client.set("after", "kill") is True  # the retry policy's one retry, on a new connection
    assert client.client_id() != before


def test_a_timeout_drops_the_connection_so_its_late_reply_is_never_read(valkey_server):
    c = Client.from_url(valkey_server.url, socket_timeout=0.2, retry=retry_policy())
    before = c.client_id()
    with pytest.raises(redis.exceptions.TimeoutError):
        c.blpop(["empty"], timeout=1)  # answers (nil) after 1 s: past the socket timeout
    c.rpush("empty", "x")
    assert c.lpop("empty") == b"x", "the next command reads its own reply, not the blpop's"
    assert c.client_id() != before
    c.close()


FORK_CHILD = """
import os, sys
from echomq.client import Client
c = Client.from_url(sys.argv[1])
parent = c.client_id()
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(write, str(c.client_id()).encode())
    os._exit(0)
os.close(write)
child = int(os.read(read, 64) or 0)
os.waitpid(pid, 0)
print(parent, child, c.client_id())
"""


def test_a_forked_child_opens_its_own_connection(valkey_server):
    """In a fresh single-threaded interpreter (fork() of a threaded one
    is unsafe): the child never writes on the parent's socket."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", FORK_CHILD, valkey_server.url], capture_output=True, text=True,
                         timeout=30, check=True).stdout.split()
    parent, child, parent_again = map(int, out)
    assert child and child != parent
    assert parent_again == parent, "the parent's connection is untouched"


def test_close_drops_the_threads_connection(client, valkey_server):
    before = client.client_id()
    client.close()
    ids = {int(c["id"]) for c in valkey_server.client().client_list()}
    assert before not in ids


def test_execute_many_sends_a_batch_in_one_write_and_reads_every_reply(client, monkeypatch):
    writes = []
    conn = client._own_connection()
    real = type(conn).send_packed_command
    monkeypatch.setattr(type(conn), "send_packed_command", lambda self, c, check_health=True: (
        writes.append(c), real(self, c, check_health))[1])
    before = client.client_id()
    writes.clear()
    replies = client.execute_many([("SET", "a", "1"), ("INCR", "a", "extra"), ("INCR", "a"), ("MGET", "a", "b")])
    assert len(writes) == 1
    assert replies[0] is True and isinstance(replies[1], redis.exceptions.ResponseError)
    assert replies[2:] == [2, [b"2", None]], "a reply error in the middle leaves the rest in order"
    assert client.client_id() == before
