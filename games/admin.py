"""Admin registrations: the game-admin console.

Money is read-only here: balances change only through the ledger service
(the "grant currency" action on players, or ``manage.py grant``), and
ledger rows are never edited. A round's secret and nonce are never shown
while it is open; a round is created from an emoji set and a keyboard size
and ``rounds.create_round`` draws the keyboard and secret; rounds close
through the "settle now" / "void" actions, which go through settlement.
Each round's leaderboard page reads Valkey and can rebuild it from the
database."""
from datetime import timedelta

import echomq
import redis
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from echomq.contrib.django import get_client

from . import leaderboard, rounds, settlement, wallet
from .forms import GrantForm, RoundCreateForm
from .models import EmojiSet, Guess, LedgerEntry, Lock, Notification, Player, Round, RoundEntry, Wallet


class ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(EmojiSet)
class EmojiSetAdmin(admin.ModelAdmin):
    list_display = ("slug", "title", "size")

    @admin.display(description="emojis")
    def size(self, obj):
        return len(obj.emojis)


@admin.register(Round)
class RoundAdmin(admin.ModelAdmin):
    list_display = ("id", "title", "status", "kind", "players", "guess_count", "currency", "guess_price",
                    "prize_pool", "ends_at", "board")
    list_filter = ("status", "kind", "currency")
    search_fields = ("id", "title")
    readonly_fields = ("id", "emoji_set", "keyboard_text", "kind", "currency", "guess_price", "prize_pool",
                       "weights", "commitment", "revealed_secret", "status", "created_at", "settled_at", "result")
    fields = ("id", "title", "ends_at") + readonly_fields[1:]
    add_fields = ("title", "emoji_set", "keyboard_size", "kind", "currency", "guess_price", "prize_pool",
                  "minutes", "weights")
    actions = ("settle_now", "void", "rebuild_leaderboards")

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(
            n_players=Count("guesses__player", distinct=True), n_guesses=Count("guesses", distinct=True))

    @admin.display(description="players", ordering="n_players")
    def players(self, obj):
        return obj.n_players

    @admin.display(description="guesses", ordering="n_guesses")
    def guess_count(self, obj):
        return obj.n_guesses

    @admin.display(description="leaderboard")
    def board(self, obj):
        return format_html('<a href="{}">view</a>', reverse("admin:games_round_leaderboard", args=[obj.pk]))

    # Creating: pick the set and keyboard size; the secret is drawn, never typed.
    def get_fields(self, request, obj=None):
        return self.add_fields if obj is None else self.fields

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly_fields

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = RoundCreateForm
        return super().get_form(request, obj, **kwargs)

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        data = form.cleaned_data
        made = rounds.create_round(
            data["emoji_set"], kind=data["kind"], currency=data["currency"], guess_price=data["guess_price"],
            prize_pool=data["prize_pool"], keyboard_size=data["keyboard_size"], title=data["title"],
            duration=timedelta(minutes=data["minutes"]),
            weights=data["weights"] if data["kind"] == Round.Kind.BLIND else None)
        # The admin goes on to log, message and redirect with ``obj``.
        for field in Round._meta.concrete_fields:
            setattr(obj, field.attname, getattr(made, field.attname))
        obj._state.adding = False

    def has_delete_permission(self, request, obj=None):
        return False  # void instead: it refunds

    @admin.display(description="keyboard")
    def keyboard_text(self, obj):
        return " ".join(obj.keyboard)

    @admin.display(description="secret / nonce")
    def revealed_secret(self, obj):
        if not obj.revealed:
            return "hidden until settled"
        return " ".join(obj.secret) + (f"  nonce {obj.nonce}" if obj.nonce else "")

    @admin.action(description="Settle now (through the settle queue)")
    def settle_now(self, request, queryset):
        for rnd in queryset:
            status = settlement.request_settlement(rnd.pk, "admin")
            self.message_user(request, f"{rnd.pk}: settlement {status or 'request failed; try again'}",
                              messages.INFO if status else messages.ERROR)

    @admin.action(description="Void and refund every guess")
    def void(self, request, queryset):
        for rnd in queryset:
            out = settlement.void_round(rnd.pk)
            self.message_user(request, f"{rnd.pk}: {out.action}")

    @admin.action(description="Rebuild leaderboards from the database")
    def rebuild_leaderboards(self, request, queryset):
        for rnd in queryset:
            self.message_user(request, f"{rnd.pk}: leaderboard rebuilt, {leaderboard.rebuild(rnd.pk)} players")

    # The per-round leaderboard, live from Valkey.
    def get_urls(self):
        view = self.admin_site.admin_view(self.leaderboard_view)
        return [path("<path:object_id>/leaderboard/", view, name="games_round_leaderboard")] + super().get_urls()

    def leaderboard_view(self, request, object_id):
        """Staff see every round's board (blind ones too) and whether it
        still matches the database; POST rebuilds it from the database."""
        rnd = self.get_object(request, object_id)
        if rnd is None:
            raise Http404("no such round")
        if not self.has_view_permission(request, rnd):
            raise PermissionDenied
        if request.method == "POST":
            if not self.has_change_permission(request, rnd):
                raise PermissionDenied
            n = leaderboard.rebuild(rnd.pk)
            self.message_user(request, f"Leaderboard rebuilt from the database: {n} players.")
            return HttpResponseRedirect(request.path)
        try:
            standings, matches = leaderboard.top(rnd.pk, 100), leaderboard.live(rnd.pk) == leaderboard.from_db(rnd.pk)
        except echomq.UNAVAILABLE as exc:
            self.message_user(request, f"Valkey did not answer ({exc}); showing the database's standings.",
                              messages.ERROR)
            standings, matches = leaderboard.standings_from_db(rnd.pk)[:100], None
        names = dict(Player.objects.filter(pk__in=[s.player_id for s in standings]).values_list("pk", "user__username"))
        rows = [(s, names.get(s.player_id, "?")) for s in standings]
        return TemplateResponse(request, "admin/games/round/leaderboard.html", {
            **self.admin_site.each_context(request), "opts": self.model._meta, "original": rnd,
            "title": f"Leaderboard of {rnd}", "rnd": rnd, "rows": rows, "matches": matches,
            "can_rebuild": self.has_change_permission(request, rnd)})


