"""Helpers shared by the player views."""
from __future__ import annotations

import functools
import unicodedata

from datetime import datetime

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.db import connection
from django.http import JsonResponse
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils import timezone

from ..models import Notification, Player, Wallet
from ..players import ensure_player
from ..rows import from_row

_JOINERS = {"\u200d", "\ufe0f", "\ufe0e"}


@functools.lru_cache(maxsize=4096)
def emoji_name(emoji: str) -> str:
    """A readable name for an emoji, for accessible button labels.

    Screen readers name most single emojis themselves, but not every one in
    a ZWJ sequence, and a button label must never be empty: so join the
    Unicode names of the parts (🐕‍🦺 -> "guide dog safety vest")."""
    parts = [unicodedata.name(ch, "").lower() for ch in emoji if ch not in _JOINERS]
    return " ".join(p for p in parts if p) or "emoji"


@functools.lru_cache(maxsize=4096)
def _reverse(prefix: str, urlconf: str, name: str, args: tuple) -> str:
    return reverse(name, urlconf=urlconf, args=args or None)


def url(name: str, *args, **kwargs) -> str:
    """``reverse(name, args=args)``, and the pages' ``{{ url('round', rnd.pk) }}``
    (Django's ``{% url %}``). A page reverses a dozen addresses and every
    guess redirects to one; each is reversed once per process (for the
    script prefix and URLconf in force), then read from the cache."""
    if kwargs or any(a.__class__ not in (str, int) for a in args):  # only ids make cache keys
        return reverse(name, args=args or None, kwargs=kwargs or None)
    return _reverse(get_script_prefix(), get_urlconf() or settings.ROOT_URLCONF, name, args)


def forget_addresses() -> None:
    """After a test changes the URLconf or the script name."""
    _reverse.cache_clear()


def amount(n: int, currency: str, *, signed: bool = False) -> str:
    """``amount(1, "keys")`` -> "1 key"; ``amount(3, "keys")`` -> "3 keys";
    a change reads ``amount(-1, "keys", signed=True)`` -> "−1 key" (the unit
    follows the size, never the sign: today's "-1 keys" is wrong)."""
    unit = currency[:-1] if abs(n) == 1 and currency.endswith("s") else currency
    sign = ("+" if n > 0 else "−" if n < 0 else "") if signed else ("−" if n < 0 else "")
    return f"{sign}{abs(n)} {unit}"


