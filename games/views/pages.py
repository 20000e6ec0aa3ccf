"""Pages around the game: the landing page for visitors, the rules and a
player's profile."""
from __future__ import annotations

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.db.models import Count, Q
from django.db.models.functions import TruncDate
from django.http import Http404, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from .. import engine, live, payouts, share, wallet
from ..forms import STARTING_BALANCE, AlertsForm
from ..models import DEFAULT_BLIND_WEIGHTS, Guess, LedgerEntry, Player, Round, RoundEntry
from .common import open_rounds, player_required

# The landing page's sample board: a made-up secret and two guesses, scored
# by the real engine, so the example can never disagree with the game.
SAMPLE_SECRET = ["🦊", "🐶", "🐰", "🐱", "🐹", "🐭"]
SAMPLE_GUESSES = [["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"], ["🦊", "🐶", "🐼", "🐭", "🐹", "🐱"]]
EXAMPLE_POOL = 100


def _sample() -> list[dict]:
    """The sample guesses as the round page shows them: the total (and
    percentage) while the round runs, the per-position marks once it is
    over (they say where the secret's emojis sit)."""
    rows = []
    for guess in SAMPLE_GUESSES:
        result = engine.score(SAMPLE_SECRET, guess)
        rows.append({"emojis": guess, "marks": share.marks(result.breakdown()), "total": result.total,
                     "percentage": round(result.total / engine.MAX_TOTAL * 100)})
    return rows


def landing(request):
    """What the game is, in one screen, for someone who is not logged in."""
    rounds = open_rounds()[:8]
    playing = live.players_in([r.pk for r in rounds])
    return render(request, "games/landing.html", {
        "sample": _sample(), "rounds": [(r, payouts.explain_round(r), playing.get(r.pk)) for r in rounds],
        "starting": STARTING_BALANCE, "max_total": engine.MAX_TOTAL,
    })


@require_GET
def rules(request):
    """The full rules, with the payout examples computed by the payout code."""
    return render(request, "games/rules.html", {
        "legend": share.LEGEND, "max_total": engine.MAX_TOTAL, "size": engine.SIZE,
        "classic": payouts.explain(payouts.CLASSIC, EXAMPLE_POOL),
        "blind": payouts.explain(payouts.BLIND, EXAMPLE_POOL, DEFAULT_BLIND_WEIGHTS),
        "pool": EXAMPLE_POOL, "diamonds_per_key": wallet.DIAMONDS_PER_KEY,
    })


def streak(days: list, today) -> int:
    """Consecutive days with a guess, ending today (or yesterday: a streak
    is not lost before the day is over)."""
    have = set(days)
    day = today if today in have else today - timedelta(days=1)
    n = 0
    while day in have:
        n += 1
        day -= timedelta(days=1)
    return n


def stats(player: Player) -> dict:
    """Rounds played, wins, best totals (never of a sealed blind round), streak."""
    played = Guess.objects.filter(player=player).values("round").distinct().count()
    wins = LedgerEntry.objects.filter(player=player, reason=LedgerEntry.Reason.PRIZE).count()
    won = sum(LedgerEntry.objects.filter(player=player, reason=LedgerEntry.Reason.PRIZE)
              .values_list("delta", flat=True))
    # A blind round's totals show only once it is revealed -- a voided one never is.
    best = (RoundEntry.objects.filter(player=player, best_total__gt=0)
            .filter(Q(round__kind=Round.Kind.CLASSIC) | Q(round__status=Round.Status.SETTLED))
            .select_related("round").order_by("-best_total", "round__ends_at")[:5])
    days = (Guess.objects.filter(player=player).annotate(day=TruncDate("created_at"))
            .values_list("day", flat=True).annotate(n=Count("id")))
    return {"played": played, "wins": wins, "won": won, "best": list(best),
            "streak": streak(list(days), timezone.now().date())}


@require_GET
@player_required
def profile(request, username: str | None = None):
    """A player's record; without a name, your own."""
    if username is None:
        return redirect("profile", request.user.get_username())
    user = get_user_model().objects.filter(username=username).first()
    player = getattr(user, "player", None) if user else None
    if player is None:
        raise Http404("no such player")
    me = player.pk == request.player.pk
    return render(request, "games/profile.html", {
        "who": user.get_username(), "stats": stats(player), "me": me,
        "alerts": AlertsForm(initial={"new_rounds": player.notify_new_rounds}) if me else None})


@require_POST
@player_required
def alerts(request):
    """Turn the player's "a new round opened" notifications on or off."""
    form = AlertsForm(request.POST)
    form.is_valid()  # a checkbox: anything else it is sent reads as off
    wanted = bool(form.cleaned_data.get("new_rounds"))
    Player.objects.filter(pk=request.player.pk).update(notify_new_rounds=wanted)
    messages.success(request, "You will hear when a new round opens." if wanted else
                     "No more notifications when a new round opens.")
    return redirect("profile", request.user.get_username())


@require_GET
def favicon(request):
    """Browsers ask for /favicon.ico whatever the page says: send them to the icon."""
    return HttpResponsePermanentRedirect(static("games/favicon.svg"))
