"""The queue pages of the admin: overview (with search), one queue, one
lane, one job (with its history, progress and flow), the live tail of a
queue's events, and the actions (pause/resume, requeue/remove).

Who may do what is two named permissions (see :mod:`.models`): every page
needs ``echomq.view_queues``; every action, and the confirmation page that
leads to it, needs ``echomq.operate_queues`` too. Staff without them get a
403 page and nothing changes. Requeue and remove ask first on a page that
says what will happen (in the application's words when a resolver is
registered for the queue, see :mod:`.resolvers`); every action done is
recorded in the admin log (:mod:`.audit`).

Bad input answers a readable 4xx page in the admin's look, never a 500:
an ill-formed queue name, job id or limit is 400, an unknown queue or job
404, an action the job's state does not allow 409, Valkey down 503.
"""
from __future__ import annotations

import functools
import logging

import echomq
from django.contrib import admin, messages
from django.http import HttpResponseRedirect, JsonResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods

from echomq import Queue, ids, keyspace
from echomq import events as emq_events
from echomq.errors import ArgumentError, EventsLost, InvalidName, JobNotFound, KindError, WrongState

from . import audit, dashboard, get_client, get_queue, resolvers
from .models import OPERATE, VIEW

log = logging.getLogger(__name__)

MAX_LIMIT = 1000
MAX_BULK = 1000
MAX_SEARCH = 64
MAX_DESCRIBED = 100  # jobs a bulk confirmation page asks the resolver about


class PageError(Exception):
    """Answer with an error page: ``status``, a short title and a sentence."""

    def __init__(self, status: int, title: str, message: str, queue: str | None = None):
        super().__init__(message)
        self.status, self.title, self.message, self.queue = status, title, message, queue


def _context(request, title: str, **extra) -> dict:
    return {**admin.site.each_context(request), "title": title,
            "can_operate": request.user.has_perm(OPERATE), **extra}


def _render(request, template: str, context: dict, status: int = 200):
    return TemplateResponse(request, template, context, status=status)


def _error_page(request, err: PageError):
    return _render(request, "echomq/admin/error.html",
                   _context(request, err.title, message=err.message, status=err.status,
                            queue_name=err.queue), status=err.status)


def _require(request, perm: str, what: str) -> None:
    if not request.user.has_perm(perm):
        raise PageError(403, "Not allowed",
                        f"{what} needs the {perm!r} permission, which your account does not have. "
                        "Nothing was changed.")


def staff_page(methods, *, operate: bool = False):
    """Staff only (admin login otherwise), CSRF-protected, never cached,
    only ``methods``. Every page needs the view permission; POSTs and
    ``operate`` pages need the operate permission too. PageError and Valkey
    outages become error pages."""
    def wrap(view):
        @functools.wraps(view)
        def inner(request, *args, **kwargs):
            try:
                _require(request, VIEW, "Reading the queue dashboard")
                if operate or request.method == "POST":
                    _require(request, OPERATE, "Changing a queue")
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


def _job_id(job_id: str, queue: str | None) -> str:
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


def _lane(lane: str, queue: str) -> str:
    try:
        return keyspace.check_lane(lane)
    except InvalidName:
        raise PageError(400, "Ill-formed lane",
                        f"{lane!r} is not a lane: lanes are branded ids, 3 letters and 11 base62 "
                        "characters.", queue) from None


def _number(request, name: str, default: int, maximum: int) -> int:
    raw = request.GET.get(name)
    if raw in (None, ""):
        return default
    value = int(raw) if raw.isascii() and raw.isdigit() else 0
    if not 1 <= value <= maximum:
        raise PageError(400, f"Bad {name}", f"{name} must be a whole number from 1 to {maximum}, "
                                            f"got {raw!r}.")
    return value


def _limit(request, default: int = 50) -> int:
    return _number(request, "limit", default, MAX_LIMIT)


def _refresh(request) -> int | None:
    """Seconds between auto-refreshes, 2 to 3600; absent means none."""
    raw = request.GET.get("refresh")
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit() and 2 <= int(raw) <= 3600):
        raise PageError(400, "Bad refresh", f"refresh must be a whole number of seconds from 2 to 3600, "
                                            f"got {raw!r}.")
    return int(raw)


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


