"""Admin registrations: the game-admin console.

Every write checks a named permission (``games.permissions``), never just
``is_staff``, and leaves a ``LogEntry`` saying who did what and why; the
"Recent operator actions" list shows them newest first. Void and Settle now
ask first, on a page that says what will happen.

Money is read-only here: balances change only through the ledger service
(the "grant currency" action on players, or ``manage.py grant``), and
ledger rows are never edited. Nothing that would let anyone read or infer an
open round's secret -- secret, nonce, a guess's emojis or breakdown, a blind
round's totals -- is shown, filtered, searched or sorted by (see
``games.admin_guard``); a round is created from an emoji set and a keyboard
size and ``rounds.create_round`` draws the secret.
"""
from datetime import datetime, timedelta

import echomq
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.models import CHANGE
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import Count, Q, Sum
from django.http import Http404, HttpResponseRedirect
from django.tasks import TaskResultStatus
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join


from echomq.contrib.django import get_queue
from echomq.errors import ArgumentError

from . import guesses, leaderboard, rounds, schedules, settlement, tasks, wallet
from .admin_forms import GrantForm, RoundChangeForm, RoundCreateForm, RoundScheduleForm
from .admin_guard import GuardedAdmin, hidden_words, sealed_value
from .models import (AdminGrant, EmojiSet, Guess, LedgerEntry, Lock, Notification, OperatorAction, Player, Round,
                     RoundEntry, RoundSchedule, Wallet)
from .permissions import GRANT, REBUILD, SETTLE
from .views.common import amount

admin.site.site_header = "Codemojex admin"
admin.site.site_title = "Codemojex admin"
admin.site.index_title = "Codemojex console"


def reached_after(ms: int) -> str:
    """``6 min 33 s`` (or ``1 h 2 min 5 s``, ``12 s``, ``under 1 s``)."""
    secs = ms // 1000
    if secs < 1:
        return "under 1 s"
    h, rest = divmod(secs, 3600)
    m, s = divmod(rest, 60)
    parts = [f"{h} h" if h else "", f"{m} min" if m else "", f"{s} s" if s else ""]
    return " ".join(p for p in parts if p)


def job_link(job_id: str, queue: str = guesses.QUEUE):
    """The job id, linked to its queue-dashboard page (which checks its own
    permission)."""
    return format_html('<a href="{}">{}</a>', reverse("echomq:job", args=[queue, job_id]), job_id)


