"""Sessions that bring their user along: one Valkey round trip for both.

Every signed-in request needs its session and its user. With Django's
``cached_db`` sessions those are two cache reads one after the other (the
session names the user), and a round trip costs a request more CPU than
the read itself. So the user and player a session was last seen with are
cached *per session* (its *identity*), and :meth:`SessionStore.load` reads
the session and its identity with one ``MGET``.

Django's own ``auth.get_user`` still does the checking: it asks the
authentication backend for the session's user, and
``games.players.CachedModelBackend`` answers with the identity the session
brought when it names that user (``AuthenticationMiddleware`` below tells
the backend which session is asking); Django then verifies the session's
auth hash against it as always.

An identity is a cache of the ``auth_user`` row, dropped whenever it could
be wrong: a saved or deleted user drops every identity of theirs at once
(each user has a set of their sessions' identity keys), a flushed session
its own, and all of them live at most ``players.CACHE_SECONDS``, which
bounds what a change that bypasses ``save()`` (a queryset ``update()``)
can leave stale -- the same rules as the per-user cache before it.
"""
from __future__ import annotations

import contextvars

from django.contrib.auth import get_user as auth_get_user
from django.contrib.auth.middleware import AuthenticationMiddleware as DjangoAuthenticationMiddleware
from django.contrib.sessions.backends import cached_db
from django.utils.functional import SimpleLazyObject

from . import rides


IDENTITY_PREFIX = "cm.identity:"   # + session key -> (user, player)
USER_SESSIONS = "cm.identities-of:"  # + user pk: the tag of that user's identities

# The session whose user ``auth.get_user`` is loading, for the backend.
asking: contextvars.ContextVar = contextvars.ContextVar("games.sessions.asking", default=None)


def identity_key(session_key: str) -> str:
    return IDENTITY_PREFIX + session_key


class SessionStore(cached_db.SessionStore):
    """``cached_db`` sessions whose cache read also fetches the session's
    identity (``self.identity``: ``(user, player)`` or None), and sends the
    view's declared Valkey calls in the same round trip (``self.rides``,
    see ``games.rides``)."""

    identity = None
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

    def remember(self, user, player, seconds: int) -> None:
        """Cache ``(user, player)`` as this session's identity for
        ``seconds``, filed under the user so that changing the user drops it."""
        if self.session_key:
            self._cache.set_tagged(identity_key(self.session_key), (user, player), seconds,
                                   USER_SESSIONS + str(user.pk))


def forget_identities(user_pk) -> None:
    """Drop every cached identity of this user (their row changed); if
    Valkey is unreachable they expire within ``players.CACHE_SECONDS``."""
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
        if player is not None and session.session_key:
            rides.remember(session.session_key, user.pk, player.pk)
        request.user = user  # the rest of the request reads the user itself, not through the lazy proxy
    return request._cached_user
