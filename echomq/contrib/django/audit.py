"""Every queue action leaves a row in Django's admin log (``LogEntry``):
who, when, which queue and job, and what was done, so the console's
"Recent operator actions" and any audit can see it."""
from __future__ import annotations

from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType

from .models import Dashboard

REPR_LENGTH = LogEntry._meta.get_field("object_repr").max_length


def object_id(queue: str, job_id: str | None = None) -> str:
    """``cm`` for the queue, ``cm/JOB…`` for one of its jobs."""
    return f"{queue}/{job_id}" if job_id else queue


def record(user, queue: str, job_id: str | None, message: str) -> LogEntry:
    return record_many(user, queue, [job_id], message)[0]


def record_many(user, queue: str, job_ids, message: str) -> list[LogEntry]:
    """One entry per job (or one for the queue when ``job_ids`` is [None])."""
    # Looked up, not taken from ContentType's process cache: a cached id goes
    # stale when content types are re-created (a flush, a restore), and the
    # audit row must not be lost to that.
    opts = Dashboard._meta
    ct, _ = ContentType.objects.get_or_create(app_label=opts.app_label, model=opts.model_name)
    rows = [LogEntry(user_id=user.pk, content_type=ct, object_id=object_id(queue, jid),
                     object_repr=f"queue {object_id(queue, jid)}"[:REPR_LENGTH], action_flag=CHANGE,
                     change_message=message)
            for jid in job_ids]
    return LogEntry.objects.bulk_create(rows)