def _about(queue: str, job_id: str, payload: bytes | None, user) -> resolvers.About | None:
    """The registered resolver's account of the job; a resolver that fails
    costs its panel, never the page."""
    resolver = resolvers.resolver_for(queue)
    if resolver is None:
        return None
    try:
        return resolver.describe(job_id, payload, user)
    except Exception:
        log.exception("queue dashboard: resolver for %s failed on %s", queue, job_id)
        return None


def _lane_labels(queue: str, lanes, user) -> dict[str, str]:
    """The resolver's names for ``lanes`` ({} without one, or when it
    fails: the ids still show)."""
    resolver = resolvers.resolver_for(queue)
    lanes = sorted({lane for lane in lanes if lane})
    if resolver is None or not lanes:
        return {}
    try:
        return dict(resolver.lane_labels(lanes, user) or {})
    except Exception:
        log.exception("queue dashboard: lane labels for %s failed", queue)
        return {}


def _label_lanes(queue: str, user, *groups) -> None:
    """Put each row's lane name (``lane_label``) next to its ``lane`` id."""
    rows = [row for group in groups for row in group]
    labels = _lane_labels(queue, [row.get("lane") for row in rows], user)
    for row in rows:
        row["lane_label"] = labels.get(row.get("lane"), "")


# -- pages -----------------------------------------------------------------
@staff_page(["GET", "HEAD"])
def overview(request):
    client = get_client()
    names = dashboard.all_queues(client)
    term = (request.GET.get("q") or "").strip()
    if term:
        return _search(request, client, names, term)
    rows = [dashboard.overview_row(get_queue(name)) for name in names]
    totals = {k: sum(r["counts"][k] for r in rows)
              for k in ("pending", "active", "scheduled", "dead", "completed", "dead_total")}
    return _render(request, "echomq/admin/overview.html", _context(
        request, "Queues", queues=rows, totals=totals, refresh=_refresh(request),
        configured=dashboard.configured_queues()))


def _search(request, client, names: list[str], term: str):
    """Find jobs by JOB id (any queue, finished ones through the resolvers),
    or by an application id or name (GES, PLR, a username) through them."""
    if len(term) > MAX_SEARCH or any(ord(c) < 32 for c in term):
        raise PageError(400, "Bad search", f"Search for a JOB id, or an id or name the application "
                                           f"knows, at most {MAX_SEARCH} characters.")
    found: dict[tuple[str, str], dict] = {}
    if ids.is_valid(term) and term.startswith("JOB"):
        for name in names:
            record = Queue(name, client).find(term)
            if record is not None:
                found[(name, term)] = {"queue": name, "job_id": term, "state": record["state"], "label": ""}
    for name, resolver in resolvers.registered().items():
        try:
            hits = resolver.search(term, request.user)
        except Exception:
            log.exception("queue dashboard: resolver search for %s failed", name)
            continue
        for hit in hits:
            row = found.setdefault((hit.queue, hit.job_id), {"queue": hit.queue, "job_id": hit.job_id,
                                                             "state": None, "label": ""})
            row["label"] = hit.label
    for row in found.values():
        if row["state"] is None:
            record = Queue(row["queue"], client).find(row["job_id"])
            row["state"] = record["state"] if record else "finished (no row)"
    return _render(request, "echomq/admin/search.html", _context(
        request, f"Search: {term}", term=term, results=list(found.values())))


@staff_page(["GET", "HEAD"])
def queue_detail(request, queue):
    q = _queue(queue)
    data = dashboard.queue_page(q, limit=_limit(request))
    _label_lanes(q.name, request.user, data["lanes"], data["active"], data["completed"])
    return _render(request, "echomq/admin/queue.html", _context(
        request, f"Queue {q.name}", queue_name=q.name, refresh=_refresh(request), **data))


