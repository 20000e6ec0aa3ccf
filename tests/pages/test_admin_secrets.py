"""While a round is open nobody -- superuser included -- can read or infer
its secret through the admin: no field, filter, search, sort or page shows
the secret, the nonce, a guess's emojis or breakdown, or a sealed blind
total. Lookups on them answer a 400 page; so does any malformed query
string. After settlement they are shown."""
import json
import re
from urllib.parse import quote

import pytest
from django.contrib.auth import get_user_model

from games.guesses import submit
from games.locks import set_lock
from games.models import Guess, Lock, Player, Round, RoundEntry
from games.workers import score_guess

from .conftest import drain, secret_forms

pytestmark = pytest.mark.django_db


@pytest.fixture
def root(client):
    client.force_login(get_user_model().objects.create_superuser("root", password="pw-root-123"))
    return client


@pytest.fixture
def live(make_player, make_round, django_capture_on_commit_callbacks):
    """An open classic and an open blind round, each with scored guesses,
    one queued guess, and a lock."""
    classic, blind = make_round(title="Open classic"), make_round(title="Open blind", kind="blind")
    amy, ben = make_player("amy", keys=20), make_player("ben", keys=20)
    with django_capture_on_commit_callbacks(execute=True):
        for rnd in (classic, blind):
            submit(amy, rnd, rnd.keyboard[:6])
            submit(ben, rnd, rnd.keyboard[3:9])
    drain("cm", score_guess)
    set_lock(amy, blind, 0, blind.keyboard[0])
    with django_capture_on_commit_callbacks(execute=True):
        submit(ben, blind, blind.keyboard[6:12])  # stays queued: nothing drains it
    return {"classic": classic, "blind": blind, "amy": amy, "ben": ben}


def refused(resp) -> bool:
    return resp.status_code == 400 and "Bad request" in resp.content.decode()


@pytest.mark.parametrize("query", [
    "secret__0={e}", "secret__contains=[\"{e}\"]", "secret__contains=[\"a\"]", "secret__icontains={e}",
    "secret={e}", "secret__startswith=[", "nonce__startswith=a", "nonce__gt=", "nonce=",
    "guesses__breakdown__contains=1", "guesses__emojis_final__0={e}", "entries__best_total__gte=1",
    "id__regex=(", "id__iregex=(", "title__icontains=x", "commitment__startswith=a", "status__exact=open%00",
    "o=x", "o=99", "o=1.x", "p=0", "p=abc", "p=-1", "p=1e3", "q=%00", "q=" + "x" * 201, "kind__exact=blind&secret__1={e}",
])
def test_filter_attacks_on_rounds_answer_400(root, live, query):
    e = quote(live["blind"].secret[0])
    resp = root.get("/admin/games/round/?" + query.format(e=e))
    assert refused(resp), (query, resp.status_code)


@pytest.mark.parametrize("query", [
    "emojis_final__0={e}", "emojis_final__contains=[\"{e}\"]", "emojis_sent__1={e}", "breakdown__isnull=False",
    "breakdown__0__found_at=0", "breakdown__contains=[{{\"found_at\": 0}}]", "total__gte=100", "total=600",
    "total__lt=50", "round__secret__0={e}", "round__nonce__startswith=a", "round__kind=blind", "id__regex=(",
    "job_id__regex=[", "o=4", "o=-4", "o=1.4", "o=10", "status__exact=scored&total__gte=1",
])
def test_filter_attacks_on_guesses_answer_400(root, live, query):
    e = quote(live["blind"].secret[0])
    resp = root.get("/admin/games/guess/?" + query.format(e=e))
    assert refused(resp), (query, resp.status_code)


