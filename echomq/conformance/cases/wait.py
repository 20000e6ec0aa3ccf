"""wait: has the job ended? If not, the caller is counted as a waiter on the
row ('wait'); the script that ends the job pushes its final state on
notify:<id> once per waiter (see complete's and retry's waiter cases)."""
from ..dsl import A, World, call, case, key, refusals


def wait(job_id=A, **kw):
    return call("wait", id=job_id, **kw)


CASES = [
    case("active", "a running job: the row's wait count goes to 1; answers 'waiting'", World().active(A), wait()),
    case("second", "another waiter: the count goes up by one", World().active(A, wait="1"), wait()),
    case("stale", "the first waiter since the job's last end (the count goes from 0 to 1) deletes notify:<id>: "
         "what is there was pushed at an earlier end (a waiter that gave up, then a requeue)",
         World().pending(A, attempts=1).raw(key("notify:" + A), {"list": ["dead"]}), wait()),
    case("not-stale", "a later waiter (the count was above 0) leaves notify:<id> as it is",
         World().active(A, wait="1").raw(key("notify:" + A), {"list": ["dead"]}), wait()),
    case("pending", "a job not started yet: counted the same way", World().pending(A), wait()),
    case("scheduled", "a delayed or retrying job has not ended either", World().scheduled(A, attempts=1), wait()),
    case("dead", "a dead job ended already: answers 'dead', nothing changes", World().dead(A), wait()),
    case("completed", "a completed job whose record is kept: answers 'completed', nothing changes",
         World().done(A), wait()),
    case("gone", "no row and no record: answers 0, nothing changes", World(), wait()),
    *refusals("wait", World().active(A), {"id": A}, {"P": "P", "id": "id"}),
]
