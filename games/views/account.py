"""Log-in and sign-up, the wallet (balances, ledger, exchanging diamonds
for keys) and notifications."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.core.paginator import Paginator
from django.db import IntegrityError
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from .. import ratelimit, wallet
from ..forms import STARTING_BALANCE, ExchangeForm, LoginForm, SignUpForm
from ..models import Guess, LedgerEntry, Notification, Round
from .common import amount, ledger_ref, player_required

LEDGER_PAGE = 50


class LoginView(auth_views.LoginView):
    """Django's log-in; a refused form answers 400, like every other form
    here. Failed attempts are counted by django-axes, which answers 429
    (``ratelimit.lockout``) once an account or an address has too many."""

    template_name = "games/login.html"
    form_class = LoginForm
    redirect_authenticated_user = True

    def form_invalid(self, form):
        return self.render_to_response(self.get_context_data(form=form), status=400)


@never_cache  # a refused form carries the typed password back
@require_http_methods(["GET", "POST"])
def signup(request):
    """Create an account, credit the starting balance, log in, go play.

    Every new account gets free currency, so accounts made from one address
    are limited (``RATE_LIMITS["signup"]``); a refused form gives its hit back."""
    if request.user.is_authenticated:
        return redirect("lobby")
    form = SignUpForm(request.POST) if request.method == "POST" else SignUpForm()
    if form.is_bound:
        h = ratelimit.hit("signup", ratelimit.client_ip(request))
        if not h.allowed:
            return ratelimit.too_many(request, "signup", h.retry_after)
        if not form.is_valid():
            ratelimit.undo(h)
    if form.is_bound and form.is_valid():
        try:
            user = form.save()
        except IntegrityError:  # the same name taken meanwhile by a sign-up racing this one
            ratelimit.undo(h)
            form.add_error("username", form.instance.unique_error_message(type(form.instance), ["username"]))
            return render(request, "games/signup.html", {"form": form, "starting": STARTING_BALANCE}, status=400)
        login(request, user, backend="games.players.CachedModelBackend")
        messages.success(request, "Welcome! Your starting keys and clips are in your wallet.")
        return redirect("lobby")
    status = 400 if form.is_bound else 200
    return render(request, "games/signup.html", {"form": form, "starting": STARTING_BALANCE}, status=status)


def _wallet(request, form: ExchangeForm, status: int = 200):
    ledger = LedgerEntry.objects.filter(player=request.player).order_by("-id")
    page = Paginator(ledger, LEDGER_PAGE).get_page(request.GET.get("page"))
    refs = {e.reference for e in page.object_list}
    titles = {pk: (pk, title or pk) for pk, title in Round.objects.filter(pk__in=refs).values_list("pk", "title")}
    titles |= {gid: (rid, title or rid) for gid, rid, title in Guess.objects.filter(pk__in=refs, player=request.player)
               .values_list("pk", "round_id", "round__title")}
    rows = [(e, ledger_ref(e.reference, titles)) for e in page.object_list]
    return render(request, "games/wallet.html", {
        "balances": wallet.balances(request.player), "page": page, "rows": rows, "form": form,
        "diamonds_per_key": wallet.DIAMONDS_PER_KEY,
    }, status=status)


@require_GET
@player_required
def wallet_page(request):
    return _wallet(request, ExchangeForm())


@require_http_methods(["GET", "POST"])
@player_required
def exchange(request):
    """Turn diamonds (prizes) into keys (guesses), through the ledger. A GET
    (reopening the address after a refused exchange) shows the wallet."""
    if request.method == "GET":
        return redirect("wallet")
    form = ExchangeForm(request.POST)
    if form.is_valid():
        try:
            wallet.exchange_diamonds(request.player, form.cleaned_data["keys"])
        except wallet.WalletError as err:
            form.add_error("keys", err.message)
        else:
            messages.success(request, f"Exchanged for {amount(form.cleaned_data['keys'], 'keys')}.")
            return redirect("wallet")
    return _wallet(request, form, status=400)


@require_GET
@player_required
def notifications(request):
    items = Notification.objects.filter(player=request.player).select_related("round")[:100]
    return render(request, "games/notifications.html", {"items": items})


@require_POST
@player_required
def mark_notifications_read(request):
    Notification.objects.filter(player=request.player, read_at__isnull=True).update(read_at=timezone.now())
    return redirect("notifications")
