"""Helpers shared by the player views."""
from __future__ import annotations

import functools
import json
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from datetime import timezone as dt_timezone
from operator import itemgetter

import emoji as emoji_data
from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.db import connection
from django.http import JsonResponse
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils import timezone

from ..forms import welcome
from ..models import Guess, LedgerEntry, Lock, Notification, Player, Round, Wallet
from ..players import ensure_player
from ..rows import convert, from_row

_JOINERS = {"\u200d", "\ufe0f", "\ufe0e"}


def _cldr_name(emoji: str) -> str | None:
    """The emoji's name in the Unicode emoji data (the ``emoji`` library's
    CLDR short names), tried as sent, without and with the emoji
    presentation selector; None for a string that is not one emoji."""
    for form in (emoji, emoji.replace("\ufe0f", ""), emoji + "\ufe0f"):
        data = emoji_data.EMOJI_DATA.get(form)
        if data is not None:
            return data["en"].strip(":").replace("_", " ")
    return None


@functools.lru_cache(maxsize=4096)
def emoji_name(emoji: str) -> str:
    """A readable name for an emoji, for accessible button labels.

    A sequence is named as a whole, as the Unicode emoji data names it
    (🐈‍⬛ "black cat", 🐕‍🦺 "service dog"): the names of its parts
    ("cat black large square") say something else. Only a string the data
    does not know falls back to its code points' names, and a button label
    is never empty."""
    name = _cldr_name(emoji)
    if name:
        return name
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


# The addresses the round page links to: the two of the site and the five of its round.
_ROUND_PAGE_LINKS = ("lobby", "rules")
_ROUND_LINKS = ("leaderboard", "watch", "compose", "guess", "my_guesses")


@functools.lru_cache(maxsize=512)
def _round_addresses(prefix: str, urlconf: str, round_id: str) -> dict[str, str]:
    return {**{name: _reverse(prefix, urlconf, name, ()) for name in _ROUND_PAGE_LINKS},
            **{name: _reverse(prefix, urlconf, name, (round_id,)) for name in _ROUND_LINKS}}


def round_addresses(round_id: str) -> dict[str, str]:
    """What the round page links to, by URL name (``{{ links.watch }}``):
    ``url(name, round_id)`` for its round's addresses and ``url(name)``
    for the lobby and the rules, put together once per round and process
    (a dozen calls through the template cost more than the page's own
    values)."""
    return _round_addresses(get_script_prefix(), get_urlconf() or settings.ROOT_URLCONF, round_id)


def forget_addresses() -> None:
    """After a test changes the URLconf or the script name."""
    _reverse.cache_clear()
    _round_addresses.cache_clear()


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
ROUND_FIELDS = tuple(f.attname for f in Round._meta.concrete_fields)
_SEALED = ("secret", "nonce")  # read only from a settled round

# My guesses in a round travel as one JSON column, so a page that shows them
# with the round (and the player) is one statement on one cursor: an array of
# [id, emojis_final, status, total, breakdown, created_at] (GUESS_JSON) for
# the newest MAX_GUESSES_SHOWN.
MAX_GUESSES_SHOWN = 200
GUESS_JSON = ("id", "emojis_final", "status", "total", "breakdown", "created_at")
_GUESS_ATTNAMES = ("id", "player_id", "round_id", *GUESS_JSON[1:])  # model order, for Guess.from_db
# How each database builds JSON: (aggregate, array, a JSON column as JSON).
_JSON_SQL = {"postgresql": ("json_agg", "json_build_array", "{}"),
             "sqlite": ("json_group_array", "json_array", "json({})")}


def _qn(name: str) -> str:
    return connection.ops.quote_name(name)


def _settled() -> str:
    return f"r.{_qn('status')} = '{Round.Status.SETTLED}'"