class ReadOnly(GuardedAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(EmojiSet)
class EmojiSetAdmin(GuardedAdmin):
    list_display = ("slug", "title", "size")

    @admin.display(description="emojis")
    def size(self, obj):
        return len(obj.emojis)


# -- rounds ------------------------------------------------------------------
def void_preview(rnd: Round) -> str:
    """What voiding the round does, in one paragraph."""
    if rnd.status not in settlement.CLOSEABLE:
        return f"Already {rnd.status}: nothing happens."
    charged = (rnd.guesses.filter(price__gt=0).exclude(status=Guess.Status.REFUNDED)
               .values("currency").annotate(n=Count("id"), amount=Sum("price"),
                                            players=Count("player", distinct=True)))
    queued = rnd.guesses.filter(status=Guess.Status.QUEUED).count()
    refunds = "; ".join(f"{c['n']} guess charge{'s' * (c['n'] != 1)} refunded, {amount(c['amount'], c['currency'])} "
                        f"back to {c['players']} player{'s' * (c['players'] != 1)}" for c in charged)
    return (f"{refunds or 'No guess was charged, so nothing is refunded'}. "
            f"{queued} queued guess{'es' * (queued != 1)} will never be scored. The round closes as voided, "
            "nobody is paid, its players are notified, and the secret is never revealed.")


def settle_preview(rnd: Round) -> str:
    """What settling the round now does. A blind round's totals stay sealed,
    so its preview gives the rule and the count of players, not the ranks."""
    if rnd.status not in settlement.CLOSEABLE:
        return f"Already {rnd.status}: nothing happens."
    counts = rnd.guesses.aggregate(players=Count("player", distinct=True),
                                   queued=Count("id", filter=Q(status=Guess.Status.QUEUED)))
    head = (f"The round closes now: no more guesses; {counts['queued']} queued guess"
            f"{'es are' if counts['queued'] != 1 else ' is'} scored first. ")
    if rnd.kind == Round.Kind.BLIND:
        k = min(len(rnd.weights), counts["players"])
        n = counts["players"]
        return head + (f"Then the secret is revealed and checked against the commitment, and the pool of "
                       f"💎 {rnd.prize_pool} goes to the top {k} of {n} player{'s' * (n != 1)} by best total "
                       f"(weights {'/'.join(str(w) for w in rnd.weights)}); totals stay sealed here until then.")
    standings = leaderboard.standings_from_db(rnd.pk)
    best = standings[0].total if standings else 0
    if not best or not rnd.prize_pool:
        return head + f"As it stands nobody is paid: the house keeps the pool of 💎 {rnd.prize_pool}."
    tied = [s.player_id for s in standings if s.total == best]
    names = dict(Player.objects.filter(pk__in=tied).values_list("pk", "user__username"))
    who = ", ".join(names.get(p, p) for p in tied)
    if len(tied) == 1:
        return head + f"As it stands {who} takes the whole pool, 💎 {rnd.prize_pool}, with {best}/600."
    share = rnd.prize_pool // len(tied)
    dust = rnd.prize_pool - share * len(tied)
    return head + (f"As it stands {len(tied)} players tie at {best}/600 ({who}) and share the pool of "
                   f"💎 {rnd.prize_pool}: 💎 {share} each{f', the house keeps 💎 {dust}' if dust else ''}.")


def outcome_html(rnd: Round):
    """The ``result`` settlement wrote, as an operator reads it."""
    result = rnd.result or {}
    if not result:
        return "Written when the round closes."
    early = ""
    if result.get("scheduled_end"):
        due = timezone.localtime(datetime.fromisoformat(result["scheduled_end"]))
        early = f" Closed early: it was due to end {due:%Y-%m-%d %H:%M %Z}."
    if "voided" in result:
        n = result.get("refunded_guesses", 0)
        return f"Voided ({result['voided']}): {n} guess charge{'s' * (n != 1)} refunded; nobody was paid.{early}"
    paid = result.get("payouts", [])
    names = dict(Player.objects.filter(pk__in=[p["player"] for p in paid]).values_list("pk", "user__username"))
    players = result.get("players", 0)
    head = format_html("{} player{} scored; pool 💎 {}, the house keeps 💎 {}.", players, "s" * (players != 1),
                       result.get("pool", rnd.prize_pool), result.get("house", 0))
    head = format_html("{}{}", head, early)
    if not paid:
        return format_html("{} Nobody was paid.", head)
    rows = format_html_join("", "<li>#{} {} <span class=\"quiet\">{}</span>: {}/600, 💎 {}</li>",
                            ((p.get("place", p["rank"]), names.get(p["player"], "(gone)"), p["player"], p["total"],
                              p["prize"]) for p in paid))
    return format_html("{}<ul>{}</ul>", head, rows)


@admin.register(Round)
class RoundAdmin(GuardedAdmin):
    list_display = ("id", "title", "status", "kind", "players", "guess_count", "currency", "guess_price",
                    "prize_pool", "ends_at", "board")
    list_filter = ("status", "kind", "currency", "schedule")
    search_fields = ("id", "title")
    readonly_fields = ("id", "emoji_set", "keyboard_text", "kind", "currency", "guess_price", "prize_pool",
                       "weights", "commitment", "revealed_secret", "status", "created_at", "settled_at", "outcome",
                       "opened_by")
    BLIND_ONLY = ("weights", "commitment")
    fields = ("id", "title", "ends_at") + readonly_fields[1:]
    add_fields = ("title", "emoji_set", "keyboard_size", "kind", "currency", "guess_price", "prize_pool",
                  "minutes", "weights")
    actions = ("settle_now", "void", "rebuild_leaderboards")

    def has_delete_permission(self, request, obj=None):
        return False  # void instead: it refunds

    def has_settle_permission(self, request):
        return request.user.has_perm(SETTLE)

    def has_rebuild_permission(self, request):
        return request.user.has_perm(REBUILD)

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
        if obj is None:
            return self.add_fields
        if obj.kind == Round.Kind.CLASSIC:  # a classic round has no weights and no commitment
            return tuple(f for f in self.fields if f not in self.BLIND_ONLY)
        return self.fields

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return ()
        # The end decides when the round closes (and a blind round reveals):
        # only a settler moves it, and only while the round is open.
        if obj.status != Round.Status.OPEN or not self.has_settle_permission(request):
            return self.readonly_fields + ("ends_at",)
        return self.readonly_fields

    def get_form(self, request, obj=None, **kwargs):
        kwargs["form"] = RoundCreateForm if obj is None else RoundChangeForm
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

    @admin.display(description="keyboard")
    def keyboard_text(self, obj):
        return " ".join(obj.keyboard)

    @admin.display(description="result")
    def outcome(self, obj):
        """What settling or voiding the round did, in words (``result`` is
        the JSON settlement wrote)."""
        return outcome_html(obj)

    @admin.display(description="opened by")
    def opened_by(self, obj):
        if obj.schedule_job is None:
            return "an operator, by hand"
        tick = f"{schedules.tick_time(obj.schedule_job):%Y-%m-%d %H:%M:%S} UTC"
        if obj.schedule_id is None:
            return format_html("a schedule since deleted, at its tick of {} ({})", tick,
                               job_link(obj.schedule_job, tasks.QUEUE))
        return format_html('the schedule <a href="{}">{}</a>, at its tick of {} ({})',
                           reverse("admin:games_roundschedule_change", args=[obj.schedule_id]), obj.schedule, tick,
                           job_link(obj.schedule_job, tasks.QUEUE))

    @admin.display(description="secret / nonce")
    def revealed_secret(self, obj):
        if not obj.revealed:
            return "hidden until settled"
        return " ".join(obj.secret) + (f"  nonce {obj.nonce}" if obj.nonce else "")

    def _confirm(self, request, queryset, action: str, verb: str, preview, now: str = ""):
        """The page that says what ``action`` will do to each round."""
        rows = [(rnd, preview(rnd)) for rnd in queryset]
        these = "this round" if len(rows) == 1 else f"these {len(rows)} rounds"
        return TemplateResponse(request, "admin/games/round/confirm.html", {
            **self.admin_site.each_context(request), "opts": self.model._meta,
            "title": f"{verb} {len(rows)} round{'s' * (len(rows) != 1)}{now}?", "rows": rows, "action": action,
            "verb": verb, "yes": f"Yes, {verb.lower()} {these}{now}", "action_checkbox_name": ACTION_CHECKBOX_NAME})

    @admin.action(description="Settle now (through the settle queue)…", permissions=["settle"])
    def settle_now(self, request, queryset):
        if request.POST.get("confirm") != "yes":
            return self._confirm(request, queryset, "settle_now", "Settle", settle_preview, now=" now")
        for rnd in queryset:
            if rnd.status not in settlement.CLOSEABLE:
                self.message_user(request, f"{rnd.pk}: already {rnd.status}; nothing to settle.", messages.WARNING)
                continue
            status = settlement.request_settlement(rnd.pk, "admin")
            if status is None:
                self.message_user(request, f"{rnd.pk}: settlement request failed (Valkey did not answer); "
                                           "nothing changed, try again.", messages.ERROR)
                continue
            self.log_change(request, rnd, f"Settle now: asked the settle queue to close the round "
                                          f"(job {settlement.settle_job_id(rnd.pk)}, {status}).")
            self.message_user(request, f"{rnd.pk}: settlement {status}.")

    @admin.action(description="Void and refund every guess…", permissions=["settle"])
    def void(self, request, queryset):
        if request.POST.get("confirm") != "yes":
            return self._confirm(request, queryset, "void", "Void", void_preview)
        for rnd in queryset:
            out = settlement.void_round(rnd.pk)
            if out.action != "voided":
                self.message_user(request, f"{rnd.pk}: {out.action}; nothing changed.", messages.WARNING)
                continue
            refunded = Round.objects.get(pk=rnd.pk).result.get("refunded_guesses", 0)
            self.log_change(request, rnd, f"Voided: {refunded} guess charge{'s' * (refunded != 1)} refunded "
                                          "through the ledger.")
            self.message_user(request, f"{rnd.pk}: voided, {refunded} guess charge{'s' * (refunded != 1)} refunded.")

    @admin.action(description="Rebuild leaderboards from the database", permissions=["rebuild"])
    def rebuild_leaderboards(self, request, queryset):
        for rnd in queryset:
            n = leaderboard.rebuild(rnd.pk)
            self.log_change(request, rnd, f"Rebuilt the leaderboard from the database: {n} players.")
            self.message_user(request, f"{rnd.pk}: leaderboard rebuilt, {n} players")

    # The per-round leaderboard, live from Valkey.
    def get_urls(self):
        view = self.admin_site.admin_view(self.leaderboard_view)
        return [path("<path:object_id>/leaderboard/", view, name="games_round_leaderboard")] + super().get_urls()

    def leaderboard_view(self, request, object_id):
        """Staff see every round's board and whether it still matches the
        database; a blind round's totals and ranks stay sealed until the
        reveal. POST rebuilds it from the database."""
        rnd = self.get_object(request, object_id)
        if rnd is None:
            raise Http404("no such round")
        if not self.has_view_permission(request, rnd):
            raise PermissionDenied
        if request.method == "POST":
            if not self.has_rebuild_permission(request):
                raise PermissionDenied
            n = leaderboard.rebuild(rnd.pk)
            self.log_change(request, rnd, f"Rebuilt the leaderboard from the database: {n} players.")
            self.message_user(request, f"Leaderboard rebuilt from the database: {n} players.")
            return HttpResponseRedirect(request.path)
        sealed = rnd.kind == Round.Kind.BLIND and not rnd.revealed
        try:
            board = leaderboard.live(rnd.pk)
            standings, matches = leaderboard.top(rnd.pk, 100), board == leaderboard.from_db(rnd.pk)
        except echomq.UNAVAILABLE as exc:
            self.message_user(request, f"Valkey did not answer ({exc}); showing the database's standings.",
                              messages.ERROR)
            board, matches = leaderboard.from_db(rnd.pk), None
            standings = leaderboard.standings_from_db(rnd.pk)[:100]
        on_board = len(board)
        if sealed:
            # No order, no totals: the first 100 players *by name* of the
            # whole board (the top 100 by total would tell who trails).
            rows = sorted(((None, name, None, pid) for pid, name in
                           Player.objects.filter(pk__in=list(board)).values_list("pk", "user__username")),
                          key=lambda r: (r[1], r[3]))[:100]
        else:
            names = dict(Player.objects.filter(pk__in=[s.player_id for s in standings])
                         .values_list("pk", "user__username"))
            rows = [(s, names.get(s.player_id, "?"), reached_after(s.offset_ms)) for s in standings]
        return TemplateResponse(request, "admin/games/round/leaderboard.html", {
            **self.admin_site.each_context(request), "opts": self.model._meta, "original": rnd,
            "title": f"Leaderboard of {rnd}", "rnd": rnd, "rows": rows, "matches": matches, "sealed": sealed,
            "on_board": on_board,
            "can_rebuild": self.has_rebuild_permission(request)})


# -- round schedules ---------------------------------------------------------------
def when_text(s: RoundSchedule) -> str:
    if s.cron:
        return f"cron {s.cron} ({s.tz})"
    secs = s.every_seconds or 0
    if secs % 60:
        return f"every {secs} s"
    return f"every {secs // 60} minute{'s' * (secs != 60)}"


def runs_text(s: RoundSchedule, n: int = 3) -> str:
    """Its next ``n`` ticks in its time zone (a row saved outside a form may have none)."""
    try:
        runs = s.next_runs(n)
    except (ArgumentError, ValueError, OverflowError):
        return "never: this definition has no next tick"
    return ", ".join(f"{t:%Y-%m-%d %H:%M}" for t in runs) + f" {s.tz}"


@admin.register(RoundSchedule)
class RoundScheduleAdmin(GuardedAdmin):
    """Rounds on a schedule (``games.schedules``): saving mirrors the row
    into its EchoMQ schedule after the commit; Django's add, change and
    delete log themselves, Pause and Resume are changes and log too."""

    form = RoundScheduleForm
    list_display = ("name", "when", "kind", "terms", "active", "when_open", "next_runs", "opened")
    list_filter = ("active", "kind", "when_open")
    search_fields = ("name",)
    actions = ("pause", "resume")
    readonly_fields = ("next_runs", "mirror", "opened_rounds")
    fieldsets = (
        (None, {"fields": ("name", "active")}),
        ("The rounds it opens", {"fields": ("emoji_set", "keyboard_size", "kind", "currency", "guess_price",
                                            "prize_pool", "minutes")}),
        ("When", {"fields": ("cron", "every_minutes", "tz", "when_open")}),
        ("What it does", {"fields": readonly_fields}),
    )

    def get_fieldsets(self, request, obj=None):
        return self.fieldsets if obj is not None else self.fieldsets[:-1]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("emoji_set").annotate(n_rounds=Count("rounds"))

    @admin.display(description="when")
    def when(self, obj):
        return when_text(obj)

    @admin.display(description="or every N minutes")
    def every_minutes(self, obj):  # what a reader without the change permission sees
        return when_text(obj) if obj.every_seconds else "—"

    @admin.display(description="rounds")
    def terms(self, obj):
        return (f"{obj.minutes} min, {amount(obj.guess_price, obj.currency)} a guess, 💎 {obj.prize_pool}, "
                f"{obj.emoji_set.slug}")

    @admin.display(description="next three ticks")
    def next_runs(self, obj):
        if obj.pk is not None and not obj.active:
            return "paused: " + runs_text(obj)
        return runs_text(obj)

    def _rounds_url(self, obj) -> str:
        return reverse("admin:games_round_changelist") + f"?schedule__id__exact={obj.pk}"

    @admin.display(description="rounds opened", ordering="n_rounds")
    def opened(self, obj):
        return format_html('<a href="{}">{}</a>', self._rounds_url(obj), obj.n_rounds)

    @admin.display(description="rounds it opened")
    def opened_rounds(self, obj):
        latest = list(obj.rounds.order_by("-created_at")[:5])
        if not latest:
            return "none yet"
        items = format_html_join("", '<li><a href="{}">{}</a></li>',
                                 ((reverse("admin:games_round_change", args=[r.pk]), str(r)) for r in latest))
        return format_html('<ul>{}</ul><a href="{}">all {} of them</a>', items, self._rounds_url(obj),
                           obj.rounds.count())

    @admin.display(description="in EchoMQ")
    def mirror(self, obj):
        """Its mirror in Valkey: next tick, the last tick and what it did."""
        try:
            row = next((r for r in get_queue(tasks.QUEUE).schedules() if r["name"] == obj.mirror_name), None)
        except echomq.UNAVAILABLE as exc:
            return f"Valkey did not answer ({type(exc).__name__}); the rounds open when it does."
        where = f"{tasks.QUEUE} / {obj.mirror_name}"
        if row is None:
            return f"{where}: not there; the reaper mirrors it within seconds."
        state = ("paused" if row["paused"] else
                 f"next tick {timezone.localtime(self._ms(row['next_ms'])):%Y-%m-%d %H:%M:%S %Z}")
        if not row["last_job"]:
            return f"{where}: {state}; no tick yet."
        did = self._tick_outcome(row["last_job"])
        return format_html("{}: {}; last tick {} ({}){}", where, state,
                           f"{timezone.localtime(self._ms(row['last_ms'])):%Y-%m-%d %H:%M:%S %Z}",
                           job_link(row["last_job"], tasks.QUEUE), f": {did}" if did else "")

    @staticmethod
    def _ms(ms: int) -> datetime:
        return datetime.fromtimestamp(ms / 1000, tz=timezone.get_current_timezone())

    @staticmethod
    def _tick_outcome(job_id: str) -> str:
        """What the tick's task did, from its result (gone after its TTL)."""
        try:
            result = schedules.open_scheduled_round.get_result(job_id)
        except Exception:  # no result (yet, or any more): the job link tells the rest
            return ""
        if result.status != TaskResultStatus.SUCCESSFUL:
            return result.status.lower()
        value = result.return_value
        return value.get("why", "") if isinstance(value, dict) else ""

    @admin.action(description="Pause: their ticks open no round", permissions=["change"])
    def pause(self, request, queryset):
        self._set_active(request, queryset, False)

    @admin.action(description="Resume from the next tick", permissions=["change"])
    def resume(self, request, queryset):
        self._set_active(request, queryset, True)

    def _set_active(self, request, queryset, active: bool) -> None:
        done = []
        for s in queryset.filter(active=not active):
            s.active = active
            s.save(update_fields=["active", "updated_at"])  # its mirror follows on commit
            self.log_change(request, s, "Resumed: it opens a round from its next tick." if active
                            else "Paused: its ticks open no round until it is resumed.")
            done.append(s.name)
        verb = "resumed" if active else "paused"
        self.message_user(request, f"{len(done)} schedule{'s' * (len(done) != 1)} {verb}"
                                   f"{': ' + ', '.join(done) if done else ' (nothing to change)'}.")


# -- players and money -----------------------------------------------------------
@admin.register(Player)
class PlayerAdmin(ReadOnly):
    list_display = ("id", "user", "keys", "clips", "diamonds", "created_at")
    list_select_related = ("user", "wallet")
    search_fields = ("id", "user__username")
    fields = readonly_fields = ("id", "user", "created_at")
    actions = ("grant_currency",)

    def has_grant_permission(self, request):
        return request.user.has_perm(GRANT)

    @admin.display(description="keys", ordering="wallet__keys")
    def keys(self, obj):
        return getattr(getattr(obj, "wallet", None), "keys", 0)

    @admin.display(description="clips", ordering="wallet__clips")
    def clips(self, obj):
        return getattr(getattr(obj, "wallet", None), "clips", 0)

    @admin.display(description="diamonds", ordering="wallet__diamonds")
    def diamonds(self, obj):
        return getattr(getattr(obj, "wallet", None), "diamonds", 0)

    @admin.action(description="Grant currency…", permissions=["grant"])
    def grant_currency(self, request, queryset):
        """Ask for currency, amount and reason, then write one ledger row per
        player, and one admin-log entry per player saying who, what and why.

        The form's one-time token is written (``AdminGrant``, unique) in the
        same transaction as the ledger rows, so a second post of the same
        form writes nothing: the database recognises it, whatever a cache
        may have lost."""
        form = GrantForm(request.POST if "apply" in request.POST else None)
        if form.is_valid():
            c, n, reason = (form.cleaned_data[k] for k in ("currency", "amount", "reason"))
            done = []
            try:
                with transaction.atomic():
                    AdminGrant.objects.create(token=form.cleaned_data["token"], user=request.user)
                    for player in queryset:
                        try:
                            done.append((player, wallet.grant(player, c, n, reference=reason)))
                        except wallet.WalletError as err:  # this player's row only (its own savepoint)
                            self.message_user(request, f"{player}: {err.message}", messages.ERROR)
                    if not done:  # nothing granted: the form's token stays unused, so it may be sent again
                        transaction.set_rollback(True)
            except IntegrityError:
                self.message_user(request, "This grant was already applied; nothing was granted again.",
                                  messages.WARNING)
                return None
            for player, entry in done:
                self.log_change(request, player, f"Granted {amount(entry.delta, c, signed=True)} (ledger {entry.pk}, "
                                                 f"balance {entry.balance_after}); reason: {reason}")
                self.message_user(request, f"{player}: {amount(entry.delta, c, signed=True)} -> {entry.balance_after}")
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


# -- guesses: sealed until their round is revealed ----------------------------------
@admin.register(Guess)
class GuessAdmin(ReadOnly):
    list_display = ("id", "player", "round", "status", "shown_total", "price", "currency", "created_at",
                    "scored_at", "job")
    list_select_related = ("round", "player__user")
    list_filter = ("status",)
    search_fields = ("id", "job_id", "player__id", "round__id", "player__user__username")
    fields = ("id", "job", "player", "round", "status", "shown_emojis_sent", "shown_emojis_final", "shown_total",
              "shown_breakdown", "price", "currency", "created_at", "scored_at")
    readonly_fields = fields

    @admin.display(description="job")
    def job(self, obj):
        return job_link(obj.job_id)

    @admin.display(description="total")
    def shown_total(self, obj):
        if obj.total is None:
            return "—"
        return obj.total if obj.round.kind == Round.Kind.CLASSIC or obj.round.revealed else hidden_words(obj.round)

    @admin.display(description="emojis sent")
    def shown_emojis_sent(self, obj):
        return sealed_value(" ".join(obj.emojis_sent), obj.round)

    @admin.display(description="emojis after locks")
    def shown_emojis_final(self, obj):
        return sealed_value(" ".join(obj.emojis_final), obj.round)

    @admin.display(description="breakdown")
    def shown_breakdown(self, obj):
        return sealed_value(obj.breakdown, obj.round)


@admin.register(RoundEntry)
class RoundEntryAdmin(ReadOnly):
    list_display = ("round", "player", "attempts", "shown_best_total", "shown_best_guess")
    list_select_related = ("round", "player__user")
    fields = readonly_fields = ("round", "player", "attempts", "shown_best_total", "shown_best_guess")

    @staticmethod
    def _visible(obj) -> bool:
        """A classic round's totals are public as they come; a blind round's
        only once it is revealed (a voided one never is)."""
        return obj.round.kind == Round.Kind.CLASSIC or obj.round.revealed

    @admin.display(description="best total")
    def shown_best_total(self, obj):
        return obj.best_total if self._visible(obj) else hidden_words(obj.round)

    @admin.display(description="best guess")
    def shown_best_guess(self, obj):
        return obj.best_guess if self._visible(obj) else hidden_words(obj.round)  # which guess was best says how it scored


@admin.register(Lock)
class LockAdmin(ReadOnly):
    list_display = ("player", "round", "position", "shown_emoji")
    list_select_related = ("round", "player__user")
    fields = readonly_fields = ("player", "round", "position", "shown_emoji")

    @admin.display(description="emoji")
    def shown_emoji(self, obj):
        return sealed_value(obj.emoji, obj.round)


@admin.register(Notification)
class NotificationAdmin(ReadOnly):
    list_display = ("id", "player", "kind", "text", "created_at", "read_at")
    list_filter = ("kind",)


# -- the audit trail -----------------------------------------------------------------
@admin.register(OperatorAction)
class OperatorActionAdmin(ReadOnly):
    """Every admin write (Django's own adds and changes, grants, settle,
    void, rebuild, queue actions), newest first."""

    list_display = ("action_time", "user", "target", "message")
    list_select_related = ("user", "content_type")
    search_fields = ("object_repr", "object_id", "change_message", "user__username")
    fields = readonly_fields = ("action_time", "user", "action", "target", "message")
    list_per_page = 50

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {"title": "Recent operator actions", **(extra_context or {})})

    @admin.display(description="action")
    def action(self, obj):
        return {CHANGE: "change"}.get(obj.action_flag) or obj.get_action_flag_display()

    @admin.display(description="on")
    def target(self, obj):
        if obj.content_type and obj.content_type.app_label == "echomq":
            queue, _, job = obj.object_id.partition("/")
            try:
                url = reverse("echomq:job", args=[queue, job]) if job else reverse("echomq:queue", args=[queue])
            except NoReverseMatch:
                return obj.object_repr
            return format_html('<a href="{}">{}</a>', url, obj.object_repr)
        url = obj.get_admin_url()
        label = f"{obj.content_type.name if obj.content_type else ''} {obj.object_repr}".strip()
        return format_html('<a href="{}">{}</a>', url, label) if url else label

    @admin.display(description="what and why")
    def message(self, obj):
        return obj.get_change_message()
