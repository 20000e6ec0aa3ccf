"""Sessions that bring their user along: one Valkey round trip for both.

Every signed-in request needs its session and its user. With Django's
``cached_db`` sessions those are two cache reads one after the other (the
session names the user), and a round trip costs a request more CPU than
the read itself. So what a request needs of the user and player a session
was last verified with is cached *per session* (its *identity*), and
:meth:`SessionStore.load` reads the session and its identity with one
``MGET``. This module is that seam, whole: what an identity holds, when it
is written and dropped, and the user it stands for.

An identity is not the ``auth_user`` row: it holds the user's id, username
and flags (:data:`IDENTITY_FIELDS`), the player's id, and the session auth
hash Django verified the session with -- never the password hash, which
stays in the database. Django's own ``auth.get_user`` still does the
checking: it asks the authentication backend for the session's user, and
``games.players.CachedModelBackend`` answers with the identity's user when
the identity names that user *and* carries the very hash the session holds
(``AuthenticationMiddleware`` below tells the backend which session is
asking); else with the row from the database. That user's other fields are
deferred: reading one (say ``email``) loads it from the database, as a
deferred field does, and so does anything that needs the password.

An identity is written only after Django has verified the session against
the row, and lives at most :data:`CACHE_SECONDS` and never longer than
the session's own cache entry has left (``ValkeyCache.set_tagged`` with
``within``). It is dropped whenever it could be wrong: a saved or deleted
user drops every identity of theirs at once (each user has a tag of their
sessions' identity keys, deleted atomically), a flushed session its own.
"""
from __future__ import annotations

import contextvars
import functools
from datetime import datetime

from django.conf import settings
from django.contrib.auth import HASH_SESSION_KEY, get_user_model
from django.contrib.auth import get_user as auth_get_user
from django.contrib.auth.middleware import AuthenticationMiddleware as DjangoAuthenticationMiddleware
from django.contrib.sessions.backends import cached_db
from django.core.cache import caches
from django.db import router
from django.utils.crypto import constant_time_compare
from django.utils.functional import SimpleLazyObject

from . import rides
from .models import Player

CACHE_SECONDS = 120  # the longest an identity (and a cached player) lives

IDENTITY_PREFIX = "cm.identity:"   # + session key -> the session's identity (a JSON object)
USER_SESSIONS = "cm.identities-of:"  # + user pk: the tag of that user's identities

# What an identity keeps of the user: what requests ask of request.user
# (who, is_authenticated, the admin's is_active/is_staff checks). Anything
# else is read from the database when asked for.
IDENTITY_FIELDS = ("id", "username", "is_active", "is_staff", "is_superuser")

# The session whose user ``auth.get_user`` is loading, for the backend.
asking: contextvars.ContextVar = contextvars.ContextVar("games.sessions.asking", default=None)


def identity_key(session_key: str) -> str:
    return IDENTITY_PREFIX + session_key


def signed_in_keys(session_key: str) -> list[str]:
    """The full Valkey names of the session's cache entry and its identity:
    both there means the session is signed in now (the entry goes when the
    session ends, the identity whenever its user changes)."""
    cache = caches[settings.SESSION_CACHE_ALIAS]
    return [cache.make_key(SessionStore.cache_key_prefix + session_key), cache.make_key(identity_key(session_key))]


@functools.cache
def _layout(user_model) -> tuple[tuple[str, ...], int]:
    """The identity's fields of ``user_model`` in the model's order, and
    where its primary key is among them."""
    names = tuple(f.attname for f in user_model._meta.concrete_fields if f.attname in IDENTITY_FIELDS)
    return names, names.index(user_model._meta.pk.attname)


def _plain(value):
    return value if value is None or isinstance(value, (str, int, float, bool)) else str(value)


def player_value(player: Player) -> dict:
    """What is cached of a player: its id and creation time."""
    return {"id": player.pk, "created_at": player.created_at.isoformat()}


def player_from(value: dict, user_id) -> Player:
    """The bare player (no query for anything it refers to) a
    :func:`player_value` stands for (built from its fields in order:
    keyword construction costs twice the CPU)."""
    return Player(value["id"], user_id, datetime.fromisoformat(value["created_at"]))


def make_identity(user, player) -> dict:
    """What is cached of a verified session's user and player."""
    return {"user": {name: _plain(getattr(user, name)) for name in _layout(type(user))[0]},
            "hash": user.get_session_auth_hash(),
            "player": None if player is None else player_value(player)}


