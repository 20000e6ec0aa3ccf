"""The rest of "no 500 on any input": ledger references that are not round
ids, emoji sets that could not make a fair round, production settings that
refuse to start unsafe, and demo passwords kept out of logs."""
from __future__ import annotations

import io
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.contrib.auth import get_user_model

from games import emoji_sets, rounds, wallet
from games.emoji_sets import SETS
from games.models import EmojiSet, Round

ROOT = Path(__file__).resolve().parents[2]
ANIMALS = SETS["animals"]["emojis"]


# -- ledger references ---------------------------------------------------------
@pytest.mark.django_db
def test_a_note_that_looks_like_a_round_id_does_not_break_the_wallet(play, player, make_round):
    """The report: ``grant … --note "RNDticket 12/3"`` made the wallet a 500 forever."""
    call_command("grant", player.user.username, "keys", "1", "--note", "RNDticket 12/3", stdout=io.StringIO())
    wallet.grant(player, "clips", 1, reference="RND<b>bold</b>")
    rnd = make_round()
    wallet.grant(player, "clips", 1, reference=rnd.pk)
    resp = play.get("/wallet/")
    html = resp.content.decode()
    assert resp.status_code == 200
    assert "RNDticket 12/3" in html and "RNDticket" not in "".join(re.findall(r'href="[^"]*"', html))  # not a link
    assert "RND&lt;b&gt;bold&lt;/b&gt;" in html and "<b>bold</b>" not in html
    assert f'href="/rounds/{rnd.pk}/"' in html  # a real round id is linked


# -- emoji sets ----------------------------------------------------------------
@pytest.mark.parametrize("emojis, words", [
    (ANIMALS[:23], "at least 24"),
    (ANIMALS[:30] + [ANIMALS[0]], "repeated: 🐶"),
    (["❄"] + ANIMALS[:30] + ["❄️"], "repeated: ❄️"),  # the same emoji in text and colour presentation
    (ANIMALS[:30] + ["🐶🐱"], "exactly one emoji"),
    (ANIMALS[:30] + ["a"], "exactly one emoji"),
    (ANIMALS[:30] + ["🐶\u200d"], "exactly one emoji"),
    (ANIMALS[:30] + [""], "exactly one emoji"),
    (ANIMALS[:30] + [7], "exactly one emoji"),
    ("🐶🐱🐭", "is a list"),
])
def test_emoji_set_problems(emojis, words):
    with pytest.raises(emoji_sets.EmojiSetError, match=words):
        emoji_sets.check(emojis)
    with pytest.raises(ValidationError):
        EmojiSet(slug="bad", title="Bad", emojis=emojis).clean()  # what every ModelForm runs


def test_single_graphemes_of_many_code_points_are_emojis():
    ok = ANIMALS[:20] + ["👩🏽‍💻", "👍🏿", "👍", "🏳️‍🌈", "🇫🇷", "1️⃣", "🏴‍☠️"]
    assert emoji_sets.problems(ok) == []
    for spec in SETS.values():
        assert emoji_sets.problems(spec["emojis"]) == []


@pytest.fixture
def bad_set(db):
    """A set saved around the validator, as an old row or a raw insert could be."""
    es = EmojiSet.objects.create(slug="twins", title="Twins", emojis=ANIMALS[:24])
    EmojiSet.objects.filter(pk=es.pk).update(emojis=ANIMALS[:23] + [ANIMALS[0]])
    es.refresh_from_db()
    return es


@pytest.mark.django_db
def test_create_round_refuses_a_bad_set(bad_set):
    with pytest.raises(rounds.RoundError, match="repeated"):
        rounds.create_round(bad_set, keyboard_size=None)
    with pytest.raises(CommandError, match="cannot make a round"):
        call_command("create_round", "--set", "twins", "--keyboard-size", "0", stdout=io.StringIO())
    assert not Round.objects.exists()


@pytest.fixture
def staff(client, db):
    client.force_login(get_user_model().objects.create_superuser("boss", password="pw-boss-123"))
    return client


@pytest.mark.django_db
def test_admin_refuses_a_bad_set(staff, bad_set):
    import json

    resp = staff.post("/admin/games/emojiset/add/", {
        "slug": "dupes", "title": "Dupes", "emojis": json.dumps(ANIMALS[:30] + ["🐶"], ensure_ascii=False)})
    assert resp.status_code == 200 and "Each emoji may appear once" in resp.content.decode()
    assert not EmojiSet.objects.filter(slug="dupes").exists()
    resp = staff.post("/admin/games/emojiset/add/", {
        "slug": "fine", "title": "Fine", "emojis": json.dumps(ANIMALS[:24], ensure_ascii=False)})
    assert resp.status_code == 302 and EmojiSet.objects.filter(slug="fine").exists()
    resp = staff.post("/admin/games/round/add/", {
        "title": "x", "emoji_set": bad_set.pk, "keyboard_size": "", "kind": "classic", "currency": "keys",
        "guess_price": "1", "prize_pool": "0", "minutes": "60", "weights": "[40]"})
    assert resp.status_code == 200 and "Each emoji may appear once" in resp.content.decode()
    assert not Round.objects.exists()


