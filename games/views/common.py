"""Helpers shared by the player views."""
from __future__ import annotations

import contextlib
import functools
import unicodedata

from datetime import datetime

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.db import connection
from django.http import JsonResponse
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils import timezone

from .. import locks
from ..models import Lock, Notification, Player, Round, Wallet
from ..players import ensure_player
from ..rows import convert, from_row

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


def addresses():
    """``url()`` bound to the script prefix and URLconf in force now, for
    one page: reading those two (thread- and task-local) on each of a
    page's dozen calls cost more than the cache lookup itself."""
    key = (get_script_prefix(), get_urlconf() or settings.ROOT_URLCONF)

    def page_url(name: str, *args, **kwargs) -> str:
        if kwargs or any(a.__class__ not in (str, int) for a in args):
            return reverse(name, args=args or None, kwargs=kwargs or None)
        return _reverse(*key, name, args)
    return page_url


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
def _player_sql(vendor: str, with_round: bool = False) -> str:
    """The player, wallet and unread count of a user; ``with_round``, also
    a round's fields and the player's locks on it (one row per lock).

    The round's secret and nonce come only once it is settled (``CASE``):
    while it is open the web process never holds them, whatever a page
    goes on to do with the round."""
    qn = connection.ops.quote_name
    player, wallet, note = (qn(m._meta.db_table) for m in (Player, Wallet, Notification))
    select = (f"SELECT {', '.join('p.' + qn(f) for f in _PLAYER_FIELDS)}, "
              f"{', '.join('w.' + qn(f) for f in _WALLET_FIELDS)}, "
              f"(SELECT COUNT(*) FROM {note} n WHERE n.{qn('player_id')} = p.{qn('id')} AND n.{qn('read_at')} IS NULL)")
    joins = f" FROM {player} p LEFT JOIN {wallet} w ON w.{qn('player_id')} = p.{qn('id')}"
    if with_round:
        columns = {f.attname: f.column for f in Round._meta.concrete_fields}
        settled = f"r.{qn('status')} = '{Round.Status.SETTLED}'"
        select += "".join(f", CASE WHEN {settled} THEN r.{qn(columns[f])} END" if f in _SEALED else f", r.{qn(columns[f])}"
                          for f in ROUND_FIELDS)
        select += f", l.{qn('position')}, l.{qn('emoji')}"
        joins += (f" LEFT JOIN {qn(Round._meta.db_table)} r ON r.{qn('id')} = %s"
                  f" LEFT JOIN {qn(Lock._meta.db_table)} l ON l.{qn('round_id')} = r.{qn('id')}"
                  f" AND l.{qn('player_id')} = p.{qn('id')}")
    return select + joins + f" WHERE p.{qn('user_id')} = %s"


_SEALED = ("secret", "nonce")  # read only from a settled round
ROUND_FIELDS = tuple(f.attname for f in Round._meta.concrete_fields)


def _player_from(row) -> Player | None:
    n = len(_PLAYER_FIELDS)
    if row is None or row[n] is None:  # no player yet, or no wallet (row[n] is its primary key)
        return None
    player = from_row(Player, _PLAYER_FIELDS, row[:n])
    player.wallet = from_row(Wallet, _WALLET_FIELDS, row[n:n + len(_WALLET_FIELDS)])
    player.unread = row[n + len(_WALLET_FIELDS)]
    return player


def _player_with_wallet(user_id) -> Player | None:
    with connection.cursor() as cursor:
        cursor.execute(_player_sql(connection.vendor), [user_id])
        return _player_from(cursor.fetchone())


def load_player(user) -> Player:
    """The user's player with its wallet and unread-notification count (the
    page header shows both), in one statement through a plain cursor: the
    ORM's annotated join cost more CPU than the query; made on first use."""
    player = _player_with_wallet(user.pk)
    if player is None:  # first visit (or a wallet lost by hand): make what is missing
        Wallet.objects.get_or_create(player=ensure_player(user))
        player = _player_with_wallet(user.pk)
    return player


@contextlib.contextmanager
def one_round_trip():
    """Statements executed in this block go to PostgreSQL together, in one
    network round trip (psycopg's pipeline mode), and each cursor's rows are
    read when it is first fetched: execute them all, then fetch. Anywhere
    else (SQLite, inside a transaction) the block changes nothing."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        yield
        return
    connection.ensure_connection()
    with connection.connection.pipeline():
        yield


def start_player_and_round(cursor, user, round_id: str) -> None:
    """Send the statement of :func:`load_player_and_round` on ``cursor``."""
    cursor.execute(_player_sql(connection.vendor, with_round=True), [round_id, user.pk])


def load_player_and_round(user, round_id: str, rows: list | None = None) -> tuple[Player, Round | None, dict[int, str]]:
    """``load_player``, and the round (None if there is none) with the
    player's locks on it, in the same one statement (or from its ``rows``,
    sent by :func:`start_player_and_round`). The round's secret and nonce
    are None until it is settled."""
    if rows is None:
        with connection.cursor() as cursor:
            start_player_and_round(cursor, user, round_id)
            rows = cursor.fetchall()
    player = _player_from(rows[0] if rows else None)
    if player is None:  # first visit: make the player, then read the round on its own
        player = load_player(user)
        fields, my_locks = locks.round_with_locks(round_id, player.pk)
        rnd = Round.from_db(connection.alias, ROUND_FIELDS, fields) if fields is not None else None
        if rnd is not None and not rnd.revealed:
            rnd.secret, rnd.nonce = None, None
        return player, rnd, my_locks
    start = len(_PLAYER_FIELDS) + len(_WALLET_FIELDS) + 1
    end = start + len(ROUND_FIELDS)
    if rows[0][start] is None:  # no such round (its id is never NULL)
        return player, None, {}
    rnd = Round.from_db(connection.alias, ROUND_FIELDS, convert(Round, ROUND_FIELDS, rows[0][start:end]))
    return player, rnd, {row[end]: row[end + 1] for row in rows if row[end] is not None}


SESSION_PLAYER = "cm_player"


def remember_player(request, player) -> None:
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
    remember_player(request, player)
    return player


def player_required(view=None, *, json: bool = False, load: bool = True):
    """Log-in required; the view gets ``request.player`` (made on first use,
    so a staff account can play too). A JSON endpoint answers 401 JSON
    instead of redirecting a poller to the login page. A page's player
    comes with its wallet and unread count for the header, in one query;
    ``load=False`` leaves a GET's player to the view, which reads it with
    what it reads anyway (``load_player_and_round``, then ``remember_player``)."""
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
            elif load:
                request.player = load_player(request.user)
                remember_player(request, request.player)
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
