"""What a log line can say about where it was written: the queue, and the job.

A :class:`~echomq.Consumer` marks each of its threads with its queue's name,
and the job while a handler runs (one job at a time; a ``handler_many``
batch of several jobs names none), so every line its threads and handlers
log can carry them. :class:`LogContext` is the logging filter that puts them
on each record as ``record.queue`` and ``record.job_id`` (``None`` when
unset, and never over a value the call passed in ``extra``); a formatter
then shows them (``codemojex_site.logs.JsonFormatter`` does)::

    handler.addFilter(echomq.logs.LogContext())

Context variables, so each thread (and each asyncio task) has its own.
"""
from __future__ import annotations

import logging
from contextvars import ContextVar

queue: ContextVar[str | None] = ContextVar("echomq_queue", default=None)
job: ContextVar[str | None] = ContextVar("echomq_job", default=None)


class LogContext(logging.Filter):
    """Adds ``queue`` and ``job_id`` to every record (keeps an ``extra`` one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "queue", None) is None:
            record.queue = queue.get()
        if getattr(record, "job_id", None) is None:
            record.job_id = job.get()
        return True
