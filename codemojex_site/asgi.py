"""ASGI entry point of the live process: the pages' streams under ``/live/``
(``games.push``), and ``/healthz`` and ``/readyz`` for the balancer.

    gunicorn -c python:codemojex_site.gunicorn_conf codemojex_site.asgi -k uvicorn_worker.UvicornWorker

The pages themselves are served by the WSGI process (``codemojex_site.wsgi``);
a proxy sends ``/live/`` here (docs/deploy.md). Every other path is a 404.

``/readyz`` is the web's check (PostgreSQL and Valkey, ``codemojex_site.health``)
plus this process's own: the event reader is reading (``"events": "ok"``),
503 while it cannot (the streams are refused then, and the pages poll).
"""
import asyncio
import json
import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "codemojex_site.settings")
django.setup(set_prefix=False)

from games.push import asgi as live  # noqa: E402  (after setup: it imports models)
from games.push.hub import get_hub  # noqa: E402

from . import health  # noqa: E402


async def _json(send, status: int, body: dict) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"cache-control", b"no-store"),
                            (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})


async def _readyz(send) -> None:
    hub = get_hub()
    await hub.start()
    checks = await asyncio.get_running_loop().run_in_executor(None, health.readiness)
    checks["events"] = "ok" if hub.state == "up" else "unreachable" if hub.state == "down" else "starting"
    down = [name for name, state in checks.items() if state != "ok"]
    if down:
        await _json(send, 503, {"status": "unavailable", "down": down, "checks": checks})
    else:
        await _json(send, 200, {"status": "ready", "checks": checks})


async def application(scope, receive, send):
    if scope["type"] == "http" and scope.get("method") in ("GET", "HEAD"):
        if scope.get("path") == "/healthz":
            return await _json(send, 200, {"status": "alive"})
        if scope.get("path") == "/readyz":
            return await _readyz(send)
    return await live.application(scope, receive, send)
