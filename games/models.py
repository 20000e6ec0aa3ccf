"""Codemojex records.

Ids are branded (``RND``, ``PLR``, ``GES``, ``TXN``, ``NOT``; a guess also
carries its ``JOB`` id). Money lives in ``Wallet`` (non-negative, enforced by
CHECK constraints too) and every change to it is one append-only
``LedgerEntry``. The round's secret and nonce are ordinary columns that only
the scoring and settlement code read; nothing that renders a round for a
player (``__str__``, ``__repr__``, ``public_secret``) exposes them before
settlement.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib.admin.models import LogEntry
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone

from echomq import schedules as emq_schedules
from echomq.errors import ArgumentError

from . import emoji_sets, engine
from .emoji_sets import DEFAULT_KEYBOARD_SIZE  # noqa: F401 -- re-exported (rounds, create_round)
from .fields import BrandedIdField

DEFAULT_BLIND_WEIGHTS = [40, 25, 15, 12, 8]
# A pool so large that paying it could overflow a wallet's balance (a
# 64-bit column) would leave its round unsettleable: pools stay far below.
MAX_POOL = 10**12  # diamonds


def default_blind_weights() -> list[int]:
    return list(DEFAULT_BLIND_WEIGHTS)


class Currency(models.TextChoices):
    KEYS = "keys", "keys"
    CLIPS = "clips", "clips"
    DIAMONDS = "diamonds", "diamonds"


class EmojiSet(models.Model):
    """A named list of emojis; rounds snapshot a keyboard from it."""

    slug = models.SlugField(unique=True)
    title = models.CharField(max_length=80)
    emojis = models.JSONField(help_text="a list of emoji strings, each one opaque")

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return f"{self.title} ({len(self.emojis)})"

    def clean(self):
        """Only a set that can make a fair round is saved through a form (the
        admin's included): at least a keyboard of distinct single emojis.
        In ``clean`` rather than a field validator, so no migration is needed."""
        super().clean()
        emoji_sets.validate_emoji_set(self.emojis, field="emojis")


class Round(models.Model):
    class Kind(models.TextChoices):
        CLASSIC = "classic", "classic"
        BLIND = "blind", "blind"

    class Status(models.TextChoices):
        OPEN = "open", "open"
        REVEALING = "revealing", "revealing"
        SETTLED = "settled", "settled"
        VOIDED = "voided", "voided"

    id = BrandedIdField("RND", primary_key=True)
    title = models.CharField(max_length=120, blank=True)
    emoji_set = models.ForeignKey(EmojiSet, on_delete=models.PROTECT, related_name="rounds")
    keyboard = models.JSONField()
    secret = models.JSONField()
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.CLASSIC)
    currency = models.CharField(max_length=8, choices=[(Currency.KEYS, "keys"), (Currency.CLIPS, "clips")],
                                default=Currency.KEYS)
    guess_price = models.PositiveIntegerField(default=1)
    prize_pool = models.PositiveBigIntegerField(default=0, help_text="diamonds")
    weights = models.JSONField(default=default_blind_weights, help_text="blind payout split by rank")
    commitment = models.CharField(max_length=64, blank=True)
    nonce = models.CharField(max_length=32, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    created_at = models.DateTimeField(default=timezone.now)
    ends_at = models.DateTimeField()
    settled_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(default=dict, blank=True, help_text="payouts, written at settlement")
    # A round a schedule opened names it, and the JOB id of the tick that
    # opened it: unique, so a redelivered tick opens nothing more.
    schedule = models.ForeignKey("RoundSchedule", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="rounds", help_text="the schedule that opened it")
    schedule_job = BrandedIdField("JOB", null=True, blank=True, unique=True, default=None,
                                  help_text="the JOB id of the schedule's tick that opened it")

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "ends_at"])]
        constraints = [
            models.CheckConstraint(condition=Q(kind="classic") | ~Q(commitment=""), name="blind_has_commitment"),
        ]
        permissions = [
            ("settle_round", "Can settle or void a round"),
            ("rebuild_leaderboard", "Can rebuild a round's leaderboard"),
        ]

    # Never include the secret or nonce here: these show up in logs and admin.
    def __str__(self) -> str:
        return f"{self.id} {self.title or self.kind} [{self.status}]"

    def clean(self):
        """A new round needs a set that can make one (an older row may
        predate the set validator): every form that adds a round, the
        admin's included, shows why on the set field."""
        super().clean()
        if self._state.adding and self.emoji_set_id is not None:
            emoji_sets.validate_emoji_set(self.emoji_set.emojis, field="emoji_set")

    def __repr__(self) -> str:
        return f"<Round {self.id} kind={self.kind} status={self.status}>"

    @property
    def is_open(self) -> bool:
        return self.status == self.Status.OPEN and timezone.now() < self.ends_at

    @property
    def revealed(self) -> bool:
        return self.status == self.Status.SETTLED

    @property
    def public_secret(self) -> list[str] | None:
        """The secret once the round is settled, else None."""
        return list(self.secret) if self.revealed else None

    @property
    def public_nonce(self) -> str | None:
        return self.nonce if self.revealed and self.nonce else None


MAX_ROUND_MINUTES = 60 * 24 * 30  # a scheduled round lasts at most 30 days (as one made by hand)


class RoundSchedule(models.Model):
    """Opens a round at each tick of a cron line or every N seconds.

    The row is the truth; ``games.schedules`` mirrors it into an EchoMQ
    schedule on ``cm.tasks`` (the timer) and opens the round when a tick
    comes. The round is made from the row as it is at the tick, so changing
    the price or the pool changes the next round, not the timer."""

    class Policy(models.TextChoices):
        SKIP = "skip", "skip the tick"
        ALONGSIDE = "alongside", "open alongside"

    name = models.CharField(max_length=120, unique=True, help_text="the title of the rounds it opens")
    emoji_set = models.ForeignKey(EmojiSet, on_delete=models.PROTECT, related_name="schedules")
    keyboard_size = models.PositiveSmallIntegerField(
        null=True, blank=True, default=DEFAULT_KEYBOARD_SIZE,
        help_text="how many emojis of the set go on each round's keyboard; blank for the whole set")
    kind = models.CharField(max_length=8, choices=Round.Kind.choices, default=Round.Kind.CLASSIC)
    currency = models.CharField(max_length=8, choices=[(Currency.KEYS, "keys"), (Currency.CLIPS, "clips")],
                                default=Currency.KEYS)
    guess_price = models.PositiveIntegerField(default=1)
    prize_pool = models.PositiveBigIntegerField(default=0, help_text="diamonds each round starts with")
    minutes = models.PositiveIntegerField(default=60, help_text="how long each round stays open")
    cron = models.CharField(max_length=emq_schedules.MAX_CRON, blank=True,
                            help_text="a cron line of five fields, e.g. */15 * * * *, in the time zone below")
    every_seconds = models.PositiveIntegerField(null=True, blank=True,
                                                help_text="or a round every this many seconds, on UTC's clock")
    tz = models.CharField("time zone", max_length=emq_schedules.MAX_CRON, default="UTC",
                          help_text="the cron line's time zone, e.g. Europe/Paris")
    active = models.BooleanField(default=True, help_text="untick to pause: no tick opens a round")
    when_open = models.CharField(
        "if its last round is still open", max_length=10, choices=Policy.choices, default=Policy.SKIP,
        help_text="at a tick while a round this schedule opened is still open: skip the tick (one round of "
                  "this schedule at a time), or open the new round alongside it")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=(Q(cron="") & Q(every_seconds__gte=1))
                                   | (~Q(cron="") & Q(every_seconds__isnull=True)),
                                   name="schedule_cron_or_every"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def mirror_name(self) -> str:
        """Its EchoMQ schedule's name."""
        return f"round-schedule-{self.pk}"

    def grid(self):
        """The EchoMQ grid of its ticks (``echomq.schedules.grid``); raises
        ArgumentError for a definition EchoMQ refuses."""
        if self.cron:
            return emq_schedules.grid(cron=self.cron, tz=self.tz)
        return emq_schedules.grid(every_ms=None if self.every_seconds is None else self.every_seconds * 1000)

    def next_runs(self, n: int = 3, after: datetime | None = None) -> list[datetime]:
        """Its next ``n`` ticks after ``after`` (default now), in its time
        zone; ValueError when it has none (a cron line that never fires)."""
        g, zone = self.grid(), ZoneInfo(self.tz)
        ms = int((after or timezone.now()).timestamp() * 1000)
        out = []
        for _ in range(n):
            ms = g.after(ms)
            if ms > emq_schedules.MAX_TICK:
                raise ValueError("no tick before 2093")
            out.append(datetime.fromtimestamp(ms / 1000, zone))
        return out

    @property
    def duration(self) -> timedelta:
        return timedelta(minutes=self.minutes)

    def clean(self):
        """Every problem at once, each on its field: a definition EchoMQ
        refuses (its ArgumentError), a cron line that never fires or ticks
        by the second, a keyboard the set cannot fill."""
        super().clean()
        errors: dict[str, list[str]] = {}
        cron = (self.cron or "").strip()
        self.cron = cron
        if cron and self.every_seconds is not None:
            errors.setdefault(NON_FIELD_ERRORS, []).append("Give a cron line or an interval, not both.")
        elif not cron and self.every_seconds is None:
            errors.setdefault(NON_FIELD_ERRORS, []).append("Give a cron line or an interval.")
        elif cron and not (cron.startswith("@") or len(cron.split()) == 5):
            errors.setdefault("cron", []).append(
                "Five fields: minute hour day-of-month month day-of-week (or @hourly, @daily...); "
                "rounds open at most once a minute, so no seconds field.")
        elif self.every_seconds is not None and self.tz != "UTC":
            errors.setdefault("tz", []).append("An interval ticks on UTC's clock; a time zone goes with a cron "
                                               "line. Leave UTC here, or give a cron line.")
        else:
            try:
                self.next_runs(1)
            except ArgumentError as exc:
                field = "tz" if "time zone" in str(exc) else "cron" if cron else NON_FIELD_ERRORS
                errors.setdefault(field, []).append(f"{str(exc)[:1].upper()}{str(exc)[1:]}.")
            except (ValueError, OverflowError):
                errors.setdefault("cron", []).append("This cron line never fires (e.g. 30 February).")
        if self.minutes is not None and not 1 <= self.minutes <= MAX_ROUND_MINUTES:
            errors.setdefault("minutes", []).append(f"From 1 to {MAX_ROUND_MINUTES} minutes (30 days).")
        if self.prize_pool is not None and self.prize_pool > MAX_POOL:
            errors.setdefault("prize_pool", []).append(f"At most {MAX_POOL:,} diamonds.")
        es = EmojiSet.objects.filter(pk=self.emoji_set_id).first() if self.emoji_set_id else None
        if es is not None:
            try:
                emoji_sets.validate_emoji_set(es.emojis, field="emoji_set")
            except ValidationError as exc:
                errors.setdefault("emoji_set", []).extend(exc.messages)
            size = self.keyboard_size
            if size is not None and not engine.SIZE <= size <= len(es.emojis):
                errors.setdefault("keyboard_size", []).append(
                    f"From {engine.SIZE} to {len(es.emojis)} (the {es.title} set's size), "
                    "or blank for the whole set.")
        if errors:
            raise ValidationError(errors)


class Player(models.Model):
    id = BrandedIdField("PLR", primary_key=True)
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="player")
    created_at = models.DateTimeField(default=timezone.now)
    # Opt-in, on the profile: a notification whenever a new round opens.
    notify_new_rounds = models.BooleanField(default=False, help_text="tell me when a new round opens")

    class Meta:
        permissions = [("grant_currency", "Can grant or take back currency")]

    def __str__(self) -> str:
        return f"{self.user.get_username()} ({self.id})"


