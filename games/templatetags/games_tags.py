"""Template helpers for the page header, available on every page
(error pages included) without a project-wide context processor."""
from django import template
from django.urls import reverse
from django.utils.html import format_html

from echomq import ids

from ..models import Notification, Wallet
from ..views.common import amount as _amount
from ..views.common import emoji_name as _emoji_name

register = template.Library()


@register.simple_tag(takes_context=True)
def header_status(context) -> dict | None:
    """The signed-in player's balances and unread notification count."""
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return None
    player = getattr(request, "player", None) or getattr(user, "player", None)
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
def ledger_reference(reference: str):
    """A ledger reference: a link to its round when it is a round id, else
    plain (escaped) text. An operator's note may start with "RND" too
    (``grant … --note "RNDticket 12/3"``), so only a well-formed id is
    linked: reversing the round URL for anything else would raise."""
    if isinstance(reference, str) and reference.startswith("RND") and ids.is_valid(reference):
        return format_html('<a href="{}">{}</a>', reverse("round", args=[reference]), reference)
    return reference
