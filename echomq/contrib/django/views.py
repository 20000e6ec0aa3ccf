"""The queue pages of the admin: overview, one queue, one job, and the POST
actions (pause/resume, requeue/remove). Staff only, through
``admin.site.admin_view`` (login redirect, CSRF, never cached).

Bad input answers a readable 4xx page in the admin's look, never a 500:
an ill-formed queue name, job id or limit is 400, an unknown queue or job
404, an action the job's state does not allow 409, Valkey down 503.
"""
from __future__ import annotations

import functools
import logging

import echomq
import redis
from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from echomq import Queue, keyspace
from echomq.errors import InvalidName, JobNotFound, KindError, WrongState

from . import dashboard, get_client, get_queue

log = logging.getLogger(__name__)

MAX_LIMIT = 1000
MAX_BULK = 1000


class PageError(Exception):
    """Answer with an error page: ``status``, a short title and a sentence."""

    def __init__(self, status: int, title: str, message: str, queue: str | None = None):
        super().__init__(message)
        self.status, self.title, self.message, self.queue = status, title, message, queue


def _context(request, title: str, **extra) -> dict:
    return {**admin.site.each_context(request), "title": title, **extra}


def _render(request, template: str, context: dict, status: int = 200):
    return TemplateResponse(request, template, context, status=status)


def _error_page(request, err: PageError):
    return _render(request, "echomq/admin/error.html",
                   _context(request, err.title, message=err.message, status=err.status,
                            queue_name=err.queue), status=err.status)


def staff_page(methods):
    """Staff only (admin login otherwise), CSRF-protected, never cached,
    only ``methods``; PageError and Valkey outages become error pages."""
    def wrap(view):
        @functools.wraps(view)
        def inner(request, *args, **kwargs):
            try:
                return view(request, *args, **kwargs)
            except PageError as err:
                return _error_page(request, err)
            except echomq.UNAVAILABLE as exc:
                log.warning("queue dashboard: Valkey unreachable: %s", exc)
                return _error_page(request, PageError(
                    503, "Valkey unreachable",
                    f"The queue server did not answer ({exc.__class__.__name__}). "
                    "The pages read everything live from Valkey; try again when it is back."))
        return admin.site.admin_view(require_http_methods(methods)(inner))
    return wrap


# -- input -----------------------------------------------------------------
def _queue(name: str, *, must_exist: bool = True) -> Queue:
    try:
        queue = get_queue(name)  # a ShardedQueue when ECHOMQ["QUEUES"] gives it shards
    except InvalidName:
        raise PageError(400, "Ill-formed queue name",
                        f"{name!r} is not a queue name: names are 1 to 128 of A-Z a-z 0-9 . _ - "
                        "and not 'emq'.") from None
    if must_exist and not dashboard.queue_exists(queue):
        raise PageError(404, "Unknown queue",
                        f"There is no queue {name!r}: it is not configured in ECHOMQ['QUEUES'] "
                        "and has no keys in Valkey.")
    return queue


def _job_id(job_id: str, queue: str) -> str:
    try:
        return keyspace.check_job_id(job_id)
    except KindError:
        raise PageError(400, "Not a job id",
                        f"{job_id!r} is a branded id but not a JOB id; queues hold JOB ids only.",
                        queue) from None
    except InvalidName:
        raise PageError(400, "Ill-formed job id",
                        f"{job_id!r} is not a job id: a job id is JOB followed by 11 base62 "
                        "characters, 14 in all.", queue) from None


def _limit(request, default: int = 50) -> int:
    raw = request.GET.get("limit")
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_LIMIT:
        raise PageError(400, "Bad limit", f"limit must be a whole number from 1 to {MAX_LIMIT}, "
                                          f"got {raw!r}.")
    return value


def _refresh(request) -> int | None:
    raw = request.GET.get("refresh")
    if raw and raw.isdigit() and 2 <= int(raw) <= 3600:
        return int(raw)
    return None


def _back(request, fallback: str):
    """Redirect to ``next`` when it is a safe local URL, else ``fallback``."""
    nxt = request.POST.get("next") or request.GET.get("next")
    if nxt and url_has_allowed_host_and_scheme(nxt, allowed_hosts={request.get_host()},
                                               require_https=request.is_secure()):
        return HttpResponseRedirect(nxt)
    return HttpResponseRedirect(fallback)


def queue_url(name: str) -> str:
    return reverse("echomq:queue", args=[name])


def job_url(name: str, job_id: str) -> str:
    return reverse("echomq:job", args=[name, job_id])


# -- pages -----------------------------------------------------------------
@staff_page(["GET", "HEAD"])
def overview(request):
    client = get_client()
    rows = [dashboard.overview_row(get_queue(name)) for name in dashboard.all_queues(client)]
    totals = {k: sum(r["counts"][k] for r in rows)
              for k in ("pending", "active", "scheduled", "dead", "completed", "dead_total")}
    return _render(request, "echomq/admin/overview.html", _context(
        request, "Queues", queues=rows, totals=totals, refresh=_refresh(request),
        configured=dashboard.configured_queues()))


