"""What the queue pages show, read live from Valkey, with no HTTP in it.

The views in :mod:`.views` turn requests into calls here; everything here
takes a redis-py client or a :class:`echomq.Queue` and returns plain data for
the templates, so it is easy to test and to reuse (a management command, a
JSON endpoint) without Django's request machinery.
"""
from __future__ import annotations

import json
import logging
import re
from datetime import datetime, timezone

from echomq import Queue, ids, keyspace
from echomq import events as emq_events
from echomq.errors import InvalidName
from echomq.sharded import ShardedQueue, shard_names

log = logging.getLogger(__name__)

# The keys whose presence makes a queue exist. ``meta`` outlives the jobs
# (it holds the running totals), so a queue that has ever completed or
# dead-lettered a job stays listed.
QUEUE_KEYS = ("meta", "pending", "active", "schedule", "dead", "lanes", "schedules")
_QUEUE_KEY = re.compile(
    rb"emq:\{(?P<q>[A-Za-z0-9._-]{1,128})\}:(?P<suffix>" + "|".join(QUEUE_KEYS).encode() + rb")"
)


# -- which queues ----------------------------------------------------------
def settings_conf() -> dict:
    from django.conf import settings

    return getattr(settings, "ECHOMQ", {}) or {}


def configured_queues(conf: dict | None = None) -> list[str]:
    """``ECHOMQ["QUEUES"]`` with ill-formed names dropped (and logged)."""
    conf = settings_conf() if conf is None else conf
    out = []
    for name in conf.get("QUEUES", ()) or ():
        try:
            out.append(keyspace.check_queue(name))
        except InvalidName:
            log.warning("ECHOMQ['QUEUES'] has an ill-formed queue name %r; ignored", name)
    return out


def discover_queues(client, *, count: int = 1000) -> list[str]:
    """Queue names found by SCANning for ``emq:{q}:<meta|pending|...>`` keys.

    One pass over the keyspace (SCAN, never KEYS), so it costs O(keys) but
    never blocks the server; the regex keeps job rows, lane keys and foreign
    keys that happen to match the glob out."""
    found = set()
    for key in client.scan_iter(match="emq:{*}:*", count=count):
        m = _QUEUE_KEY.fullmatch(key if isinstance(key, bytes) else key.encode())
        if m and m["q"] != b"emq":
            found.add(m["q"].decode())
    return sorted(found)


def shard_queue_names(conf: dict) -> set[str]:
    """The shard queues of the configured sharded queues (listed under their queue)."""
    queues = conf.get("QUEUES") or {}
    out = set()
    if isinstance(queues, dict):
        for name, opts in queues.items():
            shards = opts.get("shards", 1) if isinstance(opts, dict) else 1
            try:
                if int(shards) > 1:
                    out.update(shard_names(name, int(shards)))
            except (InvalidName, TypeError, ValueError):
                log.warning("ECHOMQ['QUEUES'][%r] has a bad shard count %r; ignored", name, shards)
    return out


def all_queues(client, conf: dict | None = None) -> list[str]:
    """Configured queues first (in their order), then any others discovered
    (but not the shards of a sharded queue: it is shown as one queue)."""
    conf = settings_conf() if conf is None else conf
    names = configured_queues(conf)
    if conf.get("DISCOVER_QUEUES", True):
        seen = set(names) | shard_queue_names(conf)
        names += [q for q in discover_queues(client) if q not in seen]
    return names


def queue_exists(queue: Queue, conf: dict | None = None) -> bool:
    """True when the queue is configured or has any of its keys in Valkey
    (one EXISTS over keys of one slot, so cheap and cluster-safe)."""
    if queue.name in configured_queues(conf):
        return True
    return queue.client.exists(*(queue.prefix + s for s in QUEUE_KEYS)) > 0


# -- time ------------------------------------------------------------------
def ms_to_dt(ms: int | None) -> datetime | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def relative(ms: int | None, now_ms: int) -> str:
    """``"in 12s"``, ``"3m 4s ago"``: a deadline or event against server time."""
    if ms is None:
        return ""
    delta = (ms - now_ms) // 1000
    span = _span(abs(delta))
    if delta == 0:
        return "now"
    return f"in {span}" if delta > 0 else f"{span} ago"


