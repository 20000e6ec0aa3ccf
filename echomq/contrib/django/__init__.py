"""Django integration for EchoMQ: one shared client per process, configured by
``settings.ECHOMQ`` (``URL``; or ``EMBEDDED_DIR`` for the embedded server),
and the queue pages in the admin.

The queue pages (staff only) are mounted with
``path("admin/queues/", include("echomq.contrib.django.urls"))`` before
``admin.site.urls``. They list ``ECHOMQ["QUEUES"]`` (optional) plus every
queue found by a SCAN for ``emq:{q}:meta|pending|active|schedule|dead|lanes``
keys; ``ECHOMQ["DISCOVER_QUEUES"] = False`` turns the SCAN off.

Also here: ``tasks`` (EchoMQ as the backend of Django's ``TASKS``, worker
``manage.py run_tasks``) and ``metrics`` (the ``/metrics`` view).

On a cluster: ``ECHOMQ["CLUSTER"] = True`` makes the shared client a
``RedisCluster`` (``URL`` names any node); with no ``URL``,
``ECHOMQ["CLUSTER_NODES"] = 3`` starts a local embedded cluster of 3 primaries
and 3 replicas instead of the single server. ``ECHOMQ["QUEUES"]`` may map a
queue name to options; ``{"cm": {"shards": 6}}`` makes ``get_queue("cm")`` an
:class:`echomq.ShardedQueue` of 6 shards."""
from __future__ import annotations

import threading
from pathlib import Path

_lock = threading.Lock()
_client = None
_url = None


_cluster = None


def _conf() -> dict:
    from django.conf import settings

    return getattr(settings, "ECHOMQ", {}) or {}


def embedded_cluster_dir(conf: dict) -> str:
    return str(Path(conf.get("EMBEDDED_DIR") or "var/valkey") / "cluster")


def is_cluster() -> bool:
    """Whether the shared client is a RedisCluster (set, or the embedded cluster)."""
    if _cluster is not None:
        return _cluster
    conf = _conf()
    return bool(conf.get("CLUSTER") or (not conf.get("URL") and conf.get("CLUSTER_NODES")))


def valkey_url() -> str:
    """The configured VALKEY_URL, or the embedded server's or cluster's (started if needed)."""
    global _url
    if _url is None:
        conf = _conf()
        if conf.get("URL"):
            _url = conf["URL"]
        else:
            from echomq import embedded

            if conf.get("CLUSTER_NODES"):
                _url = embedded.ensure_cluster(embedded_cluster_dir(conf), primaries=int(conf["CLUSTER_NODES"]))
            else:
                _url = embedded.ensure(conf.get("EMBEDDED_DIR") or "var/valkey")
    return _url


def retry_policy(cluster: bool = False):
    """Retries on a lost connection only, never on a timeout: redis-py's
    default retries ten times on timeouts too, so a hung server cost each
    call eleven timeouts in a row. One server: one retry (an idle connection
    the server closed). A cluster: redis-py's ten, backing off from 10 ms to
    1 s, which carries a call across a failover while a replica takes over."""
    import redis
    from redis.backoff import ExponentialWithJitterBackoff
    from redis.retry import Retry

    retries, cap = (10, 1.0) if cluster else (1, 0.1)
    return Retry(ExponentialWithJitterBackoff(base=0.01, cap=cap), retries,
                 supported_errors=(redis.exceptions.ConnectionError,))


def make_client(url: str, cluster: bool):
    """A client as the project makes them: ``RedisCluster`` on a cluster.
    ``ECHOMQ["SOCKET_TIMEOUT"]`` (seconds, default 3) bounds how long a call
    waits on a server that does not answer; it must exceed the consumers'
    ``beat_ms``, their longest blocking wait. After one such timeout the
    process stops waiting on that server for a few seconds (``failfast``)."""
    from echomq.client import Client

    from .failfast import connection_class

    timeout = float(_conf().get("SOCKET_TIMEOUT", 3))
    common = dict(socket_timeout=timeout, socket_connect_timeout=min(timeout, 2), health_check_interval=30,
                  retry=retry_policy(cluster), connection_class=connection_class(url))
    if cluster:
        from redis.cluster import RedisCluster

        return RedisCluster.from_url(url, **common)
    return Client.from_url(url, **common)


def get_client():
    """The process's redis-py client (thread-safe connection pool)."""
    global _client
    with _lock:
        if _client is None:
            _client = make_client(valkey_url(), is_cluster())
        return _client


def reset_client(url: str | None = None, *, cluster: bool | None = None) -> None:
    """Forget the cached client (tests point the process at another server;
    ``cluster`` overrides the settings' CLUSTER flag until the next reset)."""
    global _client, _url, _cluster
    with _lock:
        _client, _url, _cluster = None, url, cluster
        _queues.clear()


def queue_options(name: str) -> dict:
    queues = _conf().get("QUEUES") or {}
    opts = queues.get(name) if isinstance(queues, dict) else None
    return opts if isinstance(opts, dict) else {}


_queues: dict[tuple, object] = {}


def get_queue(name: str):
    """The queue ``name``: a ShardedQueue when ECHOMQ["QUEUES"][name]["shards"] > 1.
    Made once per client and layout (a queue is only names and the client;
    every guess POST asks for one). A ShardedQueue also remembers which
    shard each job it claimed lives on; everything in the process that
    asks for the name shares that memory, as one consumer's threads do."""
    client = get_client()
    shards = int(queue_options(name).get("shards", 1))
    key = (name, shards, id(client))  # the cached queue holds the client: its id is not reused
    queue = _queues.get(key)
    if queue is None:
        from echomq import Queue, ShardedQueue

        queue = ShardedQueue(name, client, shards=shards) if shards > 1 else Queue(name, client)
        queue = _queues.setdefault(key, queue)
    return queue
