"""Players: one per user, created together with an empty wallet.

Every signed-in request needs the user and the player. A request's session
usually brings both along in the same round trip (``games.sessions``: the
session's *identity*, which never holds the password hash); else
``CachedModelBackend`` reads the user row from the database, and the player
comes from the cache (``settings.CACHES``, on Valkey: its id and creation
time, JSON) or the database. A saved or deleted user (a password change, a
deactivation, a login's ``last_login``) drops its cached identities and
player at once; the short ``CACHE_SECONDS`` bounds what a change that
bypasses ``save()`` (a queryset ``update()``) can leave stale.
Permissions are never cached: ``has_perm`` reads the grants per request.
"""
from __future__ import annotations

from functools import partial

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.cache import cache
from django.db import transaction
from django.db.models.signals import post_delete, post_save

from . import sessions
from .models import Player, Wallet
from .sessions import CACHE_SECONDS, player_from, player_value


def _player_key(user_id) -> str:
    return f"player-of:{user_id}"


def _cached_player(user_id) -> Player | None:
    value = cache.get(_player_key(user_id))
    try:
        return player_from(value, user_id) if value is not None else None
    except (KeyError, TypeError, ValueError):
        return None  # not what this version writes: read the row


class CachedModelBackend(ModelBackend):
    """Django's ModelBackend with ``get_user`` (run on every request) served
    from the session's identity when it has one (``games.sessions``)."""

    def get_user(self, user_id):
        session = sessions.asking.get()
        user = sessions.identity_user(session, user_id) if session is not None else None
        if user is None:
            user = super().get_user(user_id)
            if user is not None:
                player = _cached_player(user.pk)
                if player is None:
                    player = Player.objects.filter(user_id=user.pk).only("id", "user_id", "created_at").first()
                    if player is not None:
                        player = _bare(player)
                        cache.set(_player_key(user.pk), player_value(player), CACHE_SECONDS)
                if player is not None:
                    user._cached_player = player
                if session is not None:
                    session.identity_used = False  # remembered once Django has verified the session
        return user if self.user_can_authenticate(user) else None


def _drop_cached(user_pk) -> None:
    cache.delete(_player_key(user_pk))
    sessions.forget_identities(user_pk)


def _forget(user_pk) -> None:
    """Drop what is cached of this user now, and again when the change
    commits: a request that read the row in between cached the old one."""
    _drop_cached(user_pk)
    if transaction.get_connection().in_atomic_block:
        transaction.on_commit(partial(_drop_cached, user_pk))


def _forget_user(sender, instance, **kwargs) -> None:
    _forget(instance.pk)


def _forget_player(sender, instance, **kwargs) -> None:
    _forget(instance.user_id)


def _bare(player: Player) -> Player:
    """What is cached of a player: the row's own fields, nothing it refers to."""
    return Player(id=player.pk, user_id=player.user_id, created_at=player.created_at)


post_save.connect(_forget_user, sender=get_user_model(), dispatch_uid="games.players.forget_user_saved")
post_delete.connect(_forget_user, sender=get_user_model(), dispatch_uid="games.players.forget_user_deleted")
post_delete.connect(_forget_player, sender=Player, dispatch_uid="games.players.forget_player")


def ensure_player(user) -> Player:
    """The user's player, created (with its wallet) on first use."""
    player = getattr(user, "_cached_player", None) or _cached_player(user.pk)
    if player is None:
        with transaction.atomic():
            player, _ = Player.objects.get_or_create(user=user)
            Wallet.objects.get_or_create(player=player)
        player = _bare(player)
        cache.set(_player_key(user.pk), player_value(player), CACHE_SECONDS)
    Player.user.field.set_cached_value(player, user)  # no query for player.user (the descriptor's checks: not needed)
    return player


def player_for_username(username: str, *, create: bool = False, password: str | None = None) -> Player:
    User = get_user_model()
    if create:
        user, made = User.objects.get_or_create(username=username)
        if made:
            if password:
                user.set_password(password)
            else:
                user.set_unusable_password()
            user.save()
    else:
        user = User.objects.get(username=username)
    return ensure_player(user)


def resolve(ref: str) -> Player:
    """A player by PLR id or username (for management commands)."""
    if len(ref) == 14 and ref.startswith("PLR"):
        return Player.objects.get(pk=ref)
    return Player.objects.get(user__username=ref)