def _span(secs: int) -> str:
    if secs < 60:
        return f"{secs}s"
    if secs < 3600:
        return f"{secs // 60}m {secs % 60}s"
    if secs < 86400:
        return f"{secs // 3600}h {secs % 3600 // 60}m"
    return f"{secs // 86400}d {secs % 86400 // 3600}h"


def with_times(rows: list[dict], field: str, now_ms: int) -> list[dict]:
    """Add ``<field>_at`` (a datetime) and ``<field>_rel`` (words) to each row."""
    for row in rows:
        ms = row.get(field)
        row[field + "_at"] = ms_to_dt(ms)
        row[field + "_rel"] = relative(ms, now_ms)
        row["overdue"] = field == "lease_deadline" and ms is not None and ms < now_ms
    return rows


# -- payloads --------------------------------------------------------------
MAX_SHOWN = 64 * 1024
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def decode_payload(payload: bytes | None, *, max_shown: int = MAX_SHOWN) -> dict:
    """How to show a payload: pretty JSON when it parses, else UTF-8 text,
    else a hex dump. Text with control characters is shown as hex, since it
    is not meant to be read as text. Very large payloads are cut at
    ``max_shown`` bytes (the size says so)."""
    payload = payload or b""
    out = {"size": len(payload), "truncated": len(payload) > max_shown}
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and not _CONTROL.search(text):
        try:
            value = json.loads(text)
        except ValueError:
            pass
        else:
            pretty = json.dumps(value, indent=2, ensure_ascii=False)
            return {**out, "kind": "json", "text": _cut(pretty, max_shown),
                    "truncated": len(pretty) > max_shown}
        return {**out, "kind": "text", "text": _cut(text, max_shown)}
    return {**out, "kind": "hex", "text": hexdump(payload[:max_shown])}


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "\n…"


def hexdump(data: bytes, width: int = 16) -> str:
    """``00000000  68 69 ...  |hi..|`` lines, like ``xxd``/``hexdump -C``."""
    lines = []
    for off in range(0, len(data), width):
        chunk = data[off:off + width]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{off:08x}  {hexes:<{width * 3 - 1}}  |{text}|")
    return "\n".join(lines)


# -- the chart -------------------------------------------------------------
def chart(minutes: list[dict], *, width: int = 600, height: int = 120, pad: int = 16,
          top: int = 14) -> dict:
    """Geometry for an inline SVG bar chart of ``Queue.per_minute()``:
    one slot per minute, completed stacked under dead-lettered; ``pad``
    pixels below the axis for labels and ``top`` above the tallest bar."""
    n = max(len(minutes), 1)
    slot = width / n
    base = height - pad
    peak = max((m["completed"] + m["dead"] for m in minutes), default=0)
    scale = (base - top) / peak if peak else 0
    bars = []
    for i, m in enumerate(minutes):
        hc, hd = m["completed"] * scale, m["dead"] * scale
        bars.append({
            "x": round(i * slot + 0.5, 2), "w": round(max(slot - 1, 1), 2),
            "yc": round(base - hc, 2), "hc": round(hc, 2),
            "yd": round(base - hc - hd, 2), "hd": round(hd, 2),
            "completed": m["completed"], "dead": m["dead"],
            "at": ms_to_dt(m["minute"] * 60_000),
            "ago": len(minutes) - 1 - i,
        })
    return {
        "width": width, "height": height, "axis_y": base + 0.5, "label_y": height - 3,
        "peak": peak, "bars": bars,
        "completed": sum(m["completed"] for m in minutes),
        "dead": sum(m["dead"] for m in minutes),
        "minutes": len(minutes),
    }


# -- one queue -------------------------------------------------------------
def overview_row(queue: Queue, minutes: int = 60) -> dict:
    counts = queue.counts()
    per_min = queue.per_minute(minutes)
    return {"name": queue.name, "counts": counts,
            "chart": chart(per_min, width=180, height=28, pad=2, top=0)}


