"""The public watch page of a round (no log-in) and its poll.

Both answer from ``games.watch.view``, the one statement of what a watcher
may see; the poll sends that view as JSON with its HTML fragment
(``games.watch.fragment``), so the page replaces its live part whole. A
later push (the EchoMQ event stream) can send the same JSON: the page's
script applies a poll's answer and a pushed one alike. The view's
``version`` is the poll's ETag: an unchanged round answers 304.
"""
from __future__ import annotations

from django.http import Http404, HttpResponseNotModified, JsonResponse
from django.shortcuts import render
from django.utils.safestring import mark_safe
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from .. import push, watch


def _view_or_404(round_id: str) -> dict:
    data = watch.view(round_id)
    if data is None:
        raise Http404("No such round.")
    return data


@require_safe
def watch_page(request, round_id: str):
    """The round as anyone may watch it: board, guesses per minute, time
    left, and the reveal once it is settled."""
    data = _view_or_404(round_id)
    live = data["round"]["status"] in ("open", "revealing")  # a closed round's view hardly changes
    return render(request, "games/watch.html", {"v": data, "now_html": mark_safe(watch.fragment(data)),
                                                "stream": push.stream_url("watch", round_id) if live else ""})


def etag(data: dict) -> str:
    return f'W/"{data["version"]}"'


@never_cache
@require_safe
def watch_live(request, round_id: str):
    """The watch page's poll: the view as JSON, with ``html``, the page's
    live part drawn from it; 304 when the view's version is the one the
    watcher has (``If-None-Match``)."""
    data = watch.view(round_id)
    if data is None:
        return JsonResponse({"error": "That round does not exist."}, status=404)
    tag = etag(data)
    if request.headers.get("If-None-Match") == tag:
        response = HttpResponseNotModified()
    else:
        response = JsonResponse({**data, "html": watch.fragment(data)}, json_dumps_params={"ensure_ascii": False})
    response["ETag"] = tag
    return response
