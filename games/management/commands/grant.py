"""Credit (or debit) a player's wallet through the ledger."""
from django.core.management.base import BaseCommand, CommandError

from games import wallet
from games.models import Currency, Player
from games.players import resolve


class Command(BaseCommand):
    help = "Grant currency to a player (negative amounts debit), recorded in the ledger."

    def add_arguments(self, parser):
        parser.add_argument("player", help="username or PLR id")
        parser.add_argument("currency", choices=[c.value for c in Currency])
        parser.add_argument("amount", type=int)
        parser.add_argument("--note", default="", help="ledger reference, e.g. a ticket number")

    def handle(self, *args, **o):
        try:
            player = resolve(o["player"])
        except Player.DoesNotExist:
            raise CommandError(f"no player {o['player']!r}") from None
        try:
            entry = wallet.grant(player, o["currency"], o["amount"], reference=o["note"])
        except wallet.WalletError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"{entry.id}: {player} {entry.delta:+d} {entry.currency} -> {entry.balance_after}")
