"""Typed refusals of a guess or a lock, each with a message fit for a player.

``submit`` checks in the order the rules give: length, round exists, round
open and not past its end, keyboard, then (after the locks) funds, and a
repeat of the player's own earlier guess. A guess may repeat an emoji (the
rules allow it; it just cannot reach 600, and the composer says so).
"""
from __future__ import annotations


class SubmitError(Exception):
    """A guess (or lock) was refused and nothing was changed."""

    code = "refused"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class WrongLength(SubmitError):
    code = "wrong_length"

    def __init__(self, got: int):
        super().__init__(f"A guess is exactly 6 emojis; this one has {got}.")
        self.got = got


class RoundNotFound(SubmitError):
    code = "no_round"

    def __init__(self, round_id):
        super().__init__("That round does not exist.")
        self.round_id = round_id


class RoundClosed(SubmitError):
    code = "closed"

    def __init__(self, status: str):
        super().__init__(f"This round is {status} and takes no more guesses.")
        self.status = status


class RoundExpired(SubmitError):
    code = "expired"

    def __init__(self):
        super().__init__("This round's time is up.")


class OffKeyboard(SubmitError):
    code = "off_keyboard"

    def __init__(self, emojis: list[str]):
        super().__init__("Not on this round's keyboard: " + " ".join(emojis))
        self.emojis = emojis


class BadPosition(SubmitError):
    code = "bad_position"

    def __init__(self, position):
        super().__init__(f"Positions are 0 to 5, not {position!r}.")


class NotEnoughFunds(SubmitError):
    code = "insufficient_funds"

    def __init__(self, currency: str, needed: int, available: int):
        super().__init__(f"Not enough {currency}: a guess costs {needed}, you have {available}.")
        self.currency, self.needed, self.available = currency, needed, available


class RepeatedGuess(SubmitError):
    """The player already made exactly this guess (after locks) in the round."""

    code = "repeated_guess"

    def __init__(self, emojis: list[str]):
        super().__init__("You already guessed " + " ".join(emojis) + " in this round; it would score the same.")
        self.emojis = emojis
