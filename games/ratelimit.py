"""Rate limits, answered with a readable 429 page.

``settings.RATE_LIMITS`` names each limit and its rate ("5/h", "3/s",
"10/15m"; empty turns it off). A hit is one fixed-window counter in Valkey
(one script call: INCR, and PEXPIRE on the window's first hit), shared by
every web process, keyed by the client address or the user. Valkey unreachable means the limit lets the
request through and logs it: a limit must not take the site down with it.

Log-in failures are counted by django-axes (``settings.AXES_*``); its
lock-out answers with this module's page too (``lockout``). ``client_ip``
is the one place that decides which address a request comes from, for
axes and for these limits alike.
"""
from __future__ import annotations

import functools
import hashlib
import ipaddress
import logging
import math
import re
import time
from dataclasses import dataclass

from django.conf import settings
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

from echomq import UNAVAILABLE
from echomq.contrib.django import get_client

from . import rides, scripts, sessions

log = logging.getLogger("games.ratelimit")

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([smhd])\s*$")

# What each limit says when it refuses, and whom it counts.
MESSAGES = {
    "signup": "Too many new accounts from your network in a short time.",
    "guess": "Too many guesses in a second: wait a moment and send it again.",
    "login": "Too many failed log-ins for this account or from your network.",
}


@dataclass(frozen=True)
class Rate:
    count: int
    seconds: int


def parse_rate(text: str) -> Rate:
    """ "5/h" -> Rate(5, 3600); "10/15m" -> Rate(10, 900)."""
    m = _RATE.match(text or "")
    if not m:
        raise ValueError(f"a rate looks like '5/h' or '10/15m', not {text!r}")
    return Rate(int(m[1]), int(m[2] or 1) * UNITS[m[3]])


def rate(name: str) -> Rate | None:
    text = settings.RATE_LIMITS.get(name, "")
    return parse_rate(text) if text else None


# lua/games/ratelimit_hit.lua: INCR, PEXPIRE on the first hit; with a
# session's keys (a hit riding with the session's read), only while both exist.
_HIT = scripts.load("ratelimit_hit")


@dataclass(frozen=True)
class Hit:
    allowed: bool
    retry_after: int = 0  # seconds until the window turns
    key: str = ""


def _counter(name: str, ident: str, r: Rate) -> tuple[str, int, int]:
    """The counter of ``ident`` under limit ``name`` for the window now:
    (key, window number, now in ms)."""
    now_ms = int(time.time() * 1000)
    window = now_ms // (r.seconds * 1000)
    digest = hashlib.blake2b(str(ident).encode("utf-8", "replace"), digest_size=12).hexdigest()
    return f"cm:rl:{name}:{digest}:{window}", window, now_ms


def _verdict(count: int, r: Rate, key: str, window: int, now_ms: int) -> Hit:
    window_ms = r.seconds * 1000
    retry_after = max(1, math.ceil(((window + 1) * window_ms - now_ms) / 1000))
    return Hit(count <= r.count, retry_after, key)


def hit(name: str, ident: str) -> Hit:
    """Count one request of ``ident`` against limit ``name``."""
    r = rate(name)
    if r is None:
        return Hit(True)
    key, window, now_ms = _counter(name, ident, r)
    try:
        count = _HIT(get_client(), [key], [r.seconds * 1000 + 1000])
    except UNAVAILABLE as exc:
        log.warning("rate limit %s not checked, Valkey unreachable: %s", name, exc)
        return Hit(True)
    return _verdict(count, r, key, window, now_ms)


def _hit_riding(name: str):
    """The hit of limit ``name`` for the session's user, made to go out with
    the session's read (``games.rides``) -- so before anyone knows whether
    the session is still good: it counts only if the session's cache entry
    and its identity are both there (``lua/games/ratelimit_hit.lua``)."""
    def make(request, who) -> rides.Ride | None:
        r = rate(name)
        if r is None:
            return None
        key, window, now_ms = _counter(name, f"user:{who[0]}", r)
        alive = sessions.signed_in_keys(request.session.session_key)
        return rides.Ride(("EVALSHA", _HIT.sha, 3, key, *alive, r.seconds * 1000 + 1000), who, script=_HIT,
                          meta=(r, key, window, now_ms))
    return make


