"""Admin registrations.

Money is read-only here: balances change only through the ledger service
(``manage.py grant``), and ledger rows are never edited. A round's secret
and nonce are never shown while it is open; rounds are created with
``manage.py create_round`` (which draws the keyboard and secret) and closed
with the "settle now" / "void" actions, which go through settlement."""
from django.contrib import admin, messages

from . import settlement
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
    list_display = ("id", "title", "kind", "status", "currency", "guess_price", "prize_pool", "ends_at")
    list_filter = ("status", "kind", "currency")
    search_fields = ("id", "title")
    readonly_fields = ("id", "emoji_set", "keyboard_text", "kind", "currency", "guess_price", "prize_pool",
                       "weights", "commitment", "revealed_secret", "status", "created_at", "settled_at", "result")
    fields = ("id", "title", "ends_at") + readonly_fields[1:]
    actions = ("settle_now", "void")

    def has_add_permission(self, request):
        return False  # manage.py create_round draws the keyboard and the secret

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


@admin.register(Player)
class PlayerAdmin(admin.ModelAdmin):
    list_display = ("id", "user", "created_at")
    search_fields = ("id", "user__username")
    readonly_fields = ("id", "user", "created_at")


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
