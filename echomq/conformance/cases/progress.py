"""progress: the holder of the lease records how far its job has got (JSON, on
the row and as a progress event), fenced by its token."""
from ..dsl import A, L1, World, call, case, refusals

PENDING = '{"state":"pending"}'


def progress(job_id=A, token=1, value='{"pct":50}', **kw):
    return call("progress", id=job_id, token=token, value=value, **kw)


CASES = [
    case("records", "the holder's JSON value goes on the row (progress) and into the event stream as a progress "
         "entry (data {\"value\": value}); answers 1", World().active(A), progress()),
    case("replaces", "a later value replaces the last", World().active(A, progress='{"pct":10}'),
         progress(value='"almost"')),
    case("lane", "a laned job's entry names its lane", World().active(A, lane=L1), progress(value="7")),
    case("at-bound", "a value of MAX_PROGRESS (1024) bytes is accepted", World().active(A),
         progress(value='"' + "x" * 1022 + '"')),
    case("events-off", "meta events 0: the row changes, no entry is written", World().active(A).meta(events="0"),
         progress()),
    case("gone", "no row: answers 0 and nothing changes", World(), progress()),
    case("stale", "a stale token: EMQSTALE, nothing changes (a stale worker's progress is refused)",
         World().active(A, token=2), progress(token=1)),
    case("cancelled", "a cancelled job is dropped, as by any fenced call of its holder: EMQCANCELLED",
         World().active(A, cancel="1"), progress()),
    *refusals("progress", World().active(A), {"id": A, "token": 1, "value": '{"pct":50}'},
              {"P": "P", "id": "id", "token": ("int", 1, 999999999999999),
               "value": [("", "empty", "empty"), ("{", "not-json", "that is not JSON"),
                         ('"' + "x" * 1023 + '"', "long", "of 1025 bytes, one past MAX_PROGRESS")]}),
]