@staff_page(["GET", "HEAD"])
def lane_detail(request, queue, lane):
    q = _queue(queue)
    name = _lane(lane, q.name)
    page = _number(request, "page", 1, 1_000_000)
    data = dashboard.lane_page(q, name, page)
    if data is None:
        raise PageError(404, "Unknown lane", f"Queue {q.name!r} has no lane {name}: no job waits on "
                                             "it and it has no settings.", q.name)
    if page > data["pages"]:
        raise PageError(404, "No such page", f"Lane {name} has {data['pages']} page(s) of waiting jobs.",
                        q.name)
    label = _lane_labels(q.name, [name], request.user).get(name, "")
    return _render(request, "echomq/admin/lane.html", _context(
        request, f"Lane {label or name}", queue_name=q.name, lane_label=label, **data))


@staff_page(["GET", "HEAD"])
def job_detail(request, queue, job_id):
    q = _queue(queue)
    jid = _job_id(job_id, q.name)
    data = dashboard.job_page(q, jid)
    if data is None:
        record = q.find(jid)  # a completed job's record, while the queue retains it
        about = _about(q.name, jid, None, request.user)
        if about is None and record is None:
            raise PageError(404, "No such job",
                            f"Queue {q.name!r} has no job {jid}: it was removed or cancelled, completed "
                            "longer ago than the queue keeps records, or never existed.", q.name)
        now = q.server_time_ms()
        return _render(request, "echomq/admin/job_gone.html", _context(
            request, f"Job {jid}", queue_name=q.name, job_id=jid, about=about,
            record=dashboard.completed_record(record, now) if record else None,
            minted=dashboard.ms_to_dt(ids.minted_at_ms(jid)),
            job=dashboard.job_story(q, jid, None, now)))
    about = _about(q.name, jid, data["raw_payload"], request.user)
    if data.get("lane"):
        _label_lanes(q.name, request.user, [data["lane"]])
    return _render(request, "echomq/admin/job.html", _context(
        request, f"Job {jid}", queue_name=q.name, job=data, about=about))


@staff_page(["GET", "HEAD"])
def events(request, queue):
    """The queue's events, newest first, filtered by type, lane and job; the
    page follows new ones live (``?after=<cursor>&format=json`` answers what
    came since, as JSON, for the page's script)."""
    q = _queue(queue)
    types = request.GET.getlist("type")
    unknown = [t for t in types if t not in emq_events.TYPES]
    if unknown:
        raise PageError(400, "Unknown event type", f"{unknown[0][:40]!r} is not an event type; the types are "
                                                   f"{', '.join(emq_events.TYPES)}.", q.name)
    lane = _lane(request.GET["lane"], q.name) if request.GET.get("lane") else None
    job = _job_id(request.GET["job"], q.name) if request.GET.get("job") else None
    limit = _number(request, "limit", dashboard.EVENT_PAGE, MAX_LIMIT)
    if request.GET.get("format") == "json":
        after = request.GET.get("after") or "$"
        try:
            data = dashboard.events_since(q, after, types=types, lane=lane, job=job, limit=limit)
        except EventsLost as exc:
            return JsonResponse({"error": str(exc), "cursor": None}, status=410)
        except ArgumentError:
            raise PageError(400, "Bad cursor", f"after must be a cursor this page gave, not {after[:80]!r}.",
                            q.name) from None
        for row in data["events"]:
            row["url"] = job_url(q.name, row["job"])
        return JsonResponse(data)
    data = dashboard.events_page(q, types=types, lane=lane, job=job, limit=limit)
    return _render(request, "echomq/admin/events.html", _context(
        request, f"Events of {q.name}", queue_name=q.name, **data))


@staff_page(["GET", "HEAD"])
def find_job(request, queue):
    """The queue page's "go to job" box: a GET form, so a typo is a 400/404
    page rather than a broken URL."""
    q = _queue(queue)
    jid = _job_id((request.GET.get("id") or "").strip(), q.name)
    return HttpResponseRedirect(job_url(q.name, jid))


# -- actions -----------------------------------------------------------------
@staff_page(["POST"])
def pause(request, queue):
    q = _queue(queue)
    q.pause()
    audit.record(request.user, q.name, None, "Paused the queue: claims hand out nothing until resumed.")
    messages.success(request, f"Queue {q.name} paused: claims hand out nothing until resumed.")
    return _back(request, queue_url(q.name))