@pytest.mark.parametrize("url", [
    "/admin/games/roundentry/?best_total__gte=1", "/admin/games/roundentry/?o=3",
    "/admin/games/roundentry/?round__secret__0=a", "/admin/games/lock/?emoji=a", "/admin/games/lock/?o=3",
    "/admin/games/player/?guesses__emojis_final__0=a", "/admin/games/player/?guesses__total__gte=1",
    "/admin/games/ledgerentry/?player__guesses__breakdown__isnull=False", "/admin/games/wallet/?keys__gte=0",
    "/admin/games/notification/?round__secret__0=a", "/admin/games/operatoraction/?id__regex=(",
])
def test_sealed_lookups_through_relations_answer_400(root, live, url):
    assert refused(root.get(url)), url


def test_the_controls_a_list_offers_still_work(root, live):
    assert root.get("/admin/games/round/?status__exact=open&kind__exact=blind&o=1.-2&p=1").status_code == 200
    assert root.get("/admin/games/round/?p=999").status_code == 200  # Django shows the last page
    assert root.get("/admin/games/guess/?o=5.-1").status_code == 200  # price, then id
    assert root.get("/admin/games/guess/?status__exact=scored&q=amy").status_code == 200
    assert root.get("/admin/games/ledgerentry/?currency__exact=keys&reason__exact=guess").status_code == 200
    found = root.get("/admin/games/guess/?q=" + live["blind"].pk)
    assert found.status_code == 200 and found.context["cl"].result_count == 3


def test_sorting_by_a_sealed_column_is_not_offered(root, live):
    html = root.get("/admin/games/guess/").content.decode()
    assert 'class="sortable column-shown_total' not in html and "column-shown_total" in html


def _scan_urls(live, valkey) -> list[str]:
    from echomq.contrib.django import get_queue

    rounds = [live["classic"], live["blind"]]
    urls = ["/admin/", "/admin/games/", "/admin/queues/", "/admin/queues/cm/",
            f"/admin/queues/?q={live['amy'].pk}", f"/admin/queues/?q={live['blind'].pk}",
            f"/admin/queues/cm/lanes/{live['ben'].pk}/"]
    for model in ("emojiset", "round", "player", "wallet", "ledgerentry", "guess", "roundentry", "lock",
                  "notification", "operatoraction"):
        urls += [f"/admin/games/{model}/", f"/admin/games/{model}/?all="]
    for rnd in rounds:
        urls += [f"/admin/games/round/{rnd.pk}/change/", f"/admin/games/round/{rnd.pk}/history/",
                 f"/admin/games/round/{rnd.pk}/leaderboard/", f"/admin/games/guess/?q={rnd.pk}"]
    for g in Guess.objects.all():
        urls += [f"/admin/games/guess/{g.pk}/change/", f"/admin/games/guess/{g.pk}/history/",
                 f"/admin/queues/cm/jobs/{g.job_id}/", f"/admin/queues/?q={g.pk}"]
        if get_queue("cm").job(g.job_id):
            urls.append(f"/admin/queues/cm/jobs/{g.job_id}/remove/")
    urls += [f"/admin/games/roundentry/{e.pk}/change/" for e in RoundEntry.objects.all()]
    urls += [f"/admin/games/lock/{lk.pk}/change/" for lk in Lock.objects.all()]
    urls += [f"/admin/games/player/{p.pk}/change/" for p in Player.objects.all()]
    return urls


def test_no_admin_page_shows_an_open_rounds_secret(root, live, valkey):
    """Every page of the console, for a superuser, while both rounds are open
    (with the confirmation pages of Settle now and Void too)."""
    rnd_forms = {r.pk: secret_forms(r) for r in (live["classic"], live["blind"])}
    pages = {}
    for url in _scan_urls(live, valkey):
        resp = root.get(url)
        assert resp.status_code == 200, (url, resp.status_code)
        pages[url] = resp.content.decode()
    for action in ("void", "settle_now"):
        resp = root.post("/admin/games/round/", {"action": action,
                                                 "_selected_action": [live["classic"].pk, live["blind"].pk]})
        pages[action] = resp.content.decode()
    assert len(pages) > 60
    for url, html in pages.items():
        for rid, forms in rnd_forms.items():
            for form in forms:
                assert form not in html, (url, rid, form)
    assert Round.objects.filter(status="open").count() == 2  # the scan changed nothing


