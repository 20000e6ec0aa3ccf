"""Django integration for EchoMQ: one shared client per process, configured by
``settings.ECHOMQ`` (``URL``; or ``EMBEDDED_DIR`` for the embedded server),
and the queue pages in the admin.

The queue pages (staff only) are mounted with
``path("admin/queues/", include("echomq.contrib.django.urls"))`` before
``admin.site.urls``. They list ``ECHOMQ["QUEUES"]`` (optional) plus every
queue found by a SCAN for ``emq:{q}:meta|pending|active|schedule|dead|lanes``
keys; ``ECHOMQ["DISCOVER_QUEUES"] = False`` turns the SCAN off.

Also here: ``tasks`` (EchoMQ as the backend of Django's ``TASKS``, worker
``manage.py run_tasks``) and ``metrics`` (the ``/metrics`` view)."""
from __future__ import annotations

import threading

_lock = threading.Lock()
_client = None
_url = None


def valkey_url() -> str:
    """The configured VALKEY_URL, or the embedded server's (started if needed)."""
    global _url
    if _url is None:
        from django.conf import settings

        conf = getattr(settings, "ECHOMQ", {})
        if conf.get("URL"):
            _url = conf["URL"]
        else:
            from echomq import embedded

            _url = embedded.ensure(conf.get("EMBEDDED_DIR") or "var/valkey")
    return _url


def get_client():
    """The process's redis-py client (thread-safe connection pool)."""
    global _client
    with _lock:
        if _client is None:
            import redis

            _client = redis.Redis.from_url(valkey_url(), socket_timeout=10,
                                           socket_connect_timeout=5, health_check_interval=30)
        return _client


def reset_client(url: str | None = None) -> None:
    """Forget the cached client (tests point the process at another server)."""
    global _client, _url
    with _lock:
        _client, _url = None, url


def get_queue(name: str):
    from echomq import Queue

    return Queue(name, get_client())