class Wallet(models.Model):
    """A player's balances; change them only through ``games.wallet``."""

    player = models.OneToOneField(Player, on_delete=models.PROTECT, primary_key=True, related_name="wallet")
    keys = models.PositiveBigIntegerField(default=0)
    clips = models.PositiveBigIntegerField(default=0)
    diamonds = models.PositiveBigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(keys__gte=0), name="wallet_keys_non_negative"),
            models.CheckConstraint(condition=Q(clips__gte=0), name="wallet_clips_non_negative"),
            models.CheckConstraint(condition=Q(diamonds__gte=0), name="wallet_diamonds_non_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.player_id}: {self.keys} keys, {self.clips} clips, {self.diamonds} diamonds"

    def balance(self, currency: str) -> int:
        return getattr(self, Currency(currency).value)


class LedgerError(Exception):
    """The ledger is append-only."""


class LedgerEntry(models.Model):
    """One balance change. Rows are only ever inserted, never updated or deleted."""

    class Reason(models.TextChoices):
        GRANT = "grant", "grant"
        GUESS = "guess", "guess charge"
        PRIZE = "prize", "prize"
        REFUND = "refund", "refund"
        EXCHANGE = "exchange", "exchange"

    id = BrandedIdField("TXN", primary_key=True)
    player = models.ForeignKey(Player, on_delete=models.PROTECT, related_name="ledger")
    currency = models.CharField(max_length=8, choices=Currency.choices)
    delta = models.BigIntegerField()
    balance_after = models.PositiveBigIntegerField()
    reason = models.CharField(max_length=10, choices=Reason.choices)
    reference = models.CharField(max_length=64, blank=True, help_text="a GES/RND id or a note")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        verbose_name_plural = "ledger entries"
        constraints = [
            # Belt and braces for "charged exactly once", "paid once", "refunded once".
            models.UniqueConstraint(fields=["player", "currency", "reason", "reference"],
                                    condition=Q(reason__in=["guess", "prize", "refund"]),
                                    name="ledger_once_per_reference"),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.player_id} {self.delta:+d} {self.currency} ({self.reason} {self.reference})"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise LedgerError("ledger entries are append-only")
        return super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise LedgerError("ledger entries are append-only")


class AdminGrant(models.Model):
    """One applied "Grant currency" form. Its token is unique, so the
    database -- not a cache -- recognises a second post of the same form
    (a double click, a resubmit) and writes nothing: the ledger rows and
    this row commit together."""

    token = models.CharField(max_length=64, unique=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"grant form {self.token}"


class Lock(models.Model):
    """A player's pinned emoji at one position of one round's guesses."""

    player = models.ForeignKey(Player, on_delete=models.CASCADE, related_name="locks")
    round = models.ForeignKey(Round, on_delete=models.CASCADE, related_name="locks")
    position = models.PositiveSmallIntegerField()
    emoji = models.CharField(max_length=64)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["player", "round", "position"], name="one_lock_per_position"),
            models.CheckConstraint(condition=Q(position__lte=5), name="lock_position_0_to_5"),
        ]

    def __str__(self) -> str:
        # Not the emoji: the admin prints this on the lock's change and history
        # pages, and a lock's emoji is sealed until its round is revealed.
        return f"{self.player_id} {self.round_id} #{self.position}"