@admin.register(Player)
class PlayerAdmin(admin.ModelAdmin):
    list_display = ("id", "user", "keys", "clips", "diamonds", "created_at")
    list_select_related = ("user", "wallet")
    search_fields = ("id", "user__username")
    readonly_fields = ("id", "user", "created_at")
    actions = ("grant_currency",)

    def has_add_permission(self, request):
        return False  # players sign up (or seed_demo makes them)

    @admin.display(description="keys", ordering="wallet__keys")
    def keys(self, obj):
        return getattr(getattr(obj, "wallet", None), "keys", 0)

    @admin.display(description="clips", ordering="wallet__clips")
    def clips(self, obj):
        return getattr(getattr(obj, "wallet", None), "clips", 0)

    @admin.display(description="diamonds", ordering="wallet__diamonds")
    def diamonds(self, obj):
        return getattr(getattr(obj, "wallet", None), "diamonds", 0)

    def _first_use(self, request, token: str) -> bool:
        """Claim the form's one-time token (SET NX in Valkey, shared by every
        web process), so a double-submitted grant is applied once."""
        try:
            first = get_client().set(f"cm:admin-grant:{token}", request.user.pk or 0, nx=True, ex=86_400)
        except Exception as exc:
            self.message_user(request, f"Nothing granted: Valkey is unreachable ({type(exc).__name__}); "
                                       "try again.", messages.ERROR)
            return False
        if not first:
            self.message_user(request, "This grant was already applied; nothing was granted again.",
                              messages.WARNING)
        return bool(first)

    @admin.action(description="Grant currency…")
    def grant_currency(self, request, queryset):
        """Ask for currency, amount and note, then write one ledger row per player."""
        form = GrantForm(request.POST if "apply" in request.POST else None)
        if form.is_valid():
            c, amount, note = (form.cleaned_data[k] for k in ("currency", "amount", "note"))
            if not self._first_use(request, form.cleaned_data["token"]):
                return None
            for player in queryset:
                try:
                    entry = wallet.grant(player, c, amount, reference=note)
                except wallet.WalletError as err:
                    self.message_user(request, f"{player}: {err.message}", messages.ERROR)
                else:
                    self.message_user(request, f"{player}: {entry.delta:+d} {c} -> {entry.balance_after}")
            return None
        return TemplateResponse(request, "admin/games/player/grant.html", {
            **self.admin_site.each_context(request), "opts": self.model._meta, "title": "Grant currency",
            "form": form, "players": queryset, "action_checkbox_name": ACTION_CHECKBOX_NAME})


@admin.register(Wallet)
class WalletAdmin(ReadOnly):
    list_display = ("player", "keys", "clips", "diamonds", "updated_at")
    search_fields = ("player__id", "player__user__username")


@admin.register(LedgerEntry)
class LedgerEntryAdmin(ReadOnly):
    list_display = ("id", "player", "currency", "delta", "balance_after", "reason", "reference", "created_at")
    list_filter = ("currency", "reason")
    search_fields = ("id", "player__id", "reference")


@admin.register(Guess)
class GuessAdmin(ReadOnly):
    list_display = ("id", "player", "round", "status", "total", "price", "currency", "created_at", "scored_at")
    list_filter = ("status",)
    search_fields = ("id", "job_id", "player__id", "round__id")


@admin.register(RoundEntry)
class RoundEntryAdmin(ReadOnly):
    list_display = ("round", "player", "attempts", "best_total", "best_guess")


@admin.register(Lock)
class LockAdmin(ReadOnly):
    list_display = ("player", "round", "position", "emoji")


@admin.register(Notification)
class NotificationAdmin(ReadOnly):
    list_display = ("id", "player", "kind", "text", "created_at", "read_at")
    list_filter = ("kind",)
