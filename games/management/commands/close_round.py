"""Close a round now (through the settle queue), or void it."""
from django.core.management.base import BaseCommand, CommandError

from games import settlement
from games.models import Round


class Command(BaseCommand):
    help = "Ask for a round to be settled now (as an admin would), or void it with refunds."

    def add_arguments(self, parser):
        parser.add_argument("round")
        parser.add_argument("--void", action="store_true", help="cancel the round and refund every guess")
        parser.add_argument("--here", action="store_true", help="settle in this process, not via cm.settle")

    def handle(self, *args, **o):
        if not Round.objects.filter(pk=o["round"]).exists():
            raise CommandError(f"no round {o['round']}")
        if o["void"]:
            out = settlement.void_round(o["round"])
            self.stdout.write(f"{o['round']}: {out.action}")
        elif o["here"]:
            out = settlement.settle_round(o["round"], force=True)
            self.stdout.write(f"{o['round']}: {out.action}, payouts "
                              f"{[(s.player_id, amt) for s, amt in out.payouts]}, house {out.house}")
        else:
            status = settlement.request_settlement(o["round"], "admin")
            self.stdout.write(f"{o['round']}: settlement request {status or 'NOT SENT'}")
