"""The secret (and a blind round's nonce) never leaves the database before
settlement: not in job payloads or any other Valkey data, not in str/repr,
not on the admin pages."""
import json

import pytest
from django.contrib.auth import get_user_model

from games import settlement
from games.guesses import submit
from games.models import Round

from .conftest import drain
from games.workers import score_guess

pytestmark = pytest.mark.django_db

S = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]


def everything_in_valkey(client) -> bytes:
    blob = []
    for key in client.scan_iter(count=1000):
        blob.append(key)
        kind = client.type(key)
        if kind == b"hash":
            for k, v in client.hgetall(key).items():
                blob += [k, v]
        elif kind == b"zset":
            blob += client.zrange(key, 0, -1)
        elif kind == b"list":
            blob += client.lrange(key, 0, -1)
        elif kind == b"set":
            blob += list(client.smembers(key))
        elif kind == b"string":
            blob.append(client.get(key))
        elif kind == b"stream":  # the queues' event streams (a live page's source)
            for entry_id, fields in client.xrange(key):
                blob += [entry_id, *fields.keys(), *fields.values()]
    return b"\n".join(blob)


def forms(rnd: Round) -> list[str]:
    out = [" ".join(rnd.secret), "".join(rnd.secret), json.dumps(rnd.secret), json.dumps(rnd.secret, ensure_ascii=False)]
    if rnd.nonce:
        out.append(rnd.nonce)
    return out


def test_no_secret_in_any_job_payload_or_valkey_data(make_player, make_round, valkey,
                                                     django_capture_on_commit_callbacks):
    p = make_player(keys=10)
    classic = make_round(secret=S, prize_pool=5)
    blind = make_round(kind="blind", secret=S, prize_pool=5)
    with django_capture_on_commit_callbacks(execute=True):
        for rnd in (classic, blind):
            submit(p, rnd, S)
            submit(p, rnd, S[::-1])
    settlement.request_settlement(blind.pk, "admin")
    blob = everything_in_valkey(valkey)
    assert blob
    for emoji in S:  # payloads carry ids only: not even one secret emoji is in Valkey
        assert emoji.encode() not in blob
    assert blind.nonce.encode() not in blob
    drain("cm", score_guess)  # scoring writes the leaderboard: ids and numbers only
    blob = everything_in_valkey(valkey)
    assert all(emoji.encode() not in blob for emoji in S) and blind.nonce.encode() not in blob


def test_round_str_and_repr_do_not_leak(make_round):
    rnd = make_round(kind="blind", secret=S)
    for text in (str(rnd), repr(rnd)):
        assert all(emoji not in text for emoji in S) and rnd.nonce not in text
    assert rnd.public_secret is None and rnd.public_nonce is None


@pytest.mark.filterwarnings("ignore:No directory at")
def test_admin_pages_hide_the_secret_until_settled(client, settings, make_player, make_round):
    # No collectstatic in tests: serve admin assets without the manifest.
    settings.STORAGES = {**settings.STORAGES, "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
    admin = get_user_model().objects.create_superuser("boss", password="pw-boss-123")
    client.force_login(admin)
    p = make_player(keys=5)
    secret = ["🦊", "🐶", "🐰", "🐱", "🐹", "🐭"]  # not in keyboard order, so the keyboard row is no false alarm
    rnd = make_round(kind="blind", secret=secret, keyboard_size=None)
    g = submit(p, rnd, secret)
    pages = [f"/admin/games/round/{rnd.pk}/change/", "/admin/games/round/", f"/admin/games/guess/{g.pk}/change/",
             "/admin/games/guess/"]
    for url in pages:
        resp = client.get(url)
        assert resp.status_code == 200, url
        html = resp.content.decode()
        assert all(form not in html for form in forms(rnd)), url
    assert "hidden until settled" in client.get(pages[0]).content.decode()
    settlement.settle_round(rnd.pk, force=True)
    assert rnd.nonce in client.get(pages[0]).content.decode()


def test_blind_round_shows_no_totals_or_leaderboard_until_revealed(make_player, make_round):
    from games import leaderboard
    from .test_worker import job_for

    p = make_player(keys=5)
    blind, classic = make_round(kind="blind", secret=S, prize_pool=5), make_round(secret=S)
    gb, gc = submit(p, blind, S), submit(p, classic, S[::-1])
    score_guess(job_for(gb)), score_guess(job_for(gc))
    gb.refresh_from_db(), gc.refresh_from_db()
    assert not gb.feedback_visible() and gc.feedback_visible()
    assert leaderboard.public_top(blind) == [] and len(leaderboard.public_top(classic)) == 1
    settlement.settle_round(blind.pk, force=True)
    blind.refresh_from_db(), gb.refresh_from_db()
    assert gb.feedback_visible() and leaderboard.public_top(blind)[0].total == 600
