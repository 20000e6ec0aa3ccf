"""task_start: a worker starts a Django task's attempt. It must hold the
job's lease; the result record beside the job turns RUNNING under its token
(the latest start), unless an earlier attempt succeeded."""
import json

from ..dsl import A, MAX_MS, MAX_TOKEN, World, call, case, key, refusals

RECORD = key("task:" + A)
TTL_MS, TTL_S = 86_400_000, 86_400  # RESULT_TTL, a day
NOW = "2026-01-02T03:04:05.678901+00:00"
EARLIER = "2026-01-02T03:00:00.000001+00:00"
W1, W2 = "web-1:101", "web-2:202"
# A task's payload, as task_payload() writes it and enqueue copies it into the record.
PAYLOAD = {"task": "tests.tasks.jobs.add", "backend": "default", "queue": "conformance", "args": "[2,3]",
           "kwargs": "{}", "status": "READY", "enqueued_at": EARLIER, "run_after": "", "errors": "[]",
           "priority": "0"}
FILL = json.dumps(PAYLOAD, separators=(",", ":"))
ERRORS = '[{"exception_class_path":"x.E","traceback":"t"}]'
TRIED = {"attempt": "1", "workers": W1, "started_at": EARLIER, "last_attempted_at": EARLIER}


def record(expire_s=90_000, **fields) -> dict:
    """The result record (kept RESULT_TTL plus the job's delay from its enqueue)."""
    return {"hash": {**PAYLOAD, **fields}, "expire_s": expire_s}


def start(token=1, worker=W1, now=NOW, ttl_ms=TTL_MS, fill=FILL, **kw):
    return call("task_start", id=A, token=token, worker=worker, now=now, ttl_ms=ttl_ms, record=fill, **kw)


CASES = [
    case("first", "the holder's first start: the record turns RUNNING with attempt = token, workers = worker, "
         "started_at and last_attempted_at = now, its TTL ttl_ms; answers RUNNING, the base, the record",
         World().active(A).raw(RECORD, record()), start()),
    case("next-attempt", "a later attempt (the last one failed): attempt = its token, its worker appended to "
         "workers, started_at kept, last_attempted_at = now",
         World().active(A, token=2).raw(RECORD, record(errors=ERRORS, **TRIED)), start(token=2, worker=W2)),
    case("latest-start-wins", "a start by the new holder of a job whose last holder lost its lease mid-run "
         "(the record RUNNING at the old token): the record is the new attempt's (task_finish then refuses the "
         "old one)", World().active(A, token=2).raw(RECORD, record(status="RUNNING", **TRIED)),
         start(token=2, worker=W2)),
    case("base", "a requeued job answers its row's base (the attempts not counted against max_attempts)",
         World().active(A, token=4, base="3").raw(RECORD, record()), start(token=4)),
    case("refills", "no record (it expired while the job waited): the payload's fields are filled in, then "
         "the start recorded", World().active(A), start()),
    case("fills-missing-only", "a field the record has is kept: only those it lacks are filled from the payload",
         World().active(A).raw(RECORD, {"hash": {"status": "READY", "errors": ERRORS}, "expire_s": 60}),
         start()),
    case("empty-fill", "an empty payload object fills nothing; the start is recorded",
         World().active(A).raw(RECORD, record()), start(fill="{}")),
    case("at-bounds", f"the largest token ({MAX_TOKEN}) and ttl_ms ({MAX_MS}, a year) are accepted",
         World().active(A, token=MAX_TOKEN).raw(RECORD, record()), start(token=MAX_TOKEN, ttl_ms=MAX_MS)),
    case("cancel-mark-left", "a job cancelled while leased still starts: the row (and its cancel mark) is only "
         "read; the holder's next fenced call on the job drops it",
         World().active(A, cancel="1").raw(RECORD, record()), start()),
    case("successful-final", "a record an earlier attempt made SUCCESSFUL (its worker died before the ack): "
         "answers SUCCESSFUL, the base, an empty record; nothing changes (the caller acks without running it)",
         World().active(A, token=2).raw(RECORD, record(status="SUCCESSFUL", finished_at=EARLIER,
                                                       **{"return": "5"}, **TRIED)),
         start(token=2, worker=W2)),
    case("gone", "no job row (removed): answers 0 and nothing changes, the record included",
         World().raw(RECORD, record()), start()),
    case("stale-lower", "a token below the row's attempts (reaped, then claimed by another): EMQSTALE, "
         "nothing changes", World().active(A, token=2).raw(RECORD, record()), start(token=1)),
    case("stale-higher", "a token above the row's attempts: EMQSTALE, nothing changes",
         World().active(A).raw(RECORD, record()), start(token=2)),
    case("stale-reaped", "the job was reaped and not claimed again (pending, same attempts): EMQSTALE, "
         "nothing changes", World().pending(A, attempts=1, stalled=1).raw(RECORD, record()), start()),
    case("stale-before-final", "the lease is checked first: a stale token is EMQSTALE even on a SUCCESSFUL "
         "record", World().active(A, token=2).raw(RECORD, record(status="SUCCESSFUL", **TRIED)), start()),
    *refusals("task_start", World().active(A).raw(RECORD, record()),
              {"id": A, "token": 1, "worker": W1, "now": NOW, "ttl_ms": TTL_MS, "record": FILL},
              {"P": "P", "id": "id", "token": ("int", 1, MAX_TOKEN),
               "worker": [("", "empty", "empty"), ("web-1:1,web-2:2", "comma", "with a ',' (workers are joined "
                                                    "with commas)"),
                          ({"$repeat": ["w", 256]}, "long", "of 256 bytes, one past MAX_WORKER")],
               "now": [("", "empty", "empty"), ("2026-01-02 03:04:05", "space", "with a space for the T"),
                       ("1767323045678", "ms", "in ms"), ("2026-01-02T03:04:05 ", "trailing", "with a trailing space"),
                       ("2026-01-02T03:04:05." + "0" * 21, "long", "of 41 bytes, one past MAX_TIME")],
               "ttl_ms": ("int", 1, MAX_MS),
               "record": [("", "empty", "empty"), ("{", "not-json", "that is not JSON"),
                          ("[]", "array", "a JSON array, not an object"),
                          ('{"attempt":"9"}', "unknown-field", "naming a field no payload fills (attempt)"),
                          ('{"priority":0}', "number", "with a number for a field"),
                          ('{"args":null}', "null", "with null for a field")]}),
]
