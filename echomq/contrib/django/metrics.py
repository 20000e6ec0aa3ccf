"""``GET /metrics``: Prometheus text for the people on call.

Every queue the dashboard knows (``ECHOMQ["QUEUES"]`` plus those found in
Valkey) through ``echomq.metrics.QueueCollector``, read live at each scrape,
plus the collectors named in ``ECHOMQ["METRICS_COLLECTORS"]`` (import paths;
the game adds its own). Mount it with one line:

    path("metrics", echomq.contrib.django.metrics.metrics),

Who may read it: whoever may read the queue dashboard (an active staff user
with ``echomq.view_queues``: the figures are the dashboard's), or a scraper
sending ``Authorization: Bearer <ECHOMQ["METRICS_TOKEN"]>`` (compared in
constant time; no token configured means the dashboard's readers only).
Anyone else gets 401 (403 when logged in), and nothing is read from Valkey
for them.
"""
from __future__ import annotations

import hmac

from django.http import HttpResponse
from django.utils.module_loading import import_string
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from echomq.metrics import QueueCollector, require

from . import dashboard, get_client, get_queue
from .models import VIEW


def _bearer_ok(request, token: str) -> bool:
    header = request.headers.get("Authorization", "")
    scheme, _, given = header.partition(" ")
    return bool(token) and scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


def registry():
    """A fresh registry with the queue collector and the configured extras."""
    pc = require()
    reg = pc.CollectorRegistry(auto_describe=False)
    client = get_client()
    # get_queue: a queue configured with shards is a ShardedQueue, reported as one (as the dashboard shows it)
    reg.register(QueueCollector(lambda: [get_queue(n) for n in dashboard.all_queues(client)]))
    for path in dashboard.settings_conf().get("METRICS_COLLECTORS", []):
        reg.register(import_string(path)())
    return reg


@never_cache
@require_GET
def metrics(request):
    user = request.user
    reader = user.is_authenticated and user.is_active and user.is_staff and user.has_perm(VIEW)
    if not reader and not _bearer_ok(request, dashboard.settings_conf().get("METRICS_TOKEN") or ""):
        status = 403 if user.is_authenticated else 401
        resp = HttpResponse(f"The metrics need the {VIEW!r} permission or a bearer token.\n", status=status,
                            content_type="text/plain; charset=utf-8")
        if status == 401:
            resp["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return resp
    pc = require()
    return HttpResponse(pc.generate_latest(registry()), content_type=pc.CONTENT_TYPE_LATEST)
