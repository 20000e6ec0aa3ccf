"""Players: one per user, created together with an empty wallet."""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import transaction

from .models import Player, Wallet


def ensure_player(user) -> Player:
    """The user's player, created (with its wallet) on first use."""
    with transaction.atomic():
        player, _ = Player.objects.get_or_create(user=user)
        Wallet.objects.get_or_create(player=player)
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
