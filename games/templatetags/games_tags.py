"""Template helpers for the page header, available on every page
(error pages included) without a project-wide context processor."""
from django import template

from ..models import Notification, Wallet
from ..views.common import amount as _amount
from ..views.common import emoji_name as _emoji_name
from ..views import common

register = template.Library()


@register.simple_tag(takes_context=True)
def header_status(context) -> dict | None:
    """The signed-in player's balances and unread notification count."""
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


@register.filter
def emoji_name(emoji: str) -> str:
    return _emoji_name(emoji)


@register.filter
def amount(n, currency: str) -> str:
    """``{{ 1|amount:"keys" }}`` -> "1 key"."""
    return _amount(n, currency)


@register.filter
def signed_amount(n, currency: str) -> str:
    """A ledger change: ``{{ -1|signed_amount:"keys" }}`` -> "−1 key"."""
    return _amount(n, currency, signed=True)


@register.filter
def until(when) -> str:
    """Time left in words; "less than a minute" rather than "0 minutes"."""
    return common.until(when) if when else ""


@register.filter
def since(when) -> str:
    """"5 minutes ago"; "less than a minute ago" rather than "0 minutes ago"."""
    return common.since(when) if when else ""


@register.filter
def ledger_ref(reference: str) -> dict:
    """A ledger reference made readable: a round or guess id becomes a short
    label (and a round a link), a note stays as written."""
    return common.ledger_ref(reference)