@staff_page(["POST"])
def resume(request, queue):
    q = _queue(queue)
    q.resume()
    audit.record(request.user, q.name, None, "Resumed the queue.")
    messages.success(request, f"Queue {q.name} resumed.")
    return _back(request, queue_url(q.name))


@staff_page(["POST"])
def schedule_pause(request, queue, name):
    return _schedule_action(request, queue, name, pause=True)


@staff_page(["POST"])
def schedule_resume(request, queue, name):
    return _schedule_action(request, queue, name, pause=False)


def _schedule_action(request, queue, name, *, pause: bool):
    """Pause or resume one schedule (operate permission, POST only: see staff_page)."""
    q = _queue(queue)
    try:
        done = q.pause_schedule(name) if pause else q.resume_schedule(name)
    except InvalidName:
        raise PageError(400, "Ill-formed schedule name",
                        f"{name[:80]!r} is not a schedule name: 1 to 64 of A-Z a-z 0-9 . _ -.", q.name) from None
    except ArgumentError as exc:  # a stored definition with no tick left: resuming it would never fire
        raise PageError(400, "Cannot resume the schedule", f"{exc}; it stays paused. Replace or remove it.",
                        q.name) from None
    if not done:
        raise PageError(404, "No such schedule", f"Queue {q.name!r} has no schedule {name!r}; nothing changed.",
                        q.name)
    what = (f"Paused schedule {name!r}: it fires nothing until resumed." if pause
            else f"Resumed schedule {name!r}: it fires again from its next tick after now.")
    audit.record(request.user, q.name, None, what)
    messages.success(request, what)
    return _back(request, queue_url(q.name))


def _confirmed(request) -> bool:
    return request.method == "POST" and request.POST.get("confirm") == "yes"


def _confirm_page(request, q: Queue, action: str, jobs: list[dict], **extra):
    return _render(request, "echomq/admin/confirm.html", _context(
        request, f"{action.capitalize()} {'job ' + jobs[0]['id'] if len(jobs) == 1 else f'{len(jobs)} jobs'}?",
        queue_name=q.name, action=action, jobs=jobs, next=request.POST.get("next") or request.GET.get("next", ""),
        **extra))


def _job_for_action(q: Queue, jid: str, action: str) -> dict:
    row = q.job(jid)
    if row is None:
        raise PageError(404, "No such job", f"Queue {q.name!r} has no job {jid} to {action}.", q.name)
    return row


@staff_page(["GET", "HEAD", "POST"], operate=True)
def requeue(request, queue, job_id):
    q = _queue(queue)
    jid = _job_id(job_id, q.name)
    row = _job_for_action(q, jid, "requeue")
    if row.get("state") != "dead":
        raise PageError(409, "Not a dead job",
                        f"Job {jid} is {row.get('state')}, not dead: only dead letters can be requeued.",
                        q.name)
    if not _confirmed(request):
        about = _about(q.name, jid, row.get("payload"), request.user)
        return _confirm_page(request, q, "requeue", [{"id": jid, "state": "dead", "about": about,
                                                       "error": row.get("last_error")}])
    try:
        q.requeue_dead(jid)
    except (JobNotFound, WrongState) as exc:
        state = (q.job(jid) or {}).get("state", "gone")
        if state == "dead":  # still dead: another live job holds its unique key (the error names it)
            raise PageError(409, "The unique key is taken",
                            f"{str(exc).removeprefix('EMQSTATE ')}; nothing changed. Requeue it once that job "
                            "has ended, or remove it.", q.name) from None
        raise PageError(409, "Not a dead job",
                        f"Job {jid} is {state} now, not dead: someone got there first; nothing changed.",
                        q.name) from None
    audit.record(request.user, q.name, jid, "Requeued the dead job with a fresh set of attempts.")
    messages.success(request, f"Job {jid} requeued with a fresh set of attempts.")
    return _back(request, queue_url(q.name))


