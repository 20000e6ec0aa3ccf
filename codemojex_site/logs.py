"""One log record, one line.

A log line says what happened; a traceback spread over twenty lines makes
a log that ``grep`` and a log shipper split into twenty unrelated records
(and any staff user could flood the log with them: every admin 403 logs its
exception). ``OneLineFormatter`` keeps the exception on the record's line:
its type and message, then the frames innermost first, each as
``file:line in function``, so the place it broke is still there.
"""
from __future__ import annotations

import logging
import traceback

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