def _json_of_my_guesses(vendor: str, player: str) -> str:
    """A scalar subquery over round ``r``: the newest ``MAX_GUESSES_SHOWN``
    guesses of ``player`` (a column or a placeholder) as one JSON array.
    The per-position breakdown comes only from a settled round (``CASE``):
    before that it would say where the secret's emojis are, so the web
    process never holds it. (Not every database keeps the subquery's order
    in the array: :func:`guesses_from_json` sorts it.)"""
    agg, array, as_json = _JSON_SQL[vendor]
    columns = {f.attname: f.column for f in Guess._meta.concrete_fields}
    items = {f: f"g.{_qn(columns[f])}" for f in GUESS_JSON}
    for f in ("emojis_final", "breakdown"):
        items[f] = as_json.format(items[f])
    items["breakdown"] = f"CASE WHEN {_settled()} THEN {items['breakdown']} END"
    inner = ", ".join(_qn(columns[f]) for f in GUESS_JSON)
    return (f"(SELECT {agg}({array}({', '.join(items[f] for f in GUESS_JSON)})) FROM "
            f"(SELECT {inner} FROM {_qn(Guess._meta.db_table)} WHERE {_qn('round_id')} = r.{_qn('id')} "
            f"AND {_qn('player_id')} = {player} ORDER BY {_qn('id')} DESC LIMIT {MAX_GUESSES_SHOWN}) g)")


def _json_of_my_locks(vendor: str) -> str:
    """A scalar subquery over player ``p`` and round ``r``: my locks as one
    JSON array of [position, emoji]."""
    agg, array, _ = _JSON_SQL[vendor]
    return (f"(SELECT {agg}({array}(l.{_qn('position')}, l.{_qn('emoji')})) FROM {_qn(Lock._meta.db_table)} l "
            f"WHERE l.{_qn('round_id')} = r.{_qn('id')} AND l.{_qn('player_id')} = p.{_qn('id')})")


def _json(value) -> list:
    """A JSON column as the cursor hands it back: text on SQLite, decoded
    on PostgreSQL (psycopg decodes ``json``; Django reads only its
    ``jsonb`` columns as text)."""
    if value is None:
        return []
    return json.loads(value) if isinstance(value, str) else value


def _when(text: str) -> datetime:
    """A timestamp inside JSON: ISO 8601 with its offset from PostgreSQL,
    naive UTC from SQLite (as Django stores it there)."""
    when = datetime.fromisoformat(text)
    return when if when.tzinfo is not None else when.replace(tzinfo=dt_timezone.utc)


def guesses_from_json(value, rnd: Round, player_id: str) -> list[Guess]:
    """My guesses from their JSON column, newest first, as ``Guess`` rows
    that know their round (``feedback_visible`` reads it) without a query."""
    alias, out = connection.alias, []
    for gid, emojis, status, total, breakdown, created in sorted(_json(value), key=itemgetter(0), reverse=True):
        g = Guess.from_db(alias, _GUESS_ATTNAMES,
                          (gid, player_id, rnd.pk, emojis, status, total, breakdown, _when(created)))
        g.round = rnd
        out.append(g)
    return out


@functools.cache
def _player_sql(vendor: str, with_round: bool = False) -> str:
    """The player, wallet and unread count of a user; ``with_round``, also
    a round's fields, my locks on it and my guesses in it (JSON columns),
    in the same one row.

    The round's secret and nonce come only once it is settled (``CASE``):
    while it is open the web process never holds them, whatever a page
    goes on to do with the round."""
    player, wallet, note = (_qn(m._meta.db_table) for m in (Player, Wallet, Notification))
    select = (f"SELECT {', '.join('p.' + _qn(f) for f in _PLAYER_FIELDS)}, "
              f"{', '.join('w.' + _qn(f) for f in _WALLET_FIELDS)}, "
              f"(SELECT COUNT(*) FROM {note} n WHERE n.{_qn('player_id')} = p.{_qn('id')} AND n.{_qn('read_at')} IS NULL)")
    joins = f" FROM {player} p LEFT JOIN {wallet} w ON w.{_qn('player_id')} = p.{_qn('id')}"
    if with_round:
        columns = {f.attname: f.column for f in Round._meta.concrete_fields}
        select += "".join(f", CASE WHEN {_settled()} THEN r.{_qn(columns[f])} END" if f in _SEALED
                          else f", r.{_qn(columns[f])}" for f in ROUND_FIELDS)
        select += f", {_json_of_my_locks(vendor)}, {_json_of_my_guesses(vendor, 'p.' + _qn('id'))}"
        joins += f" LEFT JOIN {_qn(Round._meta.db_table)} r ON r.{_qn('id')} = %s"
    return select + joins + f" WHERE p.{_qn('user_id')} = %s"


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


