"""The Jinja2 environment of the player pages (``games/jinja2/``).

The pages were Django templates; Jinja2 compiles each one to a Python
function, which renders the round page -- the answer every guess redirects
to -- several times faster. What the Django template language did on its
own is done here, so the pages come out byte for byte as before:

- ``{{ value }}`` escapes ``"`` and ``'`` as Django does (``&quot;``,
  ``&#x27;``) and localizes dates and numbers like Django's variable nodes
  (``finalize``);
- a missing attribute or key renders empty rather than failing, at any
  depth (``ChainableUndefined``, Django's ``string_if_invalid``), and a
  template file keeps its final newline;
- ``url()`` (``views.common.url``), ``static()``, the ``date`` and ``pluralize`` filters are
  Django's; ``amount``, ``until``, ... are the game's (``views.common``),
  and ``header_nav()`` is the page header's links, balances and unread count.

``request`` and ``csrf_token`` come from Django's Jinja2 backend; ``user``,
``perms``, ``messages`` and ``csrf_input`` (one token per page, see
``csrf``) from the context processors named in ``settings.TEMPLATES``.
Methods are called explicitly in Jinja2 (``rnd.get_status_display()``).
``row.name`` on a dict reads its key first, as Django's templates do (and
without Jinja2's failed attribute lookup first: a page reads a hundred).
"""
from __future__ import annotations

import datetime
import functools
from decimal import Decimal

from django.core.signals import setting_changed
from django.dispatch import receiver
from django.middleware.csrf import get_token
from django.template.defaultfilters import date as _date
from django.template.defaultfilters import pluralize
from django.templatetags.static import static as _static
from django.utils.formats import localize
from django.utils.html import conditional_escape, escape, format_html
from django.utils.safestring import mark_safe
from django.utils.timezone import template_localtime
from jinja2 import ChainableUndefined, Environment, pass_context

from . import push
from .models import Notification, Wallet
from .views import common

_LOCALIZED = (float, Decimal, datetime.date, datetime.time)


def finalize(value):
    """What Django's ``{{ value }}`` does before escaping: dates in the
    current time zone, numbers and dates localized, and ``"``/``'``
    escaped Django's way (Jinja2's ``escape`` then leaves the result
    alone). Plain strings and ints, nearly every value, pass through (an
    int is what Django prints too while USE_THOUSAND_SEPARATOR is off)."""
    cls = value.__class__
    if cls is str:
        return escape(value) if '"' in value or "'" in value else value
    if cls is int or hasattr(value, "__html__"):
        return value
    if isinstance(value, _LOCALIZED):
        value = localize(template_localtime(value))
    value = str(value)
    return escape(value) if '"' in value or "'" in value else value


url = common.url  # {{ url('round', rnd.pk) }}: Django's {% url %}, reversed once per process


@functools.lru_cache(maxsize=256)
def static(path: str) -> str:
    """``{{ static('games/site.css') }}``, Django's ``{% static %}``, looked
    up in the static files manifest once per process."""
    return _static(path)


@receiver(setting_changed)
def _forget_addresses(setting, **kwargs):
    """A test that changes the URLconf or the static files settings gets fresh addresses."""
    if setting in ("ROOT_URLCONF", "FORCE_SCRIPT_NAME") or setting.startswith(("STATIC", "STORAGES")):
        common.forget_addresses()
        static.cache_clear()


class _CsrfInput:
    """The form's hidden CSRF input, made on first use (Django's
    ``get_token``) and then reused: one token per page, as Django's
    ``{% csrf_token %}`` gives (the backend's ``csrf_input`` masks a new
    token at every use), and none asked for -- so no CSRF cookie set -- on
    a page without a form."""

    __slots__ = ("_request", "_html")

    def __init__(self, request):
        self._request, self._html = request, None

    def __html__(self) -> str:
        if self._html is None:
            self._html = format_html('<input type="hidden" name="csrfmiddlewaretoken" value="{}">',
                                     get_token(self._request))
        return self._html

    __str__ = __html__


def csrf(request) -> dict:
    """Context processor (``settings.TEMPLATES``): ``csrf_input``, once per
    page, and ``url()`` bound to this request's script prefix and URLconf."""
    return {"csrf_input": _CsrfInput(request), "url": common.addresses()}


def header_status(context) -> dict | None:
    """The signed-in player's balances and unread notification count (the
    page header, error pages included)."""
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return None
    player = getattr(request, "player", None)
    if player is not None and hasattr(player, "unread"):  # loaded by player_required, no query
        return {"unread": player.unread, "wallet": getattr(player, "wallet", None)}
    player = player or getattr(user, "player", None)
    if player is None:
        return {"unread": 0, "wallet": None}
    return {
        "unread": Notification.objects.filter(player=player, read_at__isnull=True).count(),
        "wallet": Wallet.objects.filter(player=player).first(),
    }


