"""wait: has the job ended? If not, the caller is counted as a waiter on the
row ('wait') and told which list to block on: notify:<id>:<n>, n the row's
'wait_seq', taken from the queue's meta 'wait_seq' by the first caller of
the job's life; the script that ends the job pushes its final state there
once per waiter (see complete's and retry's waiter cases)."""
from ..dsl import A, World, call, case, key, refusals


def wait(job_id=A, **kw):
    return call("wait", id=job_id, **kw)


CASES = [
    case("active", "a running job, its life's first waiter: the row's wait count goes to 1 and its wait_seq to "
         "the queue's next list number (meta wait_seq 0 -> 1); answers {'waiting', 1}", World().active(A), wait()),
    case("numbered", "the list number follows the queue's meta wait_seq, whichever job took the last one",
         World().active(A).meta(wait_seq="41"), wait()),
    case("second", "another waiter of the same life: the count goes up by one, the same list",
         World().active(A, wait="1", wait_seq="7").meta(wait_seq="9"), wait()),
    case("leftover", "an earlier life's unread push (a waiter that gave up, then a requeue) stays where it is, "
         "for whoever may still read it; this life's first waiter gets a list of its own",
         World().pending(A, attempts=1).meta(wait_seq="3").raw(key("notify:" + A + ":3"), {"list": ["dead"]}),
         wait()),
    case("pending", "a job not started yet: counted the same way", World().pending(A), wait()),
    case("scheduled", "a delayed or retrying job has not ended either", World().scheduled(A, attempts=1), wait()),
    case("dead", "a dead job ended already: answers 'dead', nothing changes", World().dead(A), wait()),
    case("completed", "a completed job whose record is kept: answers 'completed', nothing changes",
         World().done(A), wait()),
    case("gone", "no row and no record: answers 0, nothing changes", World(), wait()),
    *refusals("wait", World().active(A), {"id": A}, {"P": "P", "id": "id"}),
]
