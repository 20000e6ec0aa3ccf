"""Fixtures for the page tests: the game fixtures (real test database, the
session's real Valkey, factories) reused from ``tests/games``, plus logged-in
clients."""
from __future__ import annotations

import pytest

from tests.games.conftest import drain, emoji_set, make_player, make_round, valkey, with_secret  # noqa: F401

S = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]


@pytest.fixture
def player(make_player):
    return make_player("ann", keys=10, clips=3)


@pytest.fixture
def play(client, player):
    """A test client logged in as ``player``."""
    client.force_login(player.user)
    return client


def secret_forms(rnd) -> list[str]:
    """Every way the secret (and nonce) could appear in a page or JSON."""
    import json

    forms = [" ".join(rnd.secret), "".join(rnd.secret), json.dumps(rnd.secret),
             json.dumps(rnd.secret, ensure_ascii=False), "\\x1e".join(rnd.secret)]
    if rnd.nonce:
        forms.append(rnd.nonce)
    return forms