def _make_player(user) -> None:
    """A first visit (or a wallet lost by hand): make what is missing. An
    account that never had a ledger entry -- made by ``createsuperuser`` or
    in the admin, not by signing up -- gets the starting balance, as a
    sign-up does."""
    player = ensure_player(user)
    Wallet.objects.get_or_create(player=player)
    if not LedgerEntry.objects.filter(player=player).exists():
        welcome(player)


def load_player(user) -> Player:
    """The user's player with its wallet and unread-notification count (the
    page header shows both), in one statement through a plain cursor: the
    ORM's annotated join cost more CPU than the query; made on first use."""
    player = _player_with_wallet(user.pk)
    if player is None:
        _make_player(user)
        player = _player_with_wallet(user.pk)
    return player


@dataclass
class RoundPage:
    """What the round page reads from the database."""
    player: Player
    round: Round | None  # None: there is no such round
    locks: dict[int, str]
    guesses: list[Guess]  # newest first


def _round_page_row(user, round_id: str):
    with connection.cursor() as cursor:
        cursor.execute(_player_sql(connection.vendor, with_round=True), [round_id, user.pk])
        return cursor.fetchone()


def load_round_page(user, round_id: str) -> RoundPage:
    """The player (wallet, unread count), the round, my locks on it and my
    guesses in it: one statement (a first visit makes the player first).
    The round's secret and nonce are None until it is settled."""
    row = _round_page_row(user, round_id)
    player = _player_from(row)
    if player is None:
        _make_player(user)
        row = _round_page_row(user, round_id)
        player = _player_from(row)
    start = len(_PLAYER_FIELDS) + len(_WALLET_FIELDS) + 1
    end = start + len(ROUND_FIELDS)
    if row[start] is None:  # no such round (its id is never NULL)
        return RoundPage(player, None, {}, [])
    rnd = Round.from_db(connection.alias, ROUND_FIELDS, convert(Round, ROUND_FIELDS, row[start:end]))
    my_locks = {position: emoji for position, emoji in _json(row[end])}
    return RoundPage(player, rnd, my_locks, guesses_from_json(row[end + 1], rnd, player.pk))


@functools.cache
def _round_and_guesses_sql(vendor: str, fields: tuple[str, ...]) -> str:
    columns = {f.attname: f.column for f in Round._meta.concrete_fields}
    return (f"SELECT {''.join('r.' + _qn(columns[f]) + ', ' for f in fields)}{_json_of_my_guesses(vendor, '%s')} "
            f"FROM {_qn(Round._meta.db_table)} r WHERE r.{_qn('id')} = %s")


def _round_and_guesses_row(round_id: str, player_id: str, fields: tuple[str, ...]):
    if set(fields) & set(_SEALED):
        raise ValueError("the secret and nonce are read only through the round page's CASE")
    with connection.cursor() as cursor:
        cursor.execute(_round_and_guesses_sql(connection.vendor, fields), [player_id, round_id])
        return cursor.fetchone()


def round_and_my_guesses(round_id: str, player_id: str, fields: tuple[str, ...]) -> tuple[Round | None, list[Guess]]:
    """The round (just ``fields``: never the sealed ones) and my guesses in
    it, newest first, in one statement; (None, []) when there is no such
    round."""
    row = _round_and_guesses_row(round_id, player_id, fields)
    if row is None:
        return None, []
    n = len(fields)
    rnd = Round.from_db(connection.alias, fields, convert(Round, fields, row[:n]))
    return rnd, guesses_from_json(row[n], rnd, player_id)


def open_rounds() -> list[Round]:
    """Rounds taking guesses now, the soonest to end first (the lobby's, and the landing page's)."""
    return list(Round.objects.filter(status=Round.Status.OPEN, ends_at__gt=timezone.now())
                .defer("secret", "nonce", "keyboard").order_by("ends_at"))


def my_guesses_in(rnd: Round, player_id: str) -> list[Guess]:
    """My guesses in ``rnd``, newest first, in one statement."""
    row = _round_and_guesses_row(rnd.pk, player_id, ())
    return guesses_from_json(row[0], rnd, player_id) if row is not None else []


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
    what it reads anyway (``load_round_page``, then ``remember_player``)."""
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
