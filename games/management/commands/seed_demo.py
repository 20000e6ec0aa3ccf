"""A playable demo: emoji sets, players with balances, open rounds, a round
schedule (so a round is always open), an admin.

Idempotent: run it any number of times; it only adds what is missing."""
import os
import secrets
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from echomq.contrib.django import valkey_url
from games import demo, wallet
from games.emoji_sets import SETS, check
from games.models import EmojiSet, LedgerEntry, Round, RoundSchedule
from games.players import ensure_player
from games.rounds import create_round

PLAYERS = ("alice", "bob", "carol", "dave")
START = {"keys": 50, "clips": 20, "diamonds": 0}
ROUNDS = [
    {"title": "Classic: animals", "set": "animals", "kind": "classic", "currency": "keys", "price": 1, "pool": 100},
    {"title": "Blind: food", "set": "food", "kind": "blind", "currency": "keys", "price": 2, "pool": 500},
    {"title": "Free play: travel", "set": "travel", "kind": "classic", "currency": "clips", "price": 1, "pool": 20},
]
# A round every ten minutes that lasts ten: one ends as the next opens
# (games.schedules puts rounds on the grid), whatever else is open.
SCHEDULE = {"name": "Ten-minute classic", "set": "animals", "every_minutes": 10, "minutes": 10, "price": 1,
            "pool": 50}


class Command(BaseCommand):
    help = "Seed the demo (emoji sets, players, open rounds, a staff admin); safe to re-run."

    def add_arguments(self, parser):
        parser.add_argument("--hours", type=float, default=24, help="length of new demo rounds")

    def _password_file(self, name: str) -> Path:
        return Path(settings.VAR_DIR) / f"demo-{name}.password"

    def _user(self, name: str, *, staff: bool = False, superuser: bool = False):
        User = get_user_model()
        user = User.objects.filter(username=name).first()
        path = self._password_file(name)
        if user is None:
            password = secrets.token_urlsafe(12)
            user = User.objects.create_user(name, password=password, is_staff=staff, is_superuser=superuser)
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            path.unlink(missing_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # never readable by others
            with os.fdopen(fd, "w") as f:
                f.write(password + "\n")
            # The password goes to an owner-only file, never to this output
            # (which lands in logs); `./dev run` shows it in its banner.
            self.stdout.write(f"user {name} created (password in {path})")
        else:
            where = f"password in {path}" if path.exists() else "password unchanged"
            self.stdout.write(f"user {name} exists ({where})")
        return user

    def handle(self, *args, **o):
        # The queue's Valkey first (the embedded one starts here): the cache
        # lives on it too, and the users made below drop their cached copies.
        valkey_url()
        for slug, spec in SETS.items():
            check(spec["emojis"])
            _, made = EmojiSet.objects.update_or_create(slug=slug, defaults={"title": spec["title"],
                                                                            "emojis": spec["emojis"]})
            self.stdout.write(f"emoji set {slug}: {len(spec['emojis'])} emojis{' (new)' if made else ''}")
        self._user("admin", staff=True, superuser=True)
        players = []
        for name in PLAYERS:
            player = ensure_player(self._user(name))
            players.append(player)
            with transaction.atomic():
                wallet.lock_wallet(player)  # one seeding per player, even when two seeders race
                if not LedgerEntry.objects.filter(player=player).exists():
                    for currency, amount in START.items():
                        if amount:
                            wallet.grant(player, currency, amount, reference="demo seed")
            self.stdout.write(f"player {name} {player.pk}: {wallet.balances(player)}")
        for spec in ROUNDS:
            live = Round.objects.filter(title=spec["title"], status=Round.Status.OPEN).order_by("-created_at").first()
            if live and live.is_open:
                self.stdout.write(f"round {live} still open")
                continue
            rnd = create_round(EmojiSet.objects.get(slug=spec["set"]), kind=spec["kind"], currency=spec["currency"],
                               guess_price=spec["price"], prize_pool=spec["pool"], title=spec["title"],
                               duration=timedelta(hours=o["hours"]))
            self.stdout.write(f"round {rnd} opened until {rnd.ends_at:%Y-%m-%d %H:%M} UTC")
        seed_schedule(self)
        seed_operators(self)
        demo.liven(players, self.stdout.write)  # other players' guesses, standings, a settled round
        self.stdout.write("demo ready: log in at /admin/ as admin")


def seed_schedule(command) -> None:
    """The demo's round schedule, on an install that has none (one an
    operator made, paused or changed is left alone)."""
    if RoundSchedule.objects.exists():
        names = ", ".join(RoundSchedule.objects.values_list("name", flat=True)[:3])
        command.stdout.write(f"round schedules exist ({names}{', ...' if RoundSchedule.objects.count() > 3 else ''})")
        return
    spec = SCHEDULE
    schedule = RoundSchedule(name=spec["name"], emoji_set=EmojiSet.objects.get(slug=spec["set"]),
                             every_seconds=spec["every_minutes"] * 60, minutes=spec["minutes"],
                             guess_price=spec["price"], prize_pool=spec["pool"])
    schedule.full_clean()
    schedule.save()  # mirrored into EchoMQ on commit; the reaper fires its ticks
    command.stdout.write(f"round schedule {schedule.name}: a round every {spec['every_minutes']} minutes, "
                         f"the first at {schedule.next_runs(1)[0]:%H:%M} UTC")


# One demo staff user per operator group (games.permissions.GROUPS), none a superuser.
OPERATORS = {"gamemaster": "Game master", "support": "Support", "queueops": "Queue operator"}


def seed_operators(command) -> None:
    """Create the group demo users if missing (passwords as for the others:
    an owner-only file, shown by ``./dev run``)."""
    from django.contrib.auth.models import Group

    for name, group in OPERATORS.items():
        user = command._user(name, staff=True)
        user.groups.add(Group.objects.get(name=group))
        command.stdout.write(f"operator {name} ({group}): log in at /admin/ as {name}")
