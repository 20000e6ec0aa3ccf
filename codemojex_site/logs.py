"""One log record, one line (and with LOG_FORMAT=json, one JSON object).

A log line says what happened; a traceback spread over twenty lines makes
a log that ``grep`` and a log shipper split into twenty unrelated records
(and any staff user could flood the log with them: every admin 403 logs its
exception). ``OneLineFormatter`` keeps the exception on the record's line:
its type and message, then the frames innermost first, each as
``file:line in function``, so the place it broke is still there.

``JsonFormatter`` writes the same record as one JSON object, with the
request id (``RequestLog``, the middleware that also logs one line per
request) and a worker's queue and job id (``echomq.logs``) wherever they
are known. ``logging_config`` and ``gunicorn_config`` are the site's and
gunicorn's logging, in either format (``LOG_FORMAT``).
"""
from __future__ import annotations

import json
import logging
import re
import time
import traceback
from contextvars import ContextVar
from datetime import UTC, datetime

from django.core.signals import request_finished

from echomq import ids
from echomq.logs import LogContext

MAX_FRAMES = 12


def one_line(text: str) -> str:
    return " ".join(str(text).split())


class OneLineFormatter(logging.Formatter):
    def formatException(self, ei) -> str:
        exc_type, exc, tb = ei
        frames = traceback.extract_tb(tb)[::-1][:MAX_FRAMES]
        where = " < ".join(f"{f.filename.rsplit('site-packages/', 1)[-1]}:{f.lineno} in {f.name}" for f in frames)
        head = f"{exc_type.__name__}: {one_line(exc)}" if exc_type else one_line(exc)
        return f"[{head}{' @ ' + where if where else ''}]"

    def formatStack(self, stack_info: str) -> str:
        return "[stack: " + one_line(stack_info) + "]"

    def format(self, record: logging.LogRecord) -> str:
        # The message itself may hold newlines (a multi-line SQL, a repr):
        # fold them too. exc_text is cached per record by the base class.
        text = super().format(record)
        return text.replace("\r", " ").replace("\n", " ")


# -- structured logs ----------------------------------------------------------
# LOG_FORMAT=json: one JSON object per line, with the request id (web), the
# queue and the job id (workers) on every line written where they are known.

request_id: ContextVar[str | None] = ContextVar("codemojex_request_id", default=None)
_RECORD_FIELDS = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}
_CONTEXT = ("request_id", "queue", "job_id")
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")


class Context(logging.Filter):
    """Puts the request id, the queue and the job id on every record
    (None where unknown; never over a value the call passed in ``extra``)."""

    _echomq = LogContext()

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = request_id.get()
        return self._echomq.filter(record)


class JsonFormatter(OneLineFormatter):
    """One JSON object per line: time (UTC, ms), level, logger, message, the
    request id / queue / job id when known, any other scalar ``extra`` a call
    passed, and an exception as one line (``exc``) as OneLineFormatter has it."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace(
                "+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
        }
        for name in _CONTEXT:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = value
        for name, value in vars(record).items():
            if name not in _RECORD_FIELDS and name not in entry and isinstance(value, (str, int, float, bool)):
                entry[name] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


class RequestLog:
    """Second in MIDDLEWARE (after the health checks, which it never sees):
    names the request -- the proxy's ``X-Request-ID`` when BEHIND_PROXY and
    well formed, else a fresh ``REQ`` id -- for every line logged while it is
    served, answers it in ``X-Request-ID``, and logs one line when the
    response leaves: method, path (never the query), status, milliseconds."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        from django.conf import settings

        sent = request.META.get("HTTP_X_REQUEST_ID", "") if getattr(settings, "BEHIND_PROXY", False) else ""
        rid = sent if _REQUEST_ID.fullmatch(sent) else ids.mint("REQ")
        # Kept until the response is closed (request_finished), so Django's own
        # line for a 4xx/5xx, written after the middleware returns, has it too.
        request_id.set(rid)
        start = time.perf_counter()
        response = self.get_response(request)
        response["X-Request-ID"] = rid
        if access.isEnabledFor(logging.INFO):
            ms = (time.perf_counter() - start) * 1000
            access.info("%s %s %d %.1fms", request.method, request.path, response.status_code, ms,
                        extra={"method": request.method, "path": request.path,
                               "status": response.status_code, "duration_ms": round(ms, 1)})
        return response


access = logging.getLogger("codemojex.request")


def _forget_request(**kwargs) -> None:
    request_id.set(None)


request_finished.connect(_forget_request, dispatch_uid="codemojex_site.logs.request_id")


def logging_config(fmt: str, level: str) -> dict:
    """The site's LOGGING: every record through one console handler, one line
    each, in ``fmt`` ("line" or "json"), with the request/queue/job context."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": FORMATTERS,
        "filters": {"context": {"()": "codemojex_site.logs.Context"},
                    "quiet_probes": {"()": "codemojex_site.health.QuietProbes"}},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": fmt, "filters": ["context"]}},
        "root": {"handlers": ["console"], "level": level},
        # axes: one WARNING line per failed log-in, not its INFO bookkeeping.
        "loggers": {"django.db.backends": {"level": "WARNING"}, "axes": {"level": "WARNING"},
                    "django.request": {"filters": ["quiet_probes"]}},
    }


def gunicorn_config(fmt: str) -> dict:
    """gunicorn's own lines (``logconfig_dict``) in the same format, to stderr.
    No access log: the site logs each request (RequestLog)."""
    if fmt not in FORMATS:
        raise ValueError(f"LOG_FORMAT must be one of {', '.join(FORMATS)}, not {fmt!r}")
    handler = {"class": "logging.StreamHandler", "formatter": fmt, "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": FORMATTERS,
        "handlers": {"console": handler, "error_console": handler},
        "root": {"level": "INFO", "handlers": []},
        "loggers": {"gunicorn.error": {"level": "INFO", "handlers": ["error_console"], "propagate": False},
                    "gunicorn.access": {"level": "INFO", "handlers": [], "propagate": False}},
    }


LINE_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
FORMATTERS = {"line": {"()": "codemojex_site.logs.OneLineFormatter", "format": LINE_FORMAT},
              "json": {"()": "codemojex_site.logs.JsonFormatter"}}
FORMATS = tuple(FORMATTERS)