def identity_user(session, user_id):
    """The user the asking ``session``'s identity stands for, if it names
    ``user_id`` and carries the auth hash the session holds; else None
    (the backend then reads the row). Its ``_cached_player`` is the
    identity's player."""
    identity = getattr(session, "identity", None)
    if not isinstance(identity, dict):
        return None
    try:
        fields, auth_hash = identity["user"], identity["hash"]
        User = get_user_model()
        names, pk_at = _layout(User)
        values = [fields[name] for name in names]  # JSON keeps these fields' types (int, str, bool)
        values[pk_at] = User._meta.pk.to_python(values[pk_at])
        if values[pk_at] != user_id:
            return None
        if not constant_time_compare(auth_hash, session.get(HASH_SESSION_KEY) or ""):
            return None
        user = User.from_db(router.db_for_read(User), names, values)
        player = identity["player"] and player_from(identity["player"], user.pk)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None  # not an identity this version wrote: the row decides
    user.get_session_auth_hash = functools.partial(_session_auth_hash, user, auth_hash)
    if player is not None:
        user._cached_player = player
    session.identity_used = True
    return user


def _session_auth_hash(user, verified: str) -> str:
    """An identity's user's ``get_session_auth_hash``: the hash Django
    verified the session with, which its ``get_user`` compares with the
    session's -- the password hash it is computed from is not in the
    identity, and is deferred on the user. Once the password is loaded or
    set (``set_password``), Django's own computation, from it."""
    if "password" in user.__dict__:
        return type(user).get_session_auth_hash(user)
    return verified


class SessionStore(cached_db.SessionStore):
    """``cached_db`` sessions whose cache read also fetches the session's
    identity (``self.identity``, or None), and sends the view's declared
    Valkey calls in the same round trip (``self.rides``, see
    ``games.rides``)."""

    identity = None
    # This request's user came from the identity (True), or from the
    # database through the cached backend (False: remembered once Django
    # has verified the session against it); None: not asked yet.
    identity_used = None
    rides: dict = {}

    def load(self):
        self.identity = None
        if not self.session_key:  # a new session: nothing to read
            return super().load()
        keys = [self.cache_key, identity_key(self.session_key)]
        riding = getattr(self._cache, "get_many_riding", None) if self.rides else None
        try:
            found = riding(keys, list(self.rides.values())) if riding else self._cache.get_many(keys)
        except Exception:  # as cached_db: an unusable cache key resets the session (Django #17810)
            found = {}
        self.rides = {}  # each goes out once, however often the session is read
        data = found.get(self.cache_key)
        if data is None:  # not cached (or evicted): the database, as cached_db does
            return super().load()
        self.identity = found.get(identity_key(self.session_key))
        return data

    def delete(self, session_key=None):
        key = session_key or self.session_key
        super().delete(session_key)
        if key:
            self._cache.delete(identity_key(key))
            rides.forget(key)

    def remember(self, user, player) -> None:
        """Cache the identity of ``user`` (a row just verified against this
        session) and ``player``, filed under the user so that changing the
        user drops it, and living no longer than the session's cache entry."""
        if self.session_key:
            self._cache.set_tagged(identity_key(self.session_key), make_identity(user, player), CACHE_SECONDS,
                                   USER_SESSIONS + str(user.pk), within=self.cache_key)


def forget_identities(user_pk) -> None:
    """Drop every cached identity of this user (their row changed); if
    Valkey is unreachable they expire within :data:`CACHE_SECONDS`."""
    from django.core.cache import cache

    cache.delete_tagged(USER_SESSIONS + str(user_pk))


class AuthenticationMiddleware(DjangoAuthenticationMiddleware):
    """Django's, telling the backend which session asks for its user, so
    the backend can answer with the identity that session brought."""

    def process_request(self, request):
        super().process_request(request)
        request.user = SimpleLazyObject(lambda: _get_user(request))


def _get_user(request):
    if not hasattr(request, "_cached_user"):
        session = request.session
        if not hasattr(session, "_session_cache"):  # about to be read: the view's calls may ride along
            session.rides = request.valkey_rode = rides.make(request, session.session_key)
        token = asking.set(session)
        try:
            request._cached_user = user = auth_get_user(request)
        finally:
            asking.reset(token)
        player = getattr(user, "_cached_player", None)
        if user.is_authenticated and getattr(session, "identity_used", None) is False:
            session.remember(user, player)  # verified just now: the session's next requests bring it
        if player is not None and session.session_key:
            rides.remember(session.session_key, user.pk, player.pk)
        request.user = user  # the rest of the request reads the user itself, not through the lazy proxy
    return request._cached_user
