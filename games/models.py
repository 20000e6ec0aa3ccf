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

from django.conf import settings
from django.contrib.admin.models import LogEntry
from django.db import models
from django.db.models import Q
from django.utils import timezone

from . import emoji_sets
from .emoji_sets import DEFAULT_KEYBOARD_SIZE  # noqa: F401 -- re-exported (rounds, create_round)
from .fields import BrandedIdField

DEFAULT_BLIND_WEIGHTS = [40, 25, 15, 12, 8]


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
        return f"{self.player_id} {self.round_id} #{self.position}={self.emoji}"


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
        return f"{self.round_id} {self.player_id}: {self.attempts} attempts, best {self.best_total}"


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
