"""LOG_FORMAT=json: one JSON object per line, with the request id on a
request's lines and the queue and job id on a worker's."""
from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import threading

import pytest
from django.test import override_settings

from codemojex_site.logs import Context, JsonFormatter
from echomq import Consumer, Queue, Retry
from tests.games.procs import ROOT, wait_for


@pytest.fixture
def json_lines():
    """Every record of the process as the site writes it under LOG_FORMAT=json."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(Context())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)

    def lines() -> list[dict]:
        text = stream.getvalue()
        assert text.endswith("\n") or not text
        return [json.loads(line) for line in text.splitlines()]

    yield lines
    root.removeHandler(handler)
    root.setLevel(level)


def test_an_exception_stays_inside_its_one_object(json_lines):
    log = logging.getLogger("test.json")
    try:
        raise ValueError("bad\nthing")
    except ValueError:
        log.exception("it broke:\n%s", "details", extra={"round": "RND0", "player": object()})
    [entry] = json_lines()
    assert entry["level"] == "ERROR" and entry["logger"] == "test.json"
    assert entry["message"] == "it broke:\ndetails"  # the newline is escaped inside the string
    assert entry["round"] == "RND0" and "player" not in entry  # scalar extras only
    assert entry["exc"].startswith("[ValueError: bad thing @ ") and "test_json_logs.py:" in entry["exc"]
    assert entry["time"].endswith("Z") and "request_id" not in entry and "job_id" not in entry


@pytest.mark.django_db
def test_a_requests_lines_carry_its_request_id(client, json_lines):
    response = client.get("/no-such-page/")
    rid = response["X-Request-ID"]
    assert response.status_code == 404 and rid.startswith("REQ") and len(rid) == 14
    mine = [e for e in json_lines() if e.get("request_id") == rid]
    assert {e["logger"] for e in mine} == {"codemojex.request", "django.request"}, json_lines()
    [line] = [e for e in mine if e["logger"] == "codemojex.request"]
    assert (line["method"], line["path"], line["status"]) == ("GET", "/no-such-page/", 404)
    assert isinstance(line["duration_ms"], float)
    logging.getLogger("test.after").warning("between requests")
    assert "request_id" not in json_lines()[-1]
    assert client.get("/healthz")["Content-Type"] == "application/json"
    assert not [e for e in json_lines() if "healthz" in json.dumps(e)]  # probes are never logged


@pytest.mark.django_db
def test_a_proxys_request_id_is_kept_when_trusted_and_well_formed(client):
    with override_settings(BEHIND_PROXY=True):
        assert client.get("/rules/", HTTP_X_REQUEST_ID="lb-7f3a.9")["X-Request-ID"] == "lb-7f3a.9"
        assert client.get("/rules/", HTTP_X_REQUEST_ID="a b\nforged")["X-Request-ID"].startswith("REQ")
    assert client.get("/rules/", HTTP_X_REQUEST_ID="lb-7f3a.9")["X-Request-ID"].startswith("REQ")


def test_a_workers_lines_carry_the_queue_and_the_job(r, json_lines):
    queue = Queue("logq", r)
    done, again = queue.enqueue(b"done")[0], queue.enqueue(b"again")[0]

    def handler(job):
        logging.getLogger("test.handler").info("handling %s", job.id)
        if job.payload == b"again":
            raise Retry("not yet")

    consumer = Consumer(queue, handler, beat_ms=50)
    worker = threading.Thread(target=consumer.run)
    worker.start()
    try:
        wait_for(lambda: consumer.stats["completed"] == 1 and consumer.stats["retried"] == 1, timeout=10,
                 what="one job done, one retried")
    finally:
        consumer.stop()
        worker.join(10)
    entries = json_lines()
    handled = [e for e in entries if e["logger"] == "test.handler"]
    assert sorted((e["queue"], e["job_id"]) for e in handled) == sorted([("logq", done), ("logq", again)])
    [retry] = [e for e in entries if "will retry" in e["message"]]
    assert (retry["logger"], retry["queue"], retry["job_id"]) == ("echomq.consumer", "logq", again)
    started = [e for e in entries if "started: queue=logq" in e["message"]]
    assert started and started[0]["queue"] == "logq" and "job_id" not in started[0]


def test_an_unknown_log_format_refuses_to_start():
    run = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "CODEMOJEX_DEV": "1", "LOG_FORMAT": "xml"})
    assert run.returncode != 0
    assert "LOG_FORMAT must be one of line, json, not 'xml'" in run.stderr