class Guess(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        SCORED = "scored", "scored"
        REFUNDED = "refunded", "refunded (round voided)"

    id = BrandedIdField("GES", primary_key=True)
    job_id = BrandedIdField("JOB", unique=True)
    # No index of their own: the unique (player, round, …) constraints and
    # the (round, status) index lead with these columns.
    player = models.ForeignKey(Player, on_delete=models.PROTECT, related_name="guesses", db_index=False)
    round = models.ForeignKey(Round, on_delete=models.CASCADE, related_name="guesses", db_index=False)
    idempotency_key = models.CharField(max_length=64, null=True, blank=True,
                                       help_text="one per player and round: a repeated key answers the first guess")
    emojis_sent = models.JSONField()
    emojis_final = models.JSONField(help_text="after the player's locks")
    currency = models.CharField(max_length=8, choices=Currency.choices)
    price = models.PositiveIntegerField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    total = models.PositiveSmallIntegerField(null=True, blank=True)
    breakdown = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    scored_at = models.DateTimeField(null=True, blank=True)
    # A digest of emojis_final, unique per player and round, so the database
    # refuses a player's exact repeat of an earlier guess (null on guesses
    # made before this column existed).
    fingerprint = models.CharField(max_length=32, null=True, blank=True, editable=False)

    class Meta:
        ordering = ["id"]
        verbose_name_plural = "guesses"
        indexes = [models.Index(fields=["status", "created_at"]), models.Index(fields=["round", "status"])]
        constraints = [
            models.UniqueConstraint(fields=["player", "round", "idempotency_key"], name="guess_idempotency_key"),
            models.UniqueConstraint(fields=["player", "round", "fingerprint"], name="guess_not_repeated"),
        ]
        permissions = [("refund_guess", "Can refund a queued guess and remove its job")]

    def __str__(self) -> str:
        return f"{self.id} {self.player_id} {self.round_id} [{self.status}]"

    @property
    def percentage(self) -> int | None:
        return None if self.total is None else round(self.total / 6)

    def feedback_visible(self) -> bool:
        """Whether the player may see this guess's total and breakdown yet:
        classic rounds show it once scored; blind rounds only after the reveal."""
        return self.status == self.Status.SCORED and (
            self.round.kind == Round.Kind.CLASSIC or self.round.revealed)


class RoundEntry(models.Model):
    """A player's standing in a round: attempts counted and best total.

    Written only on a guess's queued -> scored transition, under the guess's
    row lock, so a redelivered job never counts an attempt twice."""

    round = models.ForeignKey(Round, on_delete=models.CASCADE, related_name="entries")
    player = models.ForeignKey(Player, on_delete=models.PROTECT, related_name="entries")
    attempts = models.PositiveIntegerField(default=0)
    best_total = models.PositiveSmallIntegerField(default=0)
    best_guess = models.CharField(max_length=14, blank=True, help_text="the first GES reaching best_total")

    class Meta:
        verbose_name_plural = "round entries"
        constraints = [models.UniqueConstraint(fields=["round", "player"], name="one_entry_per_player")]

    def __str__(self) -> str:
        # Not the best total: a blind round's totals are sealed until the reveal,
        # and the admin prints this on the entry's change and history pages.
        return f"{self.round_id} {self.player_id}: {self.attempts} attempts"


class Notification(models.Model):
    class Kind(models.TextChoices):
        SETTLED = "settled", "round settled"
        VOIDED = "voided", "round voided"
        OPENED = "opened", "round opened"

    id = BrandedIdField("NOT", primary_key=True)
    player = models.ForeignKey(Player, on_delete=models.CASCADE, related_name="notifications")
    round = models.ForeignKey(Round, on_delete=models.CASCADE, null=True, blank=True, related_name="notifications")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    text = models.CharField(max_length=300)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(fields=["player", "round", "kind"], name="one_notification_per_event")]

    def __str__(self) -> str:
        return f"{self.id} {self.player_id}: {self.text}"


class OperatorAction(LogEntry):
    """The admin's own ``LogEntry`` rows, listed in the console as "Recent
    operator actions" (a proxy: no table of its own)."""

    class Meta:
        proxy = True
        ordering = ["-action_time"]
        verbose_name = "operator action"
        verbose_name_plural = "recent operator actions"
