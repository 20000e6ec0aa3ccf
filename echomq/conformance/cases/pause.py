"""pause: stop or restart claims for the whole queue."""
from ..dsl import A, World, call, case, refusals


def pause(flag="1", **kw):
    return call("pause", paused=flag, **kw)


CASES = [
    case("pause", "'1' pauses: meta paused 1; answers 1", World().pending(A).wake(), pause("1")),
    case("pause-again", "pausing a paused queue changes nothing", World().meta(paused="1").pending(A).wake(),
         pause("1")),
    case("resume", "'0' resumes: paused goes; 32 wake tokens (WAKE_MAX) so every parked consumer looks again",
         World().meta(paused="1", completed=3).pending(A), pause("0")),
    case("resume-running", "resuming a queue that was not paused still pushes the wake tokens, capped at 32",
         World().pending(A).wake(5), pause("0")),
    *refusals("pause", World().pending(A).wake(), {"paused": "1"},
              {"P": "P", "paused": [("", "empty", "empty"), ("2", "two", "'2'"), ("true", "word", "'true'"),
                                    ("01", "leading-zero", "'01'")]}),
]
