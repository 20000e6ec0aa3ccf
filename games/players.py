"""Players: one per user, created together with an empty wallet.

Every signed-in request needs the user and the player. Both rarely change,
so both are served from the cache (``settings.CACHES``, on Valkey) and read
from the database only on a miss: the user by ``CachedModelBackend``, the
player by ``ensure_player``. A request's session usually brings both along
in the same round trip (``games.sessions``: the session's *identity*); else
they come from the per-user cache. A saved or deleted user (a password
change, a deactivation, a login's ``last_login``) drops its cached copies
at once, identities included; the short ``CACHE_SECONDS`` bounds what a
change that bypasses ``save()`` (a queryset ``update()``) can leave stale.
Permissions are never cached: the cached user is the bare row, and
``has_perm`` reads the grants per request.
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

CACHE_SECONDS = 120


def _user_key(user_id) -> str:
    return f"user:{user_id}"


def _player_key(user_id) -> str:
    return f"player-of:{user_id}"


class CachedModelBackend(ModelBackend):
    """Django's ModelBackend with ``get_user`` (run on every request) served
    from the cache."""

    def get_user(self, user_id):
        session = sessions.asking.get()
        identity = getattr(session, "identity", None)
        if identity is not None and identity[0].pk == user_id:  # came with the session: no round trip
            user, player = identity
        else:
            # One round trip for both: the player comes along for ensure_player.
            found = cache.get_many([_user_key(user_id), _player_key(user_id)])
            user, player = found.get(_user_key(user_id)), found.get(_player_key(user_id))
            if user is None:
                user = super().get_user(user_id)
                if user is not None:
                    cache.set(_user_key(user_id), user, CACHE_SECONDS)
            if user is not None and player is None:
                player = Player.objects.filter(user_id=user.pk).only("id", "user_id", "created_at").first()
                if player is not None:
                    player = _bare(player)
                    cache.set(_player_key(user_id), player, CACHE_SECONDS)
            if user is not None and session is not None:
                session.remember(user, player, CACHE_SECONDS)  # the session's next requests bring both
        if user is not None and player is not None:
            user._cached_player = player
        return user if self.user_can_authenticate(user) else None


def _drop_cached(user_pk) -> None:
    cache.delete_many([_user_key(user_pk), _player_key(user_pk)])
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
    player = getattr(user, "_cached_player", None) or cache.get(_player_key(user.pk))
    if player is None:
        with transaction.atomic():
            player, _ = Player.objects.get_or_create(user=user)
            Wallet.objects.get_or_create(player=player)
        player = _bare(player)
        cache.set(_player_key(user.pk), player, CACHE_SECONDS)
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
