"""Forms for the player pages.

A guess being composed (the *draft*) travels as six form fields
``slot0``..``slot5``, one emoji or empty each, so the page works as ordinary
form posts with JavaScript off: every keyboard tap posts the draft plus the
tapped key and comes back with the draft one emoji longer. The JavaScript
does the same edits in the browser (``compose`` below is the one rule both
follow) and only talks to the server to lock, submit and poll.

These forms check the *shape* of what was sent; the game rules (keyboard,
round open, funds) stay in ``games.guesses.submit`` and ``games.locks``,
whose typed errors the views show on the page.
"""
from __future__ import annotations

import re

from django import forms
from django.contrib.auth.forms import AuthenticationForm, UserCreationForm
from django.core.validators import MaxLengthValidator
from django.db import transaction

from . import engine, wallet
from .models import LedgerEntry
from .players import ensure_player

SLOTS = [f"slot{i}" for i in range(engine.SIZE)]
MAX_EMOJI_LENGTH = 64  # an emoji is opaque but short: the Lock.emoji column is 64

# What a new player starts with, credited through the ledger like any grant.
STARTING_BALANCE = {"keys": 50, "clips": 20}
WELCOME = "welcome"  # the starting balance's ledger reference


def welcome(player) -> bool:
    """Credit the starting balance, once per player: at sign-up, or on the
    first visit of an account made elsewhere (``createsuperuser``, the
    admin), which would otherwise be a player who cannot afford a guess.
    Under the wallet's row lock, so two first requests credit it once."""
    with transaction.atomic():
        wallet.lock_wallet(player)
        if LedgerEntry.objects.filter(player=player, reference=WELCOME).exists():
            return False
        for currency, amount in STARTING_BALANCE.items():
            wallet.grant(player, currency, amount, reason=LedgerEntry.Reason.GRANT, reference=WELCOME)
    return True


def compose(slots: list[str], locks: dict[int, str], *, key: str | None = None,
            op: str | None = None) -> list[str]:
    """The draft after one edit. Locked positions always show their lock and
    are never edited: a key fills the first empty unlocked position,
    backspace empties the last filled unlocked one, clear empties them all."""
    out = [locks.get(i, s) for i, s in enumerate(slots)]
    free = [i for i in range(engine.SIZE) if i not in locks]
    if key:
        empty = [i for i in free if not out[i]]
        if empty:
            out[empty[0]] = key
    elif op == "backspace":
        filled = [i for i in free if out[i]]
        if filled:
            out[filled[-1]] = ""
    elif op == "clear":
        for i in free:
            out[i] = ""
    return out


def read_draft(data) -> tuple[list[str], dict[str, list[str]]]:
    """The draft in ``data`` (a form post or a page's query): six strings,
    each stripped, '' for an empty position; and what is wrong with each
    malformed one, by field name (the rules Django's ``CharField(max_length=
    MAX_EMOJI_LENGTH, strip=True)`` applies, plus one emoji per position:
    no whitespace inside). A malformed position reads as empty.

    A plain reader rather than a Django form: it runs on every guess POST
    and every round page, where copying a form's seven fields per request
    cost more than the checks."""
    slots, errors = [], {}
    for name in SLOTS:
        value = data.get(name) or ""
        value = value.strip() if isinstance(value, str) else ""
        if len(value) > MAX_EMOJI_LENGTH:
            errors[name] = [f"Ensure this value has at most {MAX_EMOJI_LENGTH} characters (it has {len(value)})."]
        elif "\x00" in value:
            errors[name] = ["Null characters are not allowed."]
        elif any(ch.isspace() for ch in value):
            errors[name] = ["One emoji per position."]
        slots.append("" if name in errors else value)
    return slots, errors


class DraftForm:
    """The six positions of a guess being composed; empty ones allowed.
    The form interface the views use (``is_valid``, ``errors``,
    ``cleaned_data``, ``slots``) over :func:`read_draft`."""

    def __init__(self, data):
        self._slots, self.errors = read_draft(data)
        self.cleaned_data = {name: slot for name, slot in zip(SLOTS, self._slots) if name not in self.errors}

    def is_valid(self) -> bool:
        return not self.errors

    def slots(self) -> list[str]:
        """The draft as six strings ('' for empty or malformed)."""
        return list(self._slots)

    @classmethod
    def from_query(cls, query) -> list[str]:
        """The draft carried in a page URL, or an empty one if it is not valid."""
        slots, errors = read_draft(query)
        return [""] * engine.SIZE if errors else slots