def _unit(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def duration(seconds: float) -> str:
    """A span in words for players: "less than a minute", "1 minute",
    "2 hours 5 minutes", "3 days 1 hour" (two units at most)."""
    s = int(max(seconds, 0))
    if s < 60:
        return "less than a minute"
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes = s // 60
    parts = [(days, "day"), (hours, "hour"), (minutes, "minute")]
    shown = [_unit(n, w) for n, w in parts if n][:2]
    return " ".join(shown)


def until(when: datetime, now: datetime | None = None) -> str:
    return duration((when - (now or timezone.now())).total_seconds())


def since(when: datetime, now: datetime | None = None) -> str:
    """"5 minutes ago", "less than a minute ago"."""
    return duration(((now or timezone.now()) - when).total_seconds()) + " ago"


_PLAYER_FIELDS = tuple(f.attname for f in Player._meta.concrete_fields)
_WALLET_FIELDS = tuple(f.attname for f in Wallet._meta.concrete_fields)


@functools.cache
def _player_sql(vendor: str) -> str:
    qn = connection.ops.quote_name
    player, wallet, note = (qn(m._meta.db_table) for m in (Player, Wallet, Notification))
    return (f"SELECT {', '.join('p.' + qn(f) for f in _PLAYER_FIELDS)}, "
            f"{', '.join('w.' + qn(f) for f in _WALLET_FIELDS)}, "
            f"(SELECT COUNT(*) FROM {note} n WHERE n.{qn('player_id')} = p.{qn('id')} AND n.{qn('read_at')} IS NULL) "
            f"FROM {player} p LEFT JOIN {wallet} w ON w.{qn('player_id')} = p.{qn('id')} "
            f"WHERE p.{qn('user_id')} = %s")


def _player_with_wallet(user_id) -> Player | None:
    with connection.cursor() as cursor:
        cursor.execute(_player_sql(connection.vendor), [user_id])
        row = cursor.fetchone()
    n = len(_PLAYER_FIELDS)
    if row is None or row[n] is None:  # no player yet, or no wallet (row[n] is its primary key)
        return None
    player = from_row(Player, _PLAYER_FIELDS, row[:n])
    player.wallet = from_row(Wallet, _WALLET_FIELDS, row[n:-1])
    player.unread = row[-1]
    return player


def load_player(user) -> Player:
    """The user's player with its wallet and unread-notification count (the
    page header shows both), in one statement through a plain cursor: the
    ORM's annotated join cost more CPU than the query; made on first use."""
    player = _player_with_wallet(user.pk)
    if player is None:  # first visit (or a wallet lost by hand): make what is missing
        Wallet.objects.get_or_create(player=ensure_player(user))
        player = _player_with_wallet(user.pk)
    return player


SESSION_PLAYER = "cm_player"


def _remember_player(request, player) -> None:
    """Keep (user pk, player id) in the session, so the JSON poll needs no
    query to know who is asking (written once per login)."""
    pair = [request.user.pk, player.pk]
    if request.session.get(SESSION_PLAYER) != pair:
        request.session[SESSION_PLAYER] = pair


def _light_player(request) -> Player:
    """The asking player for a JSON endpoint: an unsaved ``Player`` carrying
    only the ids, from the session when it has them (no query)."""
    pair = request.session.get(SESSION_PLAYER)
    if isinstance(pair, list) and len(pair) == 2 and pair[0] == request.user.pk:
        return Player(pk=pair[1], user_id=request.user.pk)
    player = load_player(request.user)
    _remember_player(request, player)
    return player


def player_required(view=None, *, json: bool = False):
    """Log-in required; the view gets ``request.player`` (made on first use,
    so a staff account can play too). A JSON endpoint answers 401 JSON
    instead of redirecting a poller to the login page. A page's player
    comes with its wallet and unread count for the header, in one query."""
    def wrap(func):
        @functools.wraps(func)
        def inner(request, *args, **kwargs):
            if not request.user.is_authenticated:
                if json:
                    return JsonResponse({"error": "Log in first."}, status=401)
                return redirect_to_login(request.get_full_path())
            if json:
                request.player = _light_player(request)
            elif request.method == "POST":
                # A post redirects on success: the cached bare player (no
                # query); a refused one's header reads what it needs.
                request.player = ensure_player(request.user)
            else:
                request.player = load_player(request.user)
                _remember_player(request, request.player)
            return func(request, *args, **kwargs)
        return inner
    return wrap(view) if view is not None else wrap


def ledger_ref(reference: str, titles: dict | None = None) -> dict:
    """A ledger reference as a player reads it: a round id becomes the
    round's title (a link), a guess id "a guess in <round>", and anything
    else -- a grant's note -- stays as written. ``titles`` maps round and
    guess ids to (round id, title); the full id stays in ``id``."""
    from echomq import ids

    titles = titles or {}
    ref = reference or ""
    if ids.is_valid(ref) and ref.startswith(("RND", "GES")) and ref in titles:
        round_id, title = titles[ref]
        label = title if ref.startswith("RND") else f"Guess in {title}"
        return {"kind": ref[:3].lower(), "id": ref, "round": round_id, "label": label}
    if ids.is_valid(ref) and ref.startswith(("RND", "GES")):
        return {"kind": ref[:3].lower(), "id": ref, "round": ref if ref.startswith("RND") else None,
                "label": ("Round " if ref.startswith("RND") else "Guess ") + ref[-6:]}
    return {"kind": "note", "id": ref, "round": None, "label": ref}
