"""enqueue_flow: a parent and its children admitted in one step: the children
ready, the parent waiting until every child has ended (see complete's,
retry's and remove's flow cases for what ending a child does)."""
from ..dsl import A, B, C, D, GES, L1, L2, World, call, case, key, refusals


def flow(parent=A, children=((B, "b", ""), (C, "c", "")), payload="parent", lane="", policy="fail", **kw):
    return call("enqueue_flow", id=parent, payload=payload, lane=lane, on_child_failure=policy,
                pairs=list(children), **kw)


CASES = [
    case("two", "the children's rows (parent = the parent's id) are ready in the flat set with a wake token each; "
         "the parent's row is waiting with children, children_left and policy, in waiting; flow:<parent> holds "
         "each child as pending; one enqueued entry for the children, one for the parent; answers 1",
         World(), flow()),
    case("lanes", "children on lanes join them (and the ring); the parent keeps its lane for when it is admitted",
         World(), flow(children=((B, "b", L1), (C, "c", L2)), lane=L1)),
    case("ignore", "on_child_failure ignore is recorded on the parent", World(), flow(policy="ignore")),
    case("events-off", "meta events 0: the same flow, no entries", World().meta(events="0"), flow()),
    case("duplicate", "the parent's id has a row: answers 0 and nothing changes", World().pending(A), flow()),
    case("child-exists", "a child's id has a row: EMQSTATE, nothing changes", World().pending(C), flow()),
    case("child-twice", "a child named twice: EMQARG, nothing changes", World(),
         flow(children=((B, "b", ""), (B, "b", "")))),
    case("child-is-parent", "the parent named as a child: EMQARG, nothing changes", World(),
         flow(children=((A, "a", ""),))),
    case("bad-child", "an ill-formed child id: EMQARG, nothing changes", World(), flow(children=(("JOBnope", "b", ""),))),
    case("kind-child", "a child id of another brand: EMQKIND, nothing changes", World(),
         flow(children=((GES, "b", ""),))),
    case("bad-child-lane", "an ill-formed child lane: EMQARG, nothing changes", World(),
         flow(children=((B, "b", "PLRnope"),))),
    case("no-children", "no child: EMQARG", World(), flow(children=())),
    *refusals("enqueue_flow", World(), {"id": A, "payload": "parent", "lane": "", "on_child_failure": "fail",
                                        "pairs": [(B, "b", "")]},
              {"P": "P", "id": "id", "lane": "lane?",
               "on_child_failure": [("", "empty", "empty"), ("FAIL", "upper", "in capitals"),
                                    ("skip", "unknown", "not fail or ignore")]}),
]
