"""The data helpers behind the pages, without HTTP."""
from __future__ import annotations

import json

from echomq.contrib.django import dashboard


def test_decode_json_text_and_hex():
    assert dashboard.decode_payload(b'{"b":[1,2]}') == {
        "size": 11, "truncated": False, "kind": "json",
        "text": json.dumps({"b": [1, 2]}, indent=2)}
    assert dashboard.decode_payload("tab\tand\nnewline".encode())["kind"] == "text"
    assert dashboard.decode_payload(b"nul\x00inside")["kind"] == "hex"
    assert dashboard.decode_payload(b"\xff\xfe")["text"].startswith("00000000  ff fe")
    assert dashboard.decode_payload(b"")["kind"] == "text"
    assert dashboard.decode_payload(None)["size"] == 0


def test_big_payloads_are_cut():
    big = dashboard.decode_payload(b"a" * 100, max_shown=10)
    assert big["truncated"] and big["size"] == 100 and big["text"] == "a" * 10 + "\n…"
    blob = dashboard.decode_payload(b"\xff" * 100, max_shown=16)
    assert blob["truncated"] and blob["text"].count("\n") == 0


def test_hexdump_layout():
    assert dashboard.hexdump(b"hi\x00") == "00000000  68 69 00" + " " * 39 + "  |hi.|"
    assert len(dashboard.hexdump(bytes(40)).splitlines()) == 3


def test_relative_times():
    assert dashboard.relative(10_000, 0) == "in 10s"
    assert dashboard.relative(0, 125_000) == "2m 5s ago"
    assert dashboard.relative(0, 0) == "now"
    assert dashboard.relative(3_600_000 * 26, 0) == "in 1d 2h"
    assert dashboard.relative(None, 0) == ""


def test_chart_geometry():
    minutes = [{"minute": 100 + i, "completed": i, "dead": 1 if i == 3 else 0} for i in range(4)]
    c = dashboard.chart(minutes, width=400, height=100, pad=20, top=10)
    assert (c["peak"], c["completed"], c["dead"]) == (4, 6, 1)
    top = c["bars"][3]
    assert top["hc"] + top["hd"] == 70 and top["yd"] == 10
    assert c["bars"][3]["hd"] == 70 / 4 and c["bars"][2]["yc"] == 80 - 70 / 2
    assert c["bars"][0]["hc"] == 0 and c["bars"][0]["ago"] == 3
    empty = dashboard.chart([{"minute": 1, "completed": 0, "dead": 0}])
    assert empty["peak"] == 0 and empty["bars"][0]["hc"] == 0