def test_guess_pages_seal_emojis_breakdown_and_blind_totals(root, live):
    blind_guess = Guess.objects.filter(round=live["blind"], status="scored").first()
    classic_guess = Guess.objects.filter(round=live["classic"], status="scored").first()
    html = root.get(f"/admin/games/guess/{blind_guess.pk}/change/").content.decode()
    readonly = re.findall(r'<div class="readonly">(.*?)</div>', html, re.S)
    assert readonly.count("sealed until the reveal") == 4  # emojis sent, after locks, total, breakdown
    assert json.dumps(blind_guess.breakdown) not in html and "found_at" not in html
    html = root.get(f"/admin/games/guess/{classic_guess.pk}/change/").content.decode()
    assert f'<div class="readonly">{classic_guess.total}</div>' in html  # classic totals are not sealed
    assert "found_at" not in html
    entries = root.get("/admin/games/roundentry/").content.decode()
    assert entries.count("sealed until the reveal") == 4  # best total and best guess of the blind round's two entries
    assert "sealed until the reveal" in root.get("/admin/games/lock/").content.decode()


def test_everything_is_shown_after_settlement(root, live):
    from games import settlement

    rnd = live["blind"]
    settlement.settle_round(rnd.pk, force=True)
    rnd.refresh_from_db()
    assert rnd.status == "settled"
    html = root.get(f"/admin/games/round/{rnd.pk}/change/").content.decode()
    assert " ".join(rnd.secret) in html and rnd.nonce in html
    g = Guess.objects.filter(round=rnd).first()
    html = root.get(f"/admin/games/guess/{g.pk}/change/").content.decode()
    assert "found_at" in html and "sealed until the reveal" not in html
    board = root.get(f"/admin/games/round/{rnd.pk}/leaderboard/").content.decode()
    assert "/600" in board and "reached after" in board
    # Filters on sealed fields stay refused even now: a list spans open rounds too.
    assert refused(root.get("/admin/games/round/?secret__0=a"))


MALFORMED = ["%00=1", "q=%00", "o=%00", "p=%00", "o=-", "o=1..2", "p=", "p=%EF%BC%91", "all=%00",
             "_to_field=secret", "_to_field=nonce&_popup=1", "pk__regex=(", "id__in=", "id__in=a,%00",
             "status__exact=%ff", "status__isnull=maybe", "e=1&secret=1", "q=" + "%F0%9F%90%B6" * 300,
             "x" * 300 + "=1", "__=1", "=1", "%ZZ=1"]


@pytest.mark.parametrize("model", ["round", "guess", "player", "wallet", "ledgerentry", "roundentry", "lock",
                                   "notification", "emojiset", "operatoraction"])
def test_any_malformed_changelist_query_answers_400(root, live, model):
    for query in MALFORMED:
        resp = root.get(f"/admin/games/{model}/?{query}")
        assert resp.status_code == 400, (model, query, resp.status_code)


def test_other_admin_pages_never_answer_500_to_odd_query_strings(root, live):
    rnd = live["blind"]
    g = Guess.objects.filter(round=rnd).first()
    pages = [f"/admin/games/round/{rnd.pk}/change/", f"/admin/games/round/{rnd.pk}/history/",
             f"/admin/games/round/{rnd.pk}/leaderboard/", "/admin/games/round/add/", f"/admin/games/guess/{g.pk}/change/",
             "/admin/autocomplete/", "/admin/games/round/NOPE/change/", "/admin/queues/", "/admin/queues/cm/"]
    for page in pages:
        for query in MALFORMED + ["_changelist_filters=secret__0%3Da", "emoji_set=%00", "app_label=games&model_name=round&field_name=secret&term=a"]:
            resp = root.get(f"{page}?{query}")
            assert resp.status_code < 500, (page, query, resp.status_code)
            for form in secret_forms(rnd):
                assert form not in resp.content.decode(), (page, query)