class GuessForm(DraftForm):
    """Submit the draft. ``token`` is minted per page view and used as the
    submission's idempotency key, so a double click is charged once."""

    TOKEN = re.compile(r"[0-9a-f]{32}")

    def __init__(self, data):
        super().__init__(data)
        token = data.get("token") or ""
        token = token.strip() if isinstance(token, str) else ""
        if token and not self.TOKEN.fullmatch(token):
            self.errors["token"] = ["Enter a valid value."]
            token = ""
        self.cleaned_data["token"] = token

    def emojis(self) -> list[str]:
        """The filled positions in order; ``submit`` refuses fewer than six
        with its own message, so nothing is charged for a short guess."""
        return [s for s in self._slots if s]


class _DraftWithChoices(forms.Form):
    """A Django form for one edit of the draft (the choices below), whose
    six positions are read by :func:`read_draft` like every other draft."""

    def clean(self):
        data = super().clean()
        self._slots, problems = read_draft(self.data)
        for messages in problems.values():
            for message in messages:
                self.add_error(None, message)
        return data

    def slots(self) -> list[str]:
        """The draft as six strings ('' for empty or malformed)."""
        return list(getattr(self, "_slots", None) or read_draft(self.data)[0])


class ComposeForm(_DraftWithChoices):
    """One edit of the draft without JavaScript: a keyboard tap or an op."""

    OPS = [("backspace", "Backspace"), ("clear", "Clear")]

    def __init__(self, *args, keyboard: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["key"] = forms.ChoiceField(required=False, choices=[(e, e) for e in keyboard],
                                               error_messages={"invalid_choice": "That key is not on this keyboard."})
        self.fields["op"] = forms.ChoiceField(required=False, choices=self.OPS)


class LockForm(_DraftWithChoices):
    """Lock a position to the emoji the draft has there, or unlock it."""

    _POSITIONS = [(str(i), str(i + 1)) for i in range(engine.SIZE)]
    lock = forms.TypedChoiceField(required=False, coerce=int, choices=_POSITIONS, empty_value=None)
    unlock = forms.TypedChoiceField(required=False, coerce=int, choices=_POSITIONS, empty_value=None)

    def clean(self):
        data = super().clean()
        if (data.get("lock") is None) == (data.get("unlock") is None):
            raise forms.ValidationError("Choose one position to lock or unlock.")
        position = data.get("lock")
        if position is not None and not self._slots[position]:
            raise forms.ValidationError(f"Put an emoji in position {position + 1} before locking it.")
        return data


class AlertsForm(forms.Form):
    """What a player wants to hear about, on their profile."""

    new_rounds = forms.BooleanField(required=False, label="Tell me when a new round opens")


class ExchangeForm(forms.Form):
    keys = forms.IntegerField(min_value=1, max_value=1_000_000, label="Keys to buy",
                              help_text=f"{wallet.DIAMONDS_PER_KEY} diamonds buy one key.")


class LoginForm(AuthenticationForm):
    """Django's log-in form with its username length enforced. Django sets
    the field's max_length after building it, so no validator checks it and
    any length reaches ``authenticate`` -- and the failed-login record
    django-axes writes (a 255-character column: a 500 on PostgreSQL)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        field = self.fields["username"]
        field.validators.append(MaxLengthValidator(field.max_length))


class SignUpForm(UserCreationForm):
    """Django's sign-up form; saving also makes the player and credits the
    starting balance through the ledger, all in one transaction.

    A refused password is said under "Password", the field to change
    (Django puts it under the confirmation), and a refused form keeps what
    was typed: the password always (so it can be amended), the confirmation
    too when both passwords were accepted (say only the name was taken).
    The page carrying them back is never cached (``views.account.signup``)."""

    def validate_password_for_user(self, user, **kwargs):
        super().validate_password_for_user(user, password_field_name="password1")

    def full_clean(self):
        super().full_clean()
        if not self.is_bound:
            return
        self.fields["password1"].widget.render_value = True
        self.fields["password2"].widget.render_value = not (self.has_error("password1")
                                                            or self.has_error("password2"))
        first = next((name for name in self.fields if self.has_error(name)), None)
        for name, field in self.fields.items():
            if name == first:
                field.widget.attrs["autofocus"] = True
            else:
                field.widget.attrs.pop("autofocus", None)

    @transaction.atomic
    def save(self, commit=True):
        user = super().save(commit=True)
        welcome(ensure_player(user))
        return user
