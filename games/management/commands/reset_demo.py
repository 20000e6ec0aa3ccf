"""Start the demo over: erase the install's data -- every user, player,
round, guess and ledger row in the database, and everything in its Valkey
(queues, leaderboards, cached sessions) -- then seed the demo again, with
new passwords (``./dev run`` prints them).

For a developer's install only: it refuses unless ``DEBUG`` or
``CODEMOJEX_DEV`` (which ``./dev`` sets) is on, and asks first unless
``--yes``. Stop ``./dev run`` before: its workers would hold jobs of rounds
that are gone (they would drop them, but the log would say so)."""
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from echomq.contrib.django import get_client, valkey_url
from echomq.embedded import redact
from games import permissions


class Command(BaseCommand):
    help = ("Erase the demo's database rows and its Valkey, then seed the demo again "
            "(a developer's install only; stop ./dev run first).")

    def add_arguments(self, parser):
        parser.add_argument("--yes", action="store_true", help="do not ask before erasing")
        parser.add_argument("--hours", type=float, default=24, help="length of the new demo rounds")

    def handle(self, *args, **o):
        if not (settings.DEBUG or settings.DEV):
            raise CommandError("reset_demo erases everything: it runs only on a developer's install "
                               "(DEBUG or CODEMOJEX_DEV=1, as ./dev sets); nothing was changed.")
        url = redact(valkey_url())  # shown, never its password
        where = settings.DATABASES["default"].get("NAME")
        if not o["yes"]:
            answer = input(f"Erase every row of database {where} and everything in Valkey {url}, "
                           "then seed the demo again? Type 'yes' to go on: ")
            if answer.strip().lower() != "yes":
                raise CommandError("Not reset; nothing was changed.")
        call_command("migrate", interactive=False, verbosity=0)  # an older install's tables first
        call_command("flush", interactive=False, verbosity=0)
        permissions.sync_groups()  # flush empties the groups a data migration made
        self.stdout.write(f"database {where} emptied")
        get_client().flushdb()  # on a cluster, every primary
        self.stdout.write(f"valkey {url} emptied")
        for path in Path(settings.VAR_DIR).glob("demo-*.password"):
            path.unlink()
        call_command("seed_demo", hours=o["hours"], stdout=self.stdout)
