"""The game's resolvers for the queue dashboard: from a job to its guess,
player and round and back, what the database knows of a finished job, and
the honest way to remove a queued guess's job.

A queued guess is charged, and the reaper's relay re-sends any queued guess
that has no job, so removing its job alone does not stop it: the job comes
back within seconds. The confirmation page says so and offers "remove and
refund this guess", which marks the guess refunded and credits the charge
back through the ledger (once: the ledger's unique reference guards it)
before the job is removed; the relay leaves refunded guesses alone and the
worker drops their jobs.
"""
from __future__ import annotations

import json
from functools import partial

from django.contrib.admin.models import CHANGE, LogEntry
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from echomq import ids
from echomq.contrib.django.resolvers import About, Found, RemoveOption, Resolver, register

from . import guesses, settlement, tasks, wallet
from .admin_guard import HIDDEN
from .models import Guess, LedgerEntry, Player, Round
from .permissions import REFUND
from .views.common import amount

SEARCH_LIMIT = 20


def _change_url(model: str, pk: str) -> str:
    return reverse(f"admin:games_{model}_change", args=[pk])


def player_lane_labels(lanes: list[str]) -> dict[str, str]:
    """Lanes named after what they are: a player's (PLR: guesses, their
    notifications) by username, a round's (RND: its announcement) by title."""
    valid = [lane for lane in lanes if ids.is_valid(lane)]
    players = [lane for lane in valid if lane.startswith("PLR")]
    rounds_ = [lane for lane in valid if lane.startswith("RND")]
    out = dict(Player.objects.filter(pk__in=players).values_list("pk", "user__username")) if players else {}
    if rounds_:
        out |= {pk: f"round {title or pk}" for pk, title in Round.objects.filter(pk__in=rounds_)
                .values_list("pk", "title")}
    return out


def _when(dt) -> str:
    return timezone.localtime(dt).strftime("%Y-%m-%d %H:%M:%S %Z") if dt else "not yet"


def refund_queued_guess(guess_id: str, user) -> str:
    """Refund a guess that is still queued and mark it refunded; safe to call
    twice (the second finds it refunded). Answers a sentence for the log."""
    with transaction.atomic():
        guess = Guess.objects.select_for_update().filter(pk=guess_id).first()
        if guess is None:
            return f"Guess {guess_id} no longer exists; nothing refunded."
        if guess.status != Guess.Status.QUEUED:
            return f"Guess {guess_id} is {guess.status} now; nothing refunded."
        if guess.price:
            wallet.apply(guess.player_id, guess.currency, guess.price, LedgerEntry.Reason.REFUND, guess.pk)
        guess.status = Guess.Status.REFUNDED
        guess.save(update_fields=["status"])
        said = (f"Refunded guess {guess.pk}: {amount(guess.price, guess.currency)} back to {guess.player_id} "
                "through the ledger; the relay will not send it again.")
        LogEntry.objects.log_actions(user_id=user.pk, queryset=[guess], action_flag=CHANGE, change_message=said,
                                     single_object=True)
    return said


