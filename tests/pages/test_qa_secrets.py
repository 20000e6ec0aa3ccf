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
    entries = RoundEntry.objects.filter(round=live["blind"], best_total__gt=0)
    assert entries
    for entry in entries:
        for page in ("change", "history"):
            html = root.get(f"/admin/games/roundentry/{entry.pk}/{page}/").content.decode()
            assert f"best {entry.best_total}" not in html and f"{entry.best_total}/600" not in html, page
