"""task_finish: how a Django task's attempt ended, written to its result
record only by the attempt of the latest start; a SUCCESSFUL record is final."""
from ..dsl import A, MAX_MS, MAX_TOKEN, World, call, case, refusals
from .task_start import EARLIER, ERRORS, NOW, RECORD, TRIED, TTL_MS, W1, W2, record

ERRORS2 = '[{"exception_class_path":"x.E","traceback":"t"},{"exception_class_path":"x.F","traceback":"u"}]'
RUNNING = dict(status="RUNNING", **TRIED)


def finish(status="SUCCESSFUL", token=1, ttl_ms=TTL_MS, errors="", finished_at=NOW, return_value="5", **kw):
    return call("task_finish", id=A, token=token, ttl_ms=ttl_ms, status=status, errors=errors,
                finished_at=finished_at, return_value=return_value, **kw)


def failed(status="READY", errors=ERRORS, finished_at="", **kw):
    return finish(status=status, errors=errors, finished_at=finished_at, return_value="", **kw)


def running(**fields):
    return World().raw(RECORD, record(**{**RUNNING, **fields}))


CASES = [
    case("successful", "the attempt of the latest start succeeds: status SUCCESSFUL, finished_at, return (the "
         "return_value), the TTL ttl_ms; answers 1", running(), finish()),
    case("successful-keeps-errors", "a success after failed attempts keeps their errors",
         running(errors=ERRORS, attempt="2", workers=f"{W1},{W2}"), finish(token=2)),
    case("ready", "a failure with attempts left: READY again with the errors (its own appended); no finished_at",
         running(), failed()),
    case("failed", "a failure for good: FAILED with the errors and finished_at", running(errors=ERRORS, attempt="2"),
         failed("FAILED", errors=ERRORS2, finished_at=NOW, token=2)),
    case("at-bounds", f"the largest token ({MAX_TOKEN}) and ttl_ms ({MAX_MS}, a year) are accepted",
         running(attempt=str(MAX_TOKEN)), finish(token=MAX_TOKEN, ttl_ms=MAX_MS)),
    case("json-values", "return_value is any JSON text (here a string); errors any JSON array",
         running(), finish(return_value='"done"')),
    case("older-token", "the latest start wins: an attempt whose job was claimed and started again since (its "
         "lease was reaped) writes nothing; answers 0", running(attempt="2", workers=f"{W1},{W2}"), finish()),
    case("unstarted-token", "a token that never started on this record writes nothing; answers 0",
         running(), finish(token=2)),
    case("successful-final", "a SUCCESSFUL record is final: even its own attempt's later finish writes nothing; "
         "answers 0", World().raw(RECORD, record(status="SUCCESSFUL", finished_at=EARLIER,
                                                 **{**TRIED, "return": "5"})), failed("FAILED", finished_at=NOW)),
    case("no-record", "no record (expired or never written): nothing is created; answers 0", World(), finish()),
    *refusals("task_finish", running(),
              {"id": A, "token": 1, "ttl_ms": TTL_MS, "status": "SUCCESSFUL", "errors": "", "finished_at": NOW,
               "return_value": "5"},
              {"P": "P", "id": "id", "token": ("int", 1, MAX_TOKEN), "ttl_ms": ("int", 1, MAX_MS),
               "status": [("", "empty", "empty"), ("RUNNING", "running", "RUNNING (a start's status)"),
                          ("successful", "lower", "in lower case")],
               "errors": [("[]", "with-success", "given with SUCCESSFUL (the earlier attempts' stay)")],
               "finished_at": [("", "empty", "empty with SUCCESSFUL"), ("2026-01-02", "date", "a date alone"),
                               ("2026-01-02T03:04:05." + "0" * 21, "long", "of 41 bytes, one past MAX_TIME")],
               "return_value": [("", "empty", "empty with SUCCESSFUL"), ("{", "not-json", "that is not JSON")]}),
    case("bad-errors-empty", "READY without errors is refused with EMQARG; nothing changes", running(),
         failed(errors="")),
    case("bad-errors-not-json", "errors that are not JSON are refused with EMQARG; nothing changes", running(),
         failed(errors="[{")),
    case("bad-errors-object", "errors that are a JSON object, not an array, are refused with EMQARG; nothing "
         "changes", running(), failed(errors='{"a":"b"}')),
    case("bad-finished_at-with-ready", "READY with a finished_at is refused with EMQARG; nothing changes",
         running(), failed(finished_at=NOW)),
    case("bad-finished_at-failed-empty", "FAILED without finished_at is refused with EMQARG; nothing changes",
         running(), failed("FAILED")),
    case("bad-return_value-with-failed", "a return_value with FAILED is refused with EMQARG; nothing changes",
         running(), finish(status="FAILED", errors=ERRORS)),
]
