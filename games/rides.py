"""Valkey calls that ride along with the session's read: one round trip.

A signed-in request reads its session and identity from Valkey first
(``games.sessions``). Some views then make one more Valkey call of their
own whose arguments they knew all along -- the guess POST counts a hit
against its player's rate limit, the round page reads the live panel, the
poll reads its ETag's versions. On this project's machine a round trip
costs more CPU (two system calls each side) than anything those calls do,
so a view may declare such calls (:func:`ride_along`), and they go out in
the same pipeline as the session's MGET.

They need the player before the session says who it is, so they are made
for the identity this process last saw with this session key
(:func:`remember`): a session key belongs to one user for its whole life
(Django makes a new key at each log-in), so that is a cache of a fact that
does not change. The view checks it all the same: :func:`taken` hands a
reply over only if it was made for the user and player the session turned
out to have; otherwise the view makes its call as before. So a ride can
only save a round trip, never change an answer. A call that writes (the
rate limit's hit) must also check, in the same script, that the session
is still signed in (``games.ratelimit``): otherwise a session key that was
logged out, or whose user changed, elsewhere would keep counting hits
against its former owner.

Nothing rides on a cluster (the session and the view's keys live on
different nodes), when the cache is on another server than the queues, on
a session this process has not seen yet, or when Valkey does not answer:
then every call goes out on its own, as it always did.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

MEMO_MAX = 50_000

# session key -> (user pk, player id), as last loaded in this process
_who: dict[str, tuple[Any, str]] = {}


@dataclass
class Ride:
    """One call: a raw command (``("EVALSHA", sha, n, *keys, *args)``,
    ``("MGET", a, b)``), made for ``who``; ``script`` is loaded and the call
    sent again when the server answers NOSCRIPT. ``reply`` or ``error`` is
    set once it went out; ``meta`` is the maker's own (what it needs to
    read the reply)."""
    command: tuple
    who: tuple[Any, str]
    script: Any = None
    meta: Any = None
    reply: Any = None
    error: Exception | None = None
    sent: bool = field(default=False, repr=False)


Maker = Callable[[Any, tuple[Any, str]], "Ride | None"]


def ride_along(name: str, maker: Maker):
    """Declare that the view makes the call ``maker(request, who)`` returns
    (a :class:`Ride`, or None for none this time). Put it innermost: the
    declaration travels outwards through ``functools.wraps``, where the
    session's read finds it (``request.resolver_match.func``)."""
    def wrap(view):
        view.valkey_rides = {**getattr(view, "valkey_rides", {}), name: maker}
        return view
    return wrap


def remember(session_key: str, user_pk, player_id: str) -> None:
    """The identity a session was seen with, for its next requests' rides."""
    if _who.get(session_key) != (user_pk, player_id):
        if len(_who) >= MEMO_MAX:
            _who.clear()
        _who[session_key] = (user_pk, player_id)


def forget(session_key: str) -> None:
    _who.pop(session_key, None)


def make(request, session_key: str | None) -> dict[str, Ride]:
    """The rides the view resolved for ``request`` declares, made for the
    identity last seen with ``session_key`` ({} when there is none).

    Nothing before the CSRF check has passed: a page that reads the user
    while refusing the request (the 403 of a stale form token renders the
    header) must not count a rate-limit hit for a view that never runs."""
    if not getattr(request, "csrf_processing_done", False):
        return {}
    match = getattr(request, "resolver_match", None)
    makers = getattr(getattr(match, "func", None), "valkey_rides", None)
    who = _who.get(session_key) if session_key else None
    if not makers or who is None:
        return {}
    rides = {}
    for name, maker in makers.items():
        ride = maker(request, who)
        if ride is not None:
            rides[name] = ride
    return rides


def taken(request, name: str, user_pk, player_id: str | None = None) -> Ride | None:
    """The ride ``name`` if it went out for this very user (and player, when
    given), once: a second call answers None."""
    rides = getattr(request, "valkey_rode", None)
    ride = rides.pop(name, None) if rides else None
    if ride is None or not ride.sent or ride.who[0] != user_pk:
        return None
    if player_id is not None and ride.who[1] != player_id:
        return None
    return ride