def queue_page(queue: Queue, *, limit: int = 50, lanes: int = 10, minutes: int = 60) -> dict:
    """Everything the per-queue page shows, read now."""
    now = queue.server_time_ms()
    counts = queue.counts()
    return {
        "now_ms": now,
        "now": ms_to_dt(now),
        "counts": counts,
        "chart": chart(queue.per_minute(minutes)),
        "lanes": queue.lanes.deepest(lanes) if counts["lanes"] else [],
        "active": with_times(queue.active_jobs(limit), "lease_deadline", now),
        "scheduled": with_times(queue.scheduled_jobs(limit), "run_at", now),
        "dead": with_times(queue.dead_jobs(limit), "died", now),
        "pending": queue.pending_ids(limit),
        "completed": recent_completed(queue, min(limit, 50)),
        "limit": limit,
        "shards": shard_rows(queue),
        "schedules": schedule_rows(queue, now),
        "rate": queue.rate_limit(),
    }


def schedule_rows(queue, now_ms: int) -> list[dict]:
    """The queue's schedules with their next and last runs as times and words."""
    rows = queue.schedules()
    for row in rows:
        row["spec"] = row["cron"] or f"every {row['every_ms']} ms"
        for field in ("next_ms", "last_ms"):
            row[field[:-3] + "_at"] = ms_to_dt(row[field])
            row[field[:-3] + "_rel"] = relative(row[field], now_ms)
    return rows


def shard_rows(queue) -> list[dict]:
    """A sharded queue's per-shard counts and the node serving each shard;
    empty for a plain queue."""
    return queue.shard_counts() if isinstance(queue, ShardedQueue) else []


# Row fields shown first on the job page, in this order, with what they mean.
JOB_FIELDS = (
    ("state", "pending, active, scheduled, dead, or waiting (a flow's parent)"),
    ("attempts", "claims so far; the current fencing token"),
    ("base", "attempts when it was last requeued from dead"),
    ("lane", "the fair lane it waits on"),
    ("stalled", "leases that expired without an answer"),
    ("last_error", "what the last failed attempt said"),
)
TIME_FIELDS = ("created", "lease_deadline", "run_at", "died")


def job_page(queue: Queue, job_id: str) -> dict | None:
    row = queue.job(job_id)
    if row is None:
        return None
    now = queue.server_time_ms()
    payload = row.pop("payload", b"")
    row.pop("id", None)
    story = job_story(queue, job_id, row, now)  # takes progress and the flow's fields off the row
    fields = [(name, row.pop(name), help) for name, help in JOB_FIELDS if name in row]
    times = [(name, ms_to_dt(row[name]), relative(row.pop(name), now))
             for name in TIME_FIELDS if isinstance(row.get(name), int)]
    extra = sorted(row.items())
    lane = None
    lane_name = dict((f[0], f[1]) for f in fields).get("lane")
    if lane_name and ids.is_valid(lane_name):
        lane = queue.lanes.info(lane_name)
    return {
        "id": job_id, "state": dict((f[0], f[1]) for f in fields).get("state"),
        "fields": fields, "times": times, "extra": extra,
        "minted": ms_to_dt(ids.minted_at_ms(job_id)),
        "payload": decode_payload(payload), "raw_payload": payload, "lane": lane, "now": ms_to_dt(now),
        **story,
    }


# -- one lane ----------------------------------------------------------------
LANE_PAGE = 50


