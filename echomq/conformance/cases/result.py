"""result: the holder of the lease leaves a JSON result for its flow's parent
(copied into the parent's children record when the job completes); no event."""
from ..dsl import A, MAX_TEXT, World, call, case, refusals


def result(job_id=A, token=1, value='{"sum":3}', **kw):
    return call("result", id=job_id, token=token, value=value, **kw)


CASES = [
    case("records", "the holder's JSON value goes on the row (result); no event; answers 1", World().active(A),
         result()),
    case("at-bound", f"a value of MAX_TEXT ({MAX_TEXT}) bytes is accepted", World().active(A),
         result(value={"$repeat": ["7", MAX_TEXT]})),
    case("gone", "no row: answers 0 and nothing changes", World(), result()),
    case("stale", "a stale token: EMQSTALE, nothing changes", World().active(A, token=2), result(token=1)),
    case("cancelled", "a cancelled job is dropped, as by any fenced call of its holder: EMQCANCELLED",
         World().active(A, cancel="1"), result()),
    *refusals("result", World().active(A), {"id": A, "token": 1, "value": '{"sum":3}'},
              {"P": "P", "id": "id", "token": ("int", 1, 999999999999999),
               "value": [("", "empty", "empty"), ("[1,", "not-json", "that is not JSON"),
                         ({"$repeat": ["7", MAX_TEXT + 1]}, "long", f"of {MAX_TEXT + 1} bytes, one past MAX_TEXT")]}),
]
