"""Recompute Valkey leaderboards from the database (the authority)."""
from django.core.management.base import BaseCommand, CommandError

from games import leaderboard
from games.models import Guess, Round


class Command(BaseCommand):
    help = "Rebuild each round's leaderboard from its scored guesses (all rounds with guesses by default)."

    def add_arguments(self, parser):
        parser.add_argument("rounds", nargs="*", help="RND ids (default: every round with a scored guess)")
        parser.add_argument("--check", action="store_true",
                            help="only compare the live boards with the database; exit 1 on a difference")

    def handle(self, *args, **o):
        ids = o["rounds"] or sorted(set(Guess.objects.filter(status=Guess.Status.SCORED)
                                        .values_list("round_id", flat=True)))
        missing = set(ids) - set(Round.objects.filter(pk__in=ids).values_list("pk", flat=True))
        if missing:
            raise CommandError(f"no such round: {', '.join(sorted(missing))}")
        differ = 0
        for rid in ids:
            live, truth = leaderboard.live(rid), leaderboard.from_db(rid)
            same = live == truth
            differ += not same
            if o["check"]:
                self.stdout.write(f"{rid}: {len(truth)} players, live board {'matches' if same else 'DIFFERS'}")
            else:
                n = leaderboard.rebuild(rid)
                self.stdout.write(f"{rid}: rebuilt {n} players ({'unchanged' if same else 'was different'})")
        self.stdout.write(f"{len(ids)} round(s), {differ} differed")
        if o["check"] and differ:
            raise SystemExit(1)
