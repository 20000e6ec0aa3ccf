"""Open a new round."""
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError

from games.models import DEFAULT_KEYBOARD_SIZE, EmojiSet, Round
from games.rounds import RoundError, create_round


class Command(BaseCommand):
    help = "Create an open round from an emoji set."

    def add_arguments(self, parser):
        parser.add_argument("--set", dest="emoji_set", required=True, help="emoji set slug")
        parser.add_argument("--kind", choices=[k.value for k in Round.Kind], default="classic")
        parser.add_argument("--currency", choices=["keys", "clips"], default="keys")
        parser.add_argument("--price", type=int, default=1, help="guess price")
        parser.add_argument("--pool", type=int, default=100, help="prize pool in diamonds")
        parser.add_argument("--minutes", type=float, default=60)
        parser.add_argument("--keyboard-size", type=int, default=DEFAULT_KEYBOARD_SIZE, help="0 = the whole set")
        parser.add_argument("--weights", default="", help="blind split, e.g. 40,25,15,12,8")
        parser.add_argument("--title", default="")

    def handle(self, *args, **o):
        emoji_set = EmojiSet.objects.filter(slug=o["emoji_set"]).first()
        if emoji_set is None:
            raise CommandError(f"no emoji set {o['emoji_set']!r} (try manage.py seed_demo)")
        try:
            weights = [int(w) for w in o["weights"].split(",")] if o["weights"] else None
            rnd = create_round(emoji_set, kind=o["kind"], currency=o["currency"], guess_price=o["price"],
                               prize_pool=o["pool"], duration=timedelta(minutes=o["minutes"]),
                               keyboard_size=o["keyboard_size"] or None, weights=weights, title=o["title"])
        except (RoundError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        extra = f" commitment={rnd.commitment}" if rnd.commitment else ""
        self.stdout.write(f"created {rnd} ends {rnd.ends_at:%Y-%m-%d %H:%M:%S} UTC, "
                          f"keyboard {' '.join(rnd.keyboard)}{extra}")
