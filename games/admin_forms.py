"""Forms of the game-admin console (the player pages' forms are in
``games.forms``)."""
from __future__ import annotations

import secrets
from datetime import timedelta

from django import forms
from django.utils import timezone

from . import engine, rounds
from .models import MAX_ROUND_MINUTES, Currency, LedgerEntry, Round, RoundSchedule

REFERENCE_LENGTH = LedgerEntry._meta.get_field("reference").max_length


class SafeJSONField(forms.JSONField):
    """Django's JSON form field, refusing (a form error, not a 500) what
    ``json.loads`` cannot take besides bad syntax: a number of thousands of
    digits (Python's integer-string limit raises ValueError) or nesting
    deep enough to exhaust the recursion limit."""

    def to_python(self, value):
        try:
            return super().to_python(value)
        except (ValueError, RecursionError):
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid", params={"value": "…"})

    def bound_data(self, data, initial):
        try:
            return super().bound_data(data, initial)
        except (ValueError, RecursionError):
            return forms.fields.InvalidJSONInput(data)


class RoundCreateForm(forms.ModelForm):
    """Create a round in the admin. The operator picks the emoji set and
    keyboard size; ``games.rounds.create_round`` draws the keyboard and the
    secret (and a blind round's nonce and commitment), so nobody types or
    sees a secret."""

    keyboard_size = forms.IntegerField(
        required=False, min_value=engine.SIZE, initial=24,
        help_text="How many emojis of the set go on the keyboard; blank for the whole set.")
    minutes = forms.IntegerField(min_value=1, max_value=60 * 24 * 30, initial=60, help_text="How long it stays open.")

    class Meta:
        model = Round
        fields = ["title", "emoji_set", "kind", "currency", "guess_price", "prize_pool", "weights"]
        help_texts = {"weights": "Blind rounds only: the payout split by rank, e.g. [40, 25, 15, 12, 8]."}

    def clean_prize_pool(self):
        pool = self.cleaned_data["prize_pool"]
        if pool is not None and pool > rounds.MAX_POOL:
            raise forms.ValidationError(f"At most {rounds.MAX_POOL:,} diamonds.")
        return pool

    def clean(self):
        data = super().clean()
        es, size = data.get("emoji_set"), data.get("keyboard_size")
        if es is not None and size is not None and size > len(es.emojis):
            self.add_error("keyboard_size", f"The {es.title} set has only {len(es.emojis)} emojis.")
        weights = data.get("weights")
        if weights is not None and rounds.weights_problem(weights):
            self.add_error("weights", rounds.weights_problem(weights))
        return data


class RoundChangeForm(forms.ModelForm):
    """Edit an open round: its title, and (with ``games.settle_round``) its
    end. The end may only move to a time still ahead: closing a round now
    is "Settle now", which says what will happen first and goes through the
    settle queue; an end in the past would let the timer close it at once."""

    class Meta:
        model = Round
        fields = ["title", "ends_at"]

    def clean_ends_at(self):
        ends_at = self.cleaned_data["ends_at"]
        if ends_at != self.instance.ends_at:
            if self.instance.status != Round.Status.OPEN:
                raise forms.ValidationError(f"This round is {self.instance.status}: its end can no longer change.")
            if ends_at <= timezone.now():
                raise forms.ValidationError("The end must be in the future; to close the round now, use "
                                            "\"Settle now\".")
            if ends_at > timezone.now() + timedelta(minutes=MAX_ROUND_MINUTES):
                raise forms.ValidationError(f"At most {MAX_ROUND_MINUTES // (60 * 24)} days from now, as a new "
                                            "round may last.")
        return ends_at


MAX_EVERY_MINUTES = 365 * 24 * 60  # EchoMQ's longest interval: a year


class RoundScheduleForm(forms.ModelForm):
    """A round schedule: the rounds it opens, and when. "When" is a cron line
    (in a time zone) or every N minutes; the model's ``clean`` checks it
    with EchoMQ's own grid (``echomq.schedules.grid``), so what EchoMQ would
    refuse is a form error here, never a 500."""

    every_minutes = forms.IntegerField(
        label="Or every N minutes", required=False, min_value=1, max_value=MAX_EVERY_MINUTES,
        help_text="A round at each whole multiple of N minutes of UTC's clock (every 15: at :00, :15, :30, :45). "
                  "Leave empty when you give a cron line.")

    class Meta:
        model = RoundSchedule
        fields = ["name", "active", "emoji_set", "keyboard_size", "kind", "currency", "guess_price", "prize_pool",
                  "minutes", "cron", "tz", "when_open"]
        labels = {"minutes": "Round length (minutes)", "prize_pool": "Starting pool", "cron": "Cron line"}
        help_texts = {
            "when_open": "At a tick while the last round this schedule opened is still open: <b>skip the tick</b> "
                         "(one round of this schedule at a time; the first tick once it has ended opens the next) or "
                         "<b>open alongside</b> (every tick opens a round, whatever is still open).",
            "cron": "Five fields: minute hour day-of-month month day-of-week, e.g. <code>*/15 * * * *</code> or "
                    "<code>0 20 * * 1-5</code> (or @hourly, @daily…), in the time zone below.",
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        seconds = self.instance.every_seconds
        if seconds and seconds % 60 == 0:
            self.fields["every_minutes"].initial = seconds // 60
        elif seconds:
            self.fields["every_minutes"].help_text += (f" Now every {seconds} seconds (set outside the admin): "
                                                       "saving asks for whole minutes.")

    def clean(self):
        data = super().clean()
        if "every_minutes" in data:  # the model's clean judges it together with the cron line
            minutes = data["every_minutes"]
            self.instance.every_seconds = None if minutes is None else minutes * 60
        return data


class GrantForm(forms.Form):
    """Credit (or, negative, debit) players through the ledger. The reason is
    required: it is the ledger row's reference and goes into the audit log."""

    currency = forms.ChoiceField(choices=Currency.choices)
    amount = forms.IntegerField(min_value=-1_000_000, max_value=1_000_000,
                                help_text="Negative to take back; each player gets one ledger row.")
    reason = forms.CharField(max_length=REFERENCE_LENGTH, strip=True,
                             help_text="Why, e.g. a ticket number: the ledger reference and the audit log say it.")
    # One token per rendered form: a second post of the same form (a double
    # click, a browser resubmit) is recognised and writes nothing.
    token = forms.CharField(widget=forms.HiddenInput, max_length=64,
                            initial=lambda: secrets.token_hex(16))

    def clean_amount(self):
        if self.cleaned_data["amount"] == 0:
            raise forms.ValidationError("Grant a non-zero amount.")
        return self.cleaned_data["amount"]

    def clean_reason(self):
        reason = self.cleaned_data["reason"]
        if any(ord(ch) < 32 or ord(ch) == 127 for ch in reason):
            raise forms.ValidationError("One line of plain text, please.")
        return reason
