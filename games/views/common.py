"""Helpers shared by the player views."""
from __future__ import annotations

import functools
import unicodedata

from django.contrib.auth.views import redirect_to_login
from django.http import JsonResponse

from ..players import ensure_player

_JOINERS = {"\u200d", "\ufe0f", "\ufe0e"}


@functools.lru_cache(maxsize=4096)
def emoji_name(emoji: str) -> str:
    """A readable name for an emoji, for accessible button labels.

    Screen readers name most single emojis themselves, but not every one in
    a ZWJ sequence, and a button label must never be empty: so join the
    Unicode names of the parts (🐕‍🦺 -> "guide dog safety vest")."""
    parts = [unicodedata.name(ch, "").lower() for ch in emoji if ch not in _JOINERS]
    return " ".join(p for p in parts if p) or "emoji"


def amount(n: int, currency: str) -> str:
    """``amount(1, "keys")`` -> "1 key"; ``amount(3, "keys")`` -> "3 keys"."""
    return f"{n} {currency[:-1] if n == 1 and currency.endswith('s') else currency}"


def player_required(view=None, *, json: bool = False):
    """Log-in required; the view gets ``request.player`` (made on first use,
    so a staff account can play too). A JSON endpoint answers 401 JSON
    instead of redirecting a poller to the login page."""
    def wrap(func):
        @functools.wraps(func)
        def inner(request, *args, **kwargs):
            if not request.user.is_authenticated:
                if json:
                    return JsonResponse({"error": "Log in first."}, status=401)
                return redirect_to_login(request.get_full_path())
            request.player = ensure_player(request.user)
            return func(request, *args, **kwargs)
        return inner
    return wrap(view) if view is not None else wrap