class GuessJobs(Resolver):
    """``cm``: one job per guess, ``Guess.job_id``."""

    def describe(self, job_id, payload, user):
        guess = Guess.objects.select_related("round", "player__user").filter(job_id=job_id).first()
        if guess is None:
            return None
        rnd = guess.round
        sealed = rnd.kind == Round.Kind.BLIND and not rnd.revealed
        total = "—" if guess.total is None else (HIDDEN if sealed else f"{guess.total}/600")
        about = About(
            title=f"Guess {guess.pk} by {guess.player.user.get_username()} in round {rnd.pk}",
            links=[(f"guess {guess.pk}", _change_url("guess", guess.pk)),
                   (f"player {guess.player.user.get_username()} ({guess.player_id})",
                    _change_url("player", guess.player_id)),
                   (f"round {rnd.title or rnd.pk} [{rnd.status}]", _change_url("round", rnd.pk))],
            facts=[("status", guess.get_status_display()), ("charged", amount(guess.price, guess.currency)),
                   ("submitted", _when(guess.created_at)), ("scored at", _when(guess.scored_at)),
                   ("total", total)])
        if guess.status == Guess.Status.QUEUED:
            charged = f"charged {amount(guess.price, guess.currency)} and " if guess.price else ""
            about.on_remove = (f"This guess is {charged}still queued: the reaper's relay sends its job again "
                               "within seconds, so removing the job alone does not stop it: it will come back "
                               "and be scored. To cancel the guess, remove and refund it.")
            about.remove_options = [RemoveOption(
                "refund", "Remove and refund this guess",
                f"Marks {guess.pk} refunded and credits {amount(guess.price, guess.currency)} back to "
                f"{guess.player.user.get_username()} through the ledger (once), then removes the job; it does "
                "not come back.", REFUND, partial(refund_queued_guess, guess.pk))]
        elif guess.status == Guess.Status.SCORED:
            about.on_remove = "This guess is already scored: removing its job changes nothing in the game."
        else:
            about.on_remove = "This guess was refunded: a worker would drop its job anyway."
        return about

    def search(self, term, user):
        rows = Guess.objects.select_related("player__user").order_by("-id")
        if ids.is_valid(term):
            brand = term[:3]
            if brand == "GES":
                rows = rows.filter(pk=term)
            elif brand == "JOB":
                rows = rows.filter(job_id=term)
            elif brand == "PLR":
                rows = rows.filter(player_id=term)
            elif brand == "RND":
                rows = rows.filter(round_id=term)
            else:
                return []
        else:
            rows = rows.filter(player__user__username__iexact=term)
        return [Found(guesses.QUEUE, g.job_id, f"guess {g.pk} by {g.player.user.get_username()} in {g.round_id} "
                                               f"[{g.status}]")
                for g in rows[:SEARCH_LIMIT]]

    def lane_labels(self, lanes, user):
        return player_lane_labels(lanes)


class SettleJobs(Resolver):
    """``cm.settle``: one job per round, its id derived from the round's."""

    def _round(self, job_id: str) -> Round | None:
        rnd = Round.objects.filter(pk=ids.encode("RND", ids.parse(job_id)[1])).first()
        return rnd if rnd is not None and settlement.settle_job_id(rnd.pk) == job_id else None

    def describe(self, job_id, payload, user):
        rnd = self._round(job_id)
        if rnd is None:
            return None
        about = About(title=f"Settlement of round {rnd}",
                      links=[(f"round {rnd.title or rnd.pk} [{rnd.status}]", _change_url("round", rnd.pk))],
                      facts=[("round status", rnd.status), ("ends at", _when(rnd.ends_at)),
                             ("settled at", _when(rnd.settled_at)),
                             ("payouts", str(len(rnd.result.get("payouts", []))) if rnd.revealed else "—")])
        if rnd.status in settlement.CLOSEABLE:
            about.on_remove = ("The round stays open: once it is due, the reaper's timer sweep asks to settle "
                               "it again under the same job id.")
        return about

    def search(self, term, user):
        if ids.is_valid(term) and term.startswith("RND") and Round.objects.filter(pk=term).exists():
            return [Found(settlement.QUEUE, settlement.settle_job_id(term), f"settlement of {term}")]
        return []


class NotifyJobs(Resolver):
    """``cm.tasks``: Django tasks on EchoMQ; the game's one task today is
    ``games.tasks.notify(player_id, round_id, kind)``, named in the payload."""

    def describe(self, job_id, payload, user):
        try:
            record = json.loads(payload or b"")
            args = json.loads(record["args"])
            if record["task"] != tasks.notify.module_path:
                return About(title=f"Task {record['task']}", facts=[("arguments", record["args"])])
            player = Player.objects.select_related("user").get(pk=args[0])
            rnd = Round.objects.get(pk=args[1])
        except (ValueError, TypeError, KeyError, IndexError, Player.DoesNotExist, Round.DoesNotExist):
            return None
        return About(title=f"Notification to {player.user.get_username()}: round {rnd.pk} {args[2] if len(args) > 2 else ''}",
                     links=[(f"player {player.user.get_username()}", _change_url("player", player.pk)),
                            (f"round {rnd.title or rnd.pk}", _change_url("round", rnd.pk))],
                     on_remove="The player is not notified unless the round's settlement runs again.")

    def lane_labels(self, lanes, user):
        return player_lane_labels(lanes)


def register_all() -> None:
    register(guesses.QUEUE, GuessJobs())
    register(settlement.QUEUE, SettleJobs())
    register(tasks.QUEUE, NotifyJobs())