# The header's navigation. It is on every player page and was a third of the
# round page's template work (a dozen calls and interpolations in Jinja2).
# Its six addresses are the same on every page a process serves (for one
# script prefix and URLconf), so the markup around a player's own values is
# escaped and put together once per set of addresses (``_player_nav``); a
# page fills in only the balances, the unread count, the CSRF field and the
# name, each escaped as ``format_html`` escapes it.
_NAV_PLAYER = (
    '\n      <a href="{lobby}">Lobby</a>'
    '\n      <a href="{rules}">Rules</a>'
    '\n      <a href="{me}">Profile</a>'
    '\n      <a href="{wallet}" aria-label="Wallet{wallet_words}">'
    '\n        Wallet{balances}</a>'
    '\n      <a href="{notifications}" aria-label="Notifications, {unread} unread" data-notes>Notifications{badge}</a>'
    '\n      <form method="post" action="{logout}" class="inline">{csrf_input}'
    '\n        <button type="submit" class="link">Log out {username}</button>'
    '\n      </form>\n    ')
_NAV_VISITOR = ('\n      <a href="{rules}">Rules</a>'
                '\n      <a href="{login}">Log in</a>'
                '\n      <a href="{signup}">Sign up</a>\n    ')
_BALANCES = ' <span class="bal" aria-hidden="true">🔑{} 📎{} 💎{}</span>'
_BADGE = ' <span class="badge" data-unread>{}</span>'


def _text(value) -> str:
    """``value`` as ``format_html`` puts it in: escaped, unless it is an
    int (the balances and the count), whose digits need no escaping."""
    return str(value) if value.__class__ is int else conditional_escape(value)


_NAV_ADDRESSES = ("lobby", "rules", "me", "wallet", "notifications", "logout")
_NAV_VALUES = ("wallet_words", "balances", "unread", "badge", "csrf_input", "username")


@functools.lru_cache(maxsize=64)
def _player_nav(addresses: tuple[str, ...]) -> str:
    """``_NAV_PLAYER`` with these addresses (``_NAV_ADDRESSES``' order)
    escaped and filled in, and its per-player fields left as ``{name}``
    for ``str.format`` (braces in an address doubled, so they stay text)."""
    fixed = {name: str(escape(a)).replace("{", "{{").replace("}", "}}")
             for name, a in zip(_NAV_ADDRESSES, addresses)}
    return _NAV_PLAYER.format(**fixed, **{name: "{" + name + "}" for name in _NAV_VALUES})


@pass_context
def header_nav(context):
    """The links of the page header (``<nav>``'s contents): a player's with
    their balances, unread count and the log-out form; a visitor's."""
    page_url = context.get("url") or url
    hs = header_status(context)
    if hs is None:
        return format_html(_NAV_VISITOR, rules=page_url("rules"), login=page_url("login"),
                           signup=page_url("signup"))
    w, unread = hs["wallet"], hs["unread"]
    words = (f": {common.amount(w.keys, 'keys')}, {common.amount(w.clips, 'clips')}, "
             f"{common.amount(w.diamonds, 'diamonds')}") if w else ""
    return mark_safe(_player_nav(tuple(page_url(name) for name in _NAV_ADDRESSES)).format(
        wallet_words=escape(words), balances=_BALANCES.format(_text(w.keys), _text(w.clips), _text(w.diamonds))
        if w else "", unread=_text(unread), badge=_BADGE.format(_text(unread)) if unread else "",
        csrf_input=conditional_escape(context.get("csrf_input") or ""),
        username=escape(context["request"].user.get_username())))


def date(value, arg=None) -> str:
    """Django's ``date`` filter, in the current time zone as in a Django
    template. ``'c'`` (ISO 8601, every ``<time datetime>``) is what Django's
    format does for it, ``isoformat()``, without parsing the format."""
    if arg == "c" and isinstance(value, datetime.datetime):
        return template_localtime(value).isoformat()
    return _date(template_localtime(value), arg)


def amount(n, currency: str) -> str:
    """``{{ 1|amount("keys") }}`` -> "1 key"."""
    return common.amount(n, currency)


def signed_amount(n, currency: str) -> str:
    """A ledger change: ``{{ -1|signed_amount("keys") }}`` -> "−1 key"."""
    return common.amount(n, currency, signed=True)


def until(when) -> str:
    """Time left in words; "less than a minute" rather than "0 minutes"."""
    return common.until(when) if when else ""


def since(when) -> str:
    """"5 minutes ago"; "less than a minute ago" rather than "0 minutes ago"."""
    return common.since(when) if when else ""


class PageEnvironment(Environment):
    """Jinja2's environment, reading a dict's keys before its attributes."""

    def getattr(self, obj, attribute):
        if obj.__class__ is dict:
            try:
                return obj[attribute]
            except KeyError:
                pass
        return super().getattr(obj, attribute)


def environment(**options) -> Environment:
    # The same output in development and production: Django's backend would
    # print a missing name as "{{ name }}" under DEBUG.
    options["undefined"] = ChainableUndefined
    options.setdefault("keep_trailing_newline", True)
    options.setdefault("finalize", finalize)
    env = PageEnvironment(**options)
    env.globals.update(url=url, static=static, header_nav=header_nav, live_stream=push.stream_url)
    env.filters.update(date=date, pluralize=pluralize, amount=amount, signed_amount=signed_amount,
                       until=until, since=since, emoji_name=common.emoji_name)
    return env