@staff_page(["GET", "HEAD", "POST"], operate=True)
def remove(request, queue, job_id):
    q = _queue(queue)
    jid = _job_id(job_id, q.name)
    row = _job_for_action(q, jid, "remove")
    about = _about(q.name, jid, row.get("payload"), request.user)
    options = {o.name: o for o in (about.remove_options if about else [])}
    if not _confirmed(request):
        return _confirm_page(request, q, "remove", [{"id": jid, "state": row.get("state"), "about": about,
                                                      "error": row.get("last_error")}],
                             options=[o for o in options.values()
                                      if not o.permission or request.user.has_perm(o.permission)])
    chosen = request.POST.get("option") or ""
    said = ""
    if chosen:
        option = options.get(chosen)
        if option is None:
            raise PageError(409, "Option gone", f"{chosen!r} is not offered for job {jid} any more; "
                                                "nothing changed. Open the job again.", q.name)
        if option.permission:
            _require(request, option.permission, option.label)
        said = option.run(request.user)
    was = q.remove(jid)
    if was is None and not chosen:
        raise PageError(404, "No such job", f"Queue {q.name!r} has no job {jid} to remove.", q.name)
    extra = said or (about.on_remove if about else "")
    audit.record(request.user, q.name, jid, f"Removed the job (it was {was or 'already gone'}). {extra}".strip())
    messages.success(request, f"Job {jid} removed (it was {was or 'already gone'}). {extra}".strip())
    # The job page of a removed job would be a 404: never go back there.
    nxt = request.POST.get("next", "")
    if nxt.rstrip("/").endswith(jid):
        return HttpResponseRedirect(queue_url(q.name))
    return _back(request, queue_url(q.name))


@staff_page(["GET", "HEAD", "POST"], operate=True)
def cancel(request, queue, job_id):
    """Stop a job: a waiting one is deleted at once; a running one is marked
    and its worker hears of it at its next heartbeat, its late result refused."""
    q = _queue(queue)
    jid = _job_id(job_id, q.name)
    row = _job_for_action(q, jid, "cancel")
    if row.get("state") == "dead":
        raise PageError(409, "A dead job", f"Job {jid} is dead: remove or requeue it instead.", q.name)
    about = _about(q.name, jid, row.get("payload"), request.user)
    if not _confirmed(request):
        return _confirm_page(request, q, "cancel", [{"id": jid, "state": row.get("state"), "about": about,
                                                      "error": row.get("last_error")}])
    try:
        outcome = q.cancel(jid)
    except JobNotFound:
        raise PageError(404, "No such job", f"Queue {q.name!r} has no job {jid} to cancel.", q.name) from None
    except WrongState:
        raise PageError(409, "A dead job", f"Job {jid} died meanwhile: remove or requeue it instead.",
                        q.name) from None
    if outcome == "cancelling":
        what = ("Cancelling the running job: its worker hears of it at its next heartbeat and its result "
                "will be refused.")
    else:
        what = "Cancelled the job: it was waiting and is gone."
    if about and about.on_remove:
        what += " " + about.on_remove
    audit.record(request.user, q.name, jid, what)
    messages.success(request, f"Job {jid}: {what}")
    if outcome == "cancelling":
        return HttpResponseRedirect(job_url(q.name, jid))
    return HttpResponseRedirect(queue_url(q.name))


@staff_page(["POST"])
def dead_bulk(request, queue):
    """Requeue or remove the ticked dead letters, after a confirmation page
    listing them. Every id is checked before anything changes; jobs that
    left the dead set meanwhile are reported, not fatal (another admin or a
    worker may have got there first)."""
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
    if not _confirmed(request):
        # What each job means to the application, for the first ones (a page, not a report).
        jobs = [{"id": j, "state": "dead", "about": _about(q.name, j, None, request.user) if i < MAX_DESCRIBED
                 else None} for i, j in enumerate(jids)]
        return _confirm_page(request, q, action, jobs, bulk=True)
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
        audit.record_many(request.user, q.name, done, f"{verb.capitalize()} the dead job (bulk, "
                                                      f"{len(done)} at once).")
        messages.success(request, f"{len(done)} dead job{'s' * (len(done) != 1)} {verb}.")
    if skipped:
        messages.warning(request, f"{len(skipped)} job{'s' * (len(skipped) != 1)} no longer dead, gone, "
                                  f"or with a unique key another live job holds, left as they were: "
                                  f"{', '.join(skipped[:10])}"
                                  f"{' …' if len(skipped) > 10 else ''}")
    return _back(request, queue_url(q.name))