@staff_page(["GET", "HEAD"])
def queue_detail(request, queue):
    q = _queue(queue)
    data = dashboard.queue_page(q, limit=_limit(request))
    return _render(request, "echomq/admin/queue.html", _context(
        request, f"Queue {q.name}", queue_name=q.name, refresh=_refresh(request), **data))


@staff_page(["GET", "HEAD"])
def job_detail(request, queue, job_id):
    q = _queue(queue)
    jid = _job_id(job_id, q.name)
    data = dashboard.job_page(q, jid)
    if data is None:
        raise PageError(404, "No such job",
                        f"Queue {q.name!r} has no job {jid}: it completed, was removed, or "
                        "never existed (completed jobs leave no row).", q.name)
    return _render(request, "echomq/admin/job.html", _context(
        request, f"Job {jid}", queue_name=q.name, job=data))


@staff_page(["GET", "HEAD"])
def find_job(request, queue):
    """The queue page's "go to job" box: a GET form, so a typo is a 400/404
    page rather than a broken URL."""
    q = _queue(queue)
    jid = _job_id((request.GET.get("id") or "").strip(), q.name)
    return HttpResponseRedirect(job_url(q.name, jid))


# -- actions (POST) ----------------------------------------------------------
@staff_page(["POST"])
def pause(request, queue):
    q = _queue(queue)
    q.pause()
    messages.success(request, f"Queue {q.name} paused: claims hand out nothing until resumed.")
    return _back(request, queue_url(q.name))


@staff_page(["POST"])
def resume(request, queue):
    q = _queue(queue)
    q.resume()
    messages.success(request, f"Queue {q.name} resumed.")
    return _back(request, queue_url(q.name))


def _requeue(q: Queue, jid: str) -> None:
    try:
        q.requeue_dead(jid)
    except JobNotFound:
        raise PageError(404, "No such job", f"Queue {q.name!r} has no job {jid} to requeue.",
                        q.name) from None
    except WrongState:
        state = (q.job(jid) or {}).get("state", "gone")
        raise PageError(409, "Not a dead job",
                        f"Job {jid} is {state}, not dead: only dead letters can be requeued.",
                        q.name) from None


@staff_page(["POST"])
def requeue(request, queue, job_id):
    q = _queue(queue)
    jid = _job_id(job_id, q.name)
    _requeue(q, jid)
    messages.success(request, f"Job {jid} requeued with a fresh set of attempts.")
    return _back(request, queue_url(q.name))


@staff_page(["POST"])
def remove(request, queue, job_id):
    q = _queue(queue)
    jid = _job_id(job_id, q.name)
    was = q.remove(jid)
    if was is None:
        raise PageError(404, "No such job", f"Queue {q.name!r} has no job {jid} to remove.",
                        q.name)
    messages.success(request, f"Job {jid} removed (it was {was}).")
    # The job page of a removed job would be a 404: never go back there.
    nxt = request.POST.get("next", "")
    if nxt.rstrip("/").endswith(jid):
        return HttpResponseRedirect(queue_url(q.name))
    return _back(request, queue_url(q.name))


@staff_page(["POST"])
def dead_bulk(request, queue):
    """Requeue or remove the ticked dead letters. Every id is checked before
    anything changes; jobs that left the dead set meanwhile are reported,
    not fatal (another admin or a worker may have got there first)."""
    q = _queue(queue)
    action = request.POST.get("action")
    if action not in ("requeue", "remove"):
        raise PageError(400, "Unknown action", f"Choose requeue or remove, not {action!r}.", q.name)
    raw = request.POST.getlist("ids")
    if not raw:
        messages.warning(request, "No jobs were selected, so nothing changed.")
        return _back(request, queue_url(q.name))
    if len(raw) > MAX_BULK:
        raise PageError(400, "Too many jobs", f"At most {MAX_BULK} jobs at once.", q.name)
    jids = list(dict.fromkeys(_job_id(j, q.name) for j in raw))
    done, skipped = [], []
    for jid in jids:
        if action == "requeue":
            try:
                q.requeue_dead(jid)
            except (JobNotFound, WrongState):
                skipped.append(jid)
                continue
        else:
            row = q.job(jid)
            if row is None or row.get("state") != "dead" or q.remove(jid) is None:
                skipped.append(jid)
                continue
        done.append(jid)
    verb = "requeued" if action == "requeue" else "removed"
    if done:
        messages.success(request, f"{len(done)} dead job{'s' * (len(done) != 1)} {verb}.")
    if skipped:
        messages.warning(request, f"{len(skipped)} job{'s' * (len(skipped) != 1)} no longer dead "
                                  f"or gone, left as they were: {', '.join(skipped[:10])}"
                                  f"{' …' if len(skipped) > 10 else ''}")
    return _back(request, queue_url(q.name))
