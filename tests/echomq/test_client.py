"""``echomq.client.Client``: single commands over the thread's own
connection, with redis-py's replies, errors and retries unchanged."""
from __future__ import annotations

import os
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


def test_a_forked_child_opens_its_own_connection(client):
    parent = client.client_id()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its connection's id, then leave without cleanup
        try:
            os.write(write, str(client.client_id()).encode())
        finally:
            os._exit(0)
    os.close(write)
    child = int(os.read(read, 64) or 0)
    os.close(read)
    os.waitpid(pid, 0)
    assert child and child != parent
    assert client.client_id() == parent, "the parent's connection is untouched"


def test_close_drops_the_threads_connection(client, valkey_server):
    before = client.client_id()
    client.close()
    ids = {int(c["id"]) for c in valkey_server.client().client_list()}
    assert before not in ids