def lane_page(queue: Queue, lane: str, page: int = 1, per_page: int = LANE_PAGE) -> dict | None:
    """The jobs waiting on one lane, in claim order (highest priority first, then oldest), ``per_page`` at a time;
    None when the queue knows nothing of the lane: no ready or leased job, no
    setting (a lane with no setting leaves ``lanes`` when its last ready job
    is claimed, see docs/echomq.md). A sharded queue's lane is read on its shard."""
    if isinstance(queue, ShardedQueue):
        queue = queue.shard_for(lane=lane)
    info = queue.lanes.info(lane)
    known = queue.client.sismember(queue.k_lanes, lane)
    if not known and not info["depth"] and not info["active"]:
        return None
    start = (page - 1) * per_page
    key = keyspace.lane_key(queue.name, lane)
    job_ids = [m.decode() for m in queue.client.zrange(key, start, start + per_page - 1)]
    pages = max(1, -(-info["depth"] // per_page))
    return {"lane": info, "jobs": job_ids, "page": page, "pages": pages, "first": start + 1,
            "last": start + len(job_ids),
            "per_page": per_page, "on_ring": lane in queue.lanes.ring()}


# -- finished jobs -----------------------------------------------------------
def completed_record(record: dict, now_ms: int) -> dict:
    """A completed job's retained record, with times as datetimes and words."""
    out = dict(record)
    for name in ("enqueued", "claimed", "finished"):
        out[name + "_at"] = ms_to_dt(record.get(name))
        out[name + "_rel"] = relative(record.get(name), now_ms)
    return out


def recent_completed(queue: Queue, limit: int) -> list[dict]:
    now = queue.server_time_ms()
    return [completed_record(r, now) for r in queue.completed_jobs(limit)]


# -- events, progress, flows (issue 22) -----------------------------------------
EVENT_PAGE = 50   # events the tail page shows
TAIL_READ = 1000  # events one poll of the live tail reads at most (the filters apply after)


def event_rows(events, now_ms: int) -> list[dict]:
    """Events as template rows: their fields, ``at`` (a datetime) and ``rel`` (words)."""
    rows = []
    for e in events:
        row = e.as_dict()
        row["at"], row["rel"] = ms_to_dt(e.at_ms), relative(e.at_ms, now_ms)
        row["data_text"] = json.dumps(e.data, ensure_ascii=False, sort_keys=True) if e.data else ""
        rows.append(row)
    return rows


def end_cursor(queue) -> str:
    """Where a tail that starts now begins: the newest entry of each stream."""
    if hasattr(queue, "shards"):
        return ",".join(emq_events.last_id(s) for s in queue.shards)
    return emq_events.last_id(queue)


def events_page(queue, *, types=(), lane=None, job=None, limit: int = EVENT_PAGE) -> dict:
    """The newest ``limit`` events that match, the stream's figures, and the
    cursor a live tail goes on from. The matches are found by a scan back
    through the stream (at most its cap), so a rare filter costs a full read."""
    now = queue.server_time_ms()
    cursor = end_cursor(queue)
    events = queue.recent_events(limit, types=list(types), lane=lane, job=job)
    stats = queue.event_stats()
    return {"events": event_rows(events, now), "cursor": cursor, "stats": stats, "now": ms_to_dt(now),
            "types": emq_events.TYPES, "chosen": list(types), "lane_filter": lane or "", "job_filter": job or "",
            "limit": limit}


def events_since(queue, after: str, *, types=(), lane=None, job=None, limit: int = EVENT_PAGE) -> dict:
    """What the live tail adds: the matching events after ``after`` (at most
    TAIL_READ read, the newest ``limit`` kept), newest first, and the cursor
    to ask from next time (past every event read, matching or not)."""
    keep = emq_events.matcher(types, lane, job)
    now = queue.server_time_ms()
    found, cursor = [], after
    for n, event in enumerate(queue.events(after, count=200)):
        cursor = event.cursor
        if keep(event):
            found.append(event)
        if n + 1 >= TAIL_READ:
            break
    rows = event_rows(found[-limit:][::-1], now)
    for row in rows:
        row["at"] = row["at"].isoformat()
    return {"events": rows, "cursor": cursor}


def job_story(queue, job_id: str, row: dict | None, now_ms: int) -> dict:
    """What the job page shows beside the row: its history from the event
    stream, its last progress, and its flow (its parent, or its children with
    how each ended). Takes those fields off ``row``."""
    row = row if row is not None else {}
    story = {"history": event_rows(queue.event_history(job_id), now_ms), "has_progress": "progress" in row,
             "progress": json.dumps(row.pop("progress", None), ensure_ascii=False, indent=2),
             "parent": row.pop("parent", None), "children": [], "flow": None}
    row.pop("result", None)
    if "children" in row:
        story["flow"] = {"children": row.pop("children"), "left": row.pop("children_left", 0),
                         "policy": row.pop("policy", "")}
        story["children"] = [{"id": cid, **info} for cid, info in queue.children_results(job_id).items()]
        for child in story["children"]:
            child["detail"] = json.dumps(child.get("result") if child["state"] == "completed" else
                                         child.get("error"), ensure_ascii=False)
    return story
