"""The conformance vectors (lua/conformance/) on every kind of server, through
both runners: Python's (``python -m echomq.conformance``) and the Node client's
(``clients/node``). Also: the runners fail on a wrong vector, the coverage check
fails on a gap, and the committed vectors are what the cases record today."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from echomq.conformance import format as fmt
from echomq.conformance import headers, runner
from echomq.scripts import load

from .. import nodeclient
from ..nodeclient import ROOT, url_of


def python_runner(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "echomq.conformance", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


def passed(out: subprocess.CompletedProcess, total: int) -> None:
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert f"{total} passed, 0 failed" in out.stdout, out.stdout[-2000:]


TOTAL = sum(len(d["cases"]) for d in runner.load_vectors().values())


def test_the_python_runner_passes_every_vector(any_server):
    out = python_runner("--url", url_of(any_server), "-q")
    passed(out, TOTAL)
    assert "coverage: every script has vectors" in out.stdout


def test_the_python_runner_passes_every_vector_on_the_cluster(valkey_cluster):
    out = python_runner("--url", valkey_cluster.url, "--cluster", "-q")
    passed(out, TOTAL)


def test_the_node_runner_passes_every_vector(any_server):
    out = nodeclient.run("conformance", "--url", url_of(any_server), "-q", timeout=300)
    passed(out, TOTAL)
    assert "layouts.js agrees with every vector file" in out.stdout


def test_the_node_bundle_has_the_python_shas():
    out = nodeclient.run("shas")
    assert out.returncode == 0, out.stderr
    shas = dict(line.split() for line in out.stdout.splitlines())
    assert shas == {name: load(name).sha for name in headers.script_names()}


def test_the_node_client_unit_tests():
    out = subprocess.run([nodeclient.node(), "--test", "test/"], capture_output=True, text=True,
                         cwd=nodeclient.NODE_DIR, timeout=120)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "# fail 0" in out.stdout


def test_both_runners_fail_a_wrong_vector(valkey_server, tmp_path):
    """A vector that says something else than the bundle does: a reply, a
    state after, a clock rule. Each runner names the case and exits 1."""
    shutil.copytree(runner.VECTORS_DIR, tmp_path / "v")
    path = tmp_path / "v" / "complete.json"
    doc = json.loads(path.read_text())
    cases = {c["name"]: c for c in doc["cases"]}
    cases["gone"]["reply"] = 1
    meta = next(k for k in cases["flat"]["after"] if k.endswith(":meta"))
    cases["flat"]["after"][meta] = {"hash": {"completed": "2"}}
    cases["flat"]["after"][next(k for k in cases["flat"]["after"] if k.endswith(":done"))]["zset"] = {
        "JOB0000000000A": {"$now": 60000}}
    cases["stale-lower"]["error"] = "EMQSTALE token 2 does not hold JOB0000000000A"
    path.write_text(json.dumps(doc))
    for out in (python_runner("--url", valkey_server.url, "--vectors", str(tmp_path / "v"), "-q"),
                nodeclient.run("conformance", "--url", valkey_server.url, "--vectors", str(tmp_path / "v"), "-q")):
        assert out.returncode == 1, out.stdout
        assert f"{TOTAL - 3} passed, 3 failed" in out.stdout, out.stdout
        for name in ("complete/gone", "complete/flat", "complete/stale-lower"):
            assert f"FAIL  {name}" in out.stdout, out.stdout
        assert "emq:{conformance}:meta completed: want '2'" in out.stdout or \
            "emq:{conformance}:meta completed: want \"2\"" in out.stdout, out.stdout
        assert "want now+60000" in out.stdout, out.stdout


def test_the_coverage_check_finds_every_gap():
    docs = runner.load_vectors()
    assert runner.coverage(docs) == []
    # A script that lands without vectors (say a schedule script from another branch).
    without = {name: doc for name, doc in docs.items() if name != "schedule_fire"}
    assert runner.coverage(without) == ["schedule_fire: lua/schedule_fire.lua has no vectors (add "
                                        "echomq/conformance/cases/schedule_fire.py and run python -m "
                                        "echomq.conformance.generate)"]
    # An error code the script can answer that no case answers.
    gapped = json.loads(json.dumps(docs))
    gapped["complete"]["cases"] = [c for c in gapped["complete"]["cases"]
                                   if not c.get("error", "").startswith("EMQSTALE")]
    assert runner.coverage(gapped) == ["complete: no case answers EMQSTALE, which it can answer"]
    # Vectors recorded for another ARGV layout are stale.
    stale = json.loads(json.dumps(docs))
    stale["enqueue"]["layout"]["argv"] = stale["enqueue"]["layout"]["argv"][:-1]
    assert [p.split(":")[0] for p in runner.coverage(stale)] == ["enqueue"]
    assert "regenerate them" in runner.coverage(stale)[0]
    # Vectors for a script the bundle does not have; a script with only refusals.
    extra = {**docs, "gone_script": {"cases": []}}
    assert runner.coverage(extra)[-1].startswith("gone_script: vectors for a script the bundle does not have")
    refusals = json.loads(json.dumps(docs))
    refusals["counts"]["cases"] = [c for c in refusals["counts"]["cases"] if "error" in c]
    assert runner.coverage(refusals) == ["counts: no case of an accepted call"]


def test_error_codes_are_found_through_the_includes():
    """The static analysis behind the coverage check: claim includes args.lua,
    which can raise EMQKIND, but claim never calls arg_job, so it cannot."""
    assert headers.error_codes("claim") == {"EMQARG"}
    assert headers.error_codes("complete") == {"EMQARG", "EMQKIND", "EMQSTALE", "EMQCANCELLED"}
    assert headers.error_codes("cancel") == {"EMQARG", "EMQKIND", "EMQNOJOB", "EMQSTATE"}
    for name in headers.script_names():
        assert headers.error_codes(name) == headers.documented_codes(name), name


def test_the_vectors_are_what_the_cases_record_today():
    """The committed vectors match the hand-written cases run on a fresh
    valkey-server against today's bundle (python -m echomq.conformance.generate)."""
    out = subprocess.run([sys.executable, "-m", "echomq.conformance.generate", "--check"], capture_output=True,
                         text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert out.stdout.count("(unchanged)") == len(headers.script_names()), out.stdout


def test_the_clock_rules_of_the_format():
    """$now windows, $MINUTE keys, TTLs and stream ids, on states no script makes yet."""
    w = fmt.Window(t0=1_000_000, t1=1_000_005, t2=1_000_010)
    expected = fmt.state({
        "emq:{conformance}:minute:$MINUTE": {"hash": {"completed": "1"}, "expire_s": 7200},
        "emq:{conformance}:events": {"stream": [["5-1", {"type": "old"}], ["$NOW-0", {"type": "completed",
                                                                                       "at": {"$now": 0}}]]},
        "emq:{conformance}:active": {"zset": {"JOB0000000000A": {"$now": 30000}}},
    })

    def actual(*, minute=16, pttl=7_199_995, entry="1000003-0", at=b"1000004", score=1_030_005.0):
        return {
            f"emq:{{conformance}}:minute:{minute}": fmt.Entry("hash", {"completed": b"1"}, pttl=pttl),
            "emq:{conformance}:events": fmt.Entry("stream", [("5-1", {"type": b"old"}),
                                                             (entry, {"type": b"completed", "at": at})]),
            "emq:{conformance}:active": fmt.Entry("zset", [("JOB0000000000A", score)]),
        }

    assert fmt.match_state(expected, actual(), w) == []
    assert len(fmt.match_state(expected, actual(minute=17), w)) == 2  # missing + not expected
    assert fmt.match_state(expected, actual(pttl=7_199_000), w)  # the TTL was set earlier than the call
    assert fmt.match_state(expected, actual(pttl=-1), w)
    assert fmt.match_state(expected, actual(entry="999999-0"), w)  # an id from before the call
    assert fmt.match_state(expected, actual(at=b"1000006"), w)  # after the call's window
    assert fmt.match_state(expected, actual(score=1_030_006.0), w)
    clock = fmt.Clock(w, {0, 30000})
    assert fmt.encode(b"1000002", clock) == {"$now": 0} and fmt.encode(1_030_001, clock) == {"$now": 30000}
    with pytest.raises(fmt.Ambiguous):
        fmt.Clock(w, {0, 1}).mark(1_000_003)


def test_docs_protocol_lists_every_script_as_its_header_does():
    """docs/protocol.md's table of scripts: a row per script of the bundle,
    with the KEYS and ARGV its Lua header names, in order."""
    import re

    text = (ROOT / "docs" / "protocol.md").read_text()
    rows = {m.group(1): (m.group(2), m.group(3))
            for m in re.finditer(r"^\| `(\w+)` \| (.+?) \| (.+?) \|", text, re.M)}
    assert sorted(rows) == headers.script_names()
    for name, (keys, argv) in rows.items():
        layout = headers.layout(name)
        assert re.findall(r"`([^`]+)`", keys) == [t.removeprefix("emq:{q}:") for _, t in layout["keys"]], name
        if "argv_repeated" in layout:
            group = {2: "pairs", 3: "triples"}[len(layout["argv_repeated"])]
            assert argv == f"{', '.join(layout['argv'])}, then ({', '.join(layout['argv_repeated'])}) {group}", name
        else:
            assert [a.strip() for a in re.sub(r"\([^)]*\)", "", argv).split(",")] == layout["argv"], name
