"""A lock's emoji and a blind round's totals are sealed (games.admin_guard),
yet the admin prints a row's ``str()`` on its change and history pages (the
title, the breadcrumbs): that text must not carry them while the round is open."""
import pytest

from games.models import Lock, RoundEntry

from .test_admin_secrets import live, root  # noqa: F401

pytestmark = pytest.mark.django_db


def test_a_locks_pages_do_not_show_its_emoji_while_its_round_is_open(root, live):
    lock = Lock.objects.get()
    assert not lock.round.revealed
    for page in ("change", "history"):
        resp = root.get(f"/admin/games/lock/{lock.pk}/{page}/")
        assert resp.status_code == 200, page
        assert lock.emoji not in resp.content.decode(), page


def test_a_blind_entrys_pages_do_not_show_its_best_total_while_sealed(root, live):
    entries = RoundEntry.objects.filter(round=live["blind"])  # any total, 0 too: sealed is sealed
    assert entries
    for entry in entries:
        for page in ("change", "history"):
            html = root.get(f"/admin/games/roundentry/{entry.pk}/{page}/").content.decode()
            assert f"best {entry.best_total}" not in html and f"{entry.best_total}/600" not in html, page


def test_a_sealed_boards_names_do_not_tell_who_trails(root, make_player, make_round, valkey):
    """The sealed board lists names only; but listing the *top* 100 of a
    larger board in name order tells who is missing: the ones trailing.
    It lists the first 100 by name of the whole board, and counts it all."""
    from games import leaderboard

    rnd = make_round(kind="blind")
    players = [make_player(f"p{i:03d}", keys=0) for i in range(101)]
    # p000 trails everyone; by name it comes first.
    valkey.zadd(leaderboard.key(rnd.pk), {p.pk: leaderboard.composite(10 + i, 0) for i, p in enumerate(players)})
    html = root.get(f"/admin/games/round/{rnd.pk}/leaderboard/").content.decode()
    assert "p000" in html and "p100" not in html  # by name, whatever the totals
    assert "101 players on the board" in html
