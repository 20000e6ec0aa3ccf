"""Fixtures for the metrics tests: the game fixtures (real test database and
Valkey) reused from ``tests/games``, and reading Prometheus text."""
from __future__ import annotations

import re
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.games.conftest import emoji_set, make_player, make_round, valkey  # noqa: F401

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def samples(text: str) -> dict:
    """{(sample name, sorted label pairs): value} from Prometheus text."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(found: dict, name: str, **labels) -> float:
    return found[(name, tuple(sorted(labels.items())))]


def ours(found: dict) -> set[str]:
    """Our metric names (histogram parts folded), without the standard ones."""
    names = {re.sub(r"_(bucket|sum|count)$", "", n) for n, _ in found}
    return {n for n in names if n.startswith(("echomq_", "codemojex_"))}


def documented() -> set[str]:
    return set(re.findall(r"^\| `((?:echomq|codemojex)_[a-z_]+)`", DOC.read_text(), re.M))


def scrape(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
            return resp.read().decode()
    except OSError:
        return None