# -- settings ------------------------------------------------------------------
ENV_NAMES = ("SECRET_KEY", "DEBUG", "CODEMOJEX_DEV", "DATABASE_URL", "BEHIND_PROXY", "SECURE_HSTS_SECONDS",
             "SECURE_HSTS_PRELOAD", "ALLOWED_HOSTS", "CODEMOJEX_VAR_DIR")


@pytest.fixture
def load_settings(monkeypatch, tmp_path):
    """Run the settings module afresh with exactly the given environment,
    as a production host would load it; returns its names."""
    import runpy

    def load(**env) -> dict:
        for name in ENV_NAMES:
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("CODEMOJEX_VAR_DIR", str(tmp_path / "var"))
        monkeypatch.setenv("ALLOWED_HOSTS", "codemojex.example")
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return runpy.run_path(str(ROOT / "codemojex_site" / "settings.py"))

    return load


def test_production_refuses_to_start_without_a_secret_key(load_settings, tmp_path):
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match="SECRET_KEY is not set and DEBUG is off"):
        load_settings()
    assert not (tmp_path / "var" / "secret_key").exists()  # nothing generated silently
    assert load_settings(SECRET_KEY="k" * 50)["SECRET_KEY"] == "k" * 50
    dev = load_settings(CODEMOJEX_DEV="1")  # ./dev run, ./dev test, ./dev manage
    key = tmp_path / "var" / "secret_key"
    assert dev["SECRET_KEY"] == key.read_text().strip() and len(dev["SECRET_KEY"]) >= 50
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert load_settings(DEBUG="1")["SECRET_KEY"] == dev["SECRET_KEY"]


def test_hsts_preload_only_with_a_one_year_max_age(load_settings):
    s = load_settings(SECRET_KEY="k" * 50)
    assert (s["SECURE_HSTS_SECONDS"], s["SECURE_HSTS_PRELOAD"]) == (365 * 24 * 3600, True)
    s = load_settings(SECRET_KEY="k" * 50, SECURE_HSTS_SECONDS="3600")
    assert (s["SECURE_HSTS_SECONDS"], s["SECURE_HSTS_PRELOAD"]) == (3600, False)
    assert load_settings(SECRET_KEY="k" * 50, SECURE_HSTS_PRELOAD="0")["SECURE_HSTS_PRELOAD"] is False


def test_forwarded_proto_is_trusted_only_behind_a_proxy(load_settings):
    assert "SECURE_PROXY_SSL_HEADER" not in load_settings(SECRET_KEY="k" * 50)
    behind = load_settings(SECRET_KEY="k" * 50, BEHIND_PROXY="1")
    assert behind["SECURE_PROXY_SSL_HEADER"] == ("HTTP_X_FORWARDED_PROTO", "https") and behind["BEHIND_PROXY"]


def test_the_sqlite_file_is_created_owner_only(load_settings, tmp_path):
    old = os.umask(0o022)
    try:
        s = load_settings(SECRET_KEY="k" * 50)
        db = Path(s["DATABASES"]["default"]["NAME"])
        assert db == tmp_path / "var" / "codemojex.sqlite3"
        assert stat.S_IMODE(db.stat().st_mode) == 0o600
        assert stat.S_IMODE((tmp_path / "var").stat().st_mode) == 0o700
        db.chmod(0o644)  # an older, looser file is tightened
        load_settings(SECRET_KEY="k" * 50)
        assert stat.S_IMODE(db.stat().st_mode) == 0o600
    finally:
        os.umask(old)


def test_the_deploy_checks_pass_in_production(tmp_path):
    """A real ``manage.py check --deploy`` in a production environment."""
    out = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=ROOT,
                         env={**{k: v for k, v in os.environ.items() if k in ("PATH", "HOME")},
                              "SECRET_KEY": "x" * 20 + "production-key-with-enough-entropy-1234567890",
                              "CODEMOJEX_VAR_DIR": str(tmp_path / "var"), "ALLOWED_HOSTS": "codemojex.example"},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.django_db
def test_demo_passwords_are_shown_only_by_dev_run(settings, tmp_path):
    from games.management.commands.up import Command as Up

    settings.VAR_DIR = tmp_path
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    passwords = {p.name: p.read_text().strip() for p in tmp_path.glob("demo-*.password")}
    assert set(passwords) >= {"demo-admin.password", "demo-alice.password"}
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in tmp_path.glob("demo-*.password"))
    assert all(pw not in out.getvalue() for pw in passwords.values())  # seed_demo's output goes to logs
    banner = Up()._banner("127.0.0.1", 8000)  # what `./dev run` prints last
    assert passwords["demo-admin.password"] in banner and passwords["demo-alice.password"] in banner


@pytest.mark.django_db
def test_an_overlong_username_at_log_in_is_a_400_not_a_500(client):
    """Django's log-in form never checks the username's length, so a 5,000
    character name reached django-axes' 255-character column (a 500 on
    PostgreSQL). The form refuses it before any authentication runs."""
    from axes.models import AccessAttempt

    resp = client.post("/login/", {"username": "A" * 5000, "password": "whatever"})
    assert resp.status_code == 400
    assert "at most 150 characters" in resp.content.decode()
    assert not AccessAttempt.objects.exists()