def _hit_from(name: str, ride: rides.Ride) -> Hit | None:
    """The verdict of a hit that rode along; None if it was not counted
    (the session or its identity was gone when it arrived)."""
    r, key, window, now_ms = ride.meta
    if isinstance(ride.error, UNAVAILABLE):
        log.warning("rate limit %s not checked, Valkey unreachable: %s", name, ride.error)
        return Hit(True)
    if ride.error is not None:
        raise ride.error
    if not ride.reply:
        return None
    return _verdict(ride.reply, r, key, window, now_ms)


def undo(h: Hit) -> None:
    """Give back a hit that turned out not to count (e.g. a refused sign-up)."""
    if h.key:
        try:
            get_client().decr(h.key)
        except UNAVAILABLE as exc:
            log.warning("rate limit hit %s not given back: %s", h.key, exc)


IPV6_PREFIX = 64  # an IPv6 client holds (at least) a whole /64: it counts as one address


def counted_address(address: str) -> str:
    """The address a limit counts: an IPv4 address as it is; an IPv6 one
    as its /64 -- one subscriber's network, across which a client picks
    any address it likes -- written as the network's first address (so it
    is still a valid address for django-axes' records); an IPv4-mapped
    IPv6 address as its IPv4 address. Anything else as it came."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if ip.version == 6:
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip.packed, IPV6_PREFIX), strict=False).network_address)
    return str(ip)


def client_ip(request) -> str:
    """The address a request counts as (:func:`counted_address`: IPv6 by
    its /64). ``REMOTE_ADDR``, unless ``settings.BEHIND_PROXY`` says a
    proxy is in front: then the last ``X-Forwarded-For`` hop, the one that
    proxy appended (earlier hops are whatever the client sent, so they are
    never trusted)."""
    if settings.BEHIND_PROXY:
        hops = [h.strip() for h in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if h.strip()]
        if hops:
            return counted_address(hops[-1][:64])
    return counted_address(request.META.get("REMOTE_ADDR") or "unknown")


def _wait(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    minutes = math.ceil(seconds / 60)
    return f"{minutes} minute{'s' if minutes != 1 else ''}"


def too_many(request, name: str, retry_after: int):
    """The 429 page: what was refused, when to try again, a way back."""
    referer = request.META.get("HTTP_REFERER", "")
    back = referer if referer and url_has_allowed_host_and_scheme(
        referer, allowed_hosts={request.get_host()}, require_https=request.is_secure()) else reverse("lobby")
    response = render(request, "429.html", {"message": MESSAGES.get(name, "Too many requests."),
                                            "wait": _wait(retry_after), "back": back}, status=429)
    response["Retry-After"] = str(retry_after)
    return response


def limited(name: str):
    """Decorate a view (after ``player_required``) with the per-user limit
    ``name``: over the limit it answers 429 and the view does not run. The
    hit usually goes out with the session's read (``games.rides``)."""
    def wrap(view):
        @rides.ride_along(f"limit:{name}", _hit_riding(name))
        @functools.wraps(view)
        def inner(request, *args, **kwargs):
            ride = rides.taken(request, f"limit:{name}", request.user.pk)
            h = _hit_from(name, ride) if ride is not None else None
            if h is None:  # nothing rode, or it was not counted: count it now, the session checked
                h = hit(name, f"user:{request.user.pk}")
            if not h.allowed:
                log.info("rate limit %s refused user %s", name, request.user.pk)
                return too_many(request, name, h.retry_after)
            return view(request, *args, **kwargs)
        return inner
    return wrap


def lockout(request, response=None, credentials=None):
    """django-axes' lock-out answer (``AXES_LOCKOUT_CALLABLE``)."""
    return too_many(request, "login", int(settings.AXES_COOLOFF_TIME.total_seconds()))
