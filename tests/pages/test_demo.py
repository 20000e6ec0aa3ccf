"""seed_demo makes a demo that looks alive, through the real scoring and
settlement path."""
import io

import pytest
from django.core.management import call_command

from games import leaderboard, live, wallet
from games.demo import SETTLED_TITLE
from games.models import Guess, LedgerEntry, Round, RoundEntry

pytestmark = pytest.mark.django_db


def test_seed_demo_has_players_standings_and_a_settled_round_with_winners(settings, tmp_path, client, valkey):
    settings.VAR_DIR = tmp_path
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    open_rounds = Round.objects.filter(status="open")
    assert open_rounds.count() == 3
    for rnd in open_rounds:
        guesses = Guess.objects.filter(round=rnd)
        assert guesses.count() >= 3 and not guesses.exclude(status="scored").exists()
        assert guesses.values("player").distinct().count() >= 3
        # Scored through the real path: charged through the ledger, on the Valkey board and activity.
        assert LedgerEntry.objects.filter(reason="guess", reference__in=guesses.values("id")).count() == guesses.count()
        assert set(leaderboard.live(rnd.pk)) == set(RoundEntry.objects.filter(round=rnd).values_list("player_id", flat=True))
        assert valkey.zcard(live.activity_key(rnd.pk)) == guesses.count()
        assert all(g.total < 600 for g in guesses)  # no demo guess closes a round
    settled = Round.objects.get(title=SETTLED_TITLE)
    assert settled.status == "settled" and settled.result["payouts"]
    winners = {p["player"] for p in settled.result["payouts"]}
    assert set(LedgerEntry.objects.filter(reason="prize", reference=settled.pk).values_list("player_id", flat=True)) == winners
    assert wallet.mismatched_wallets() == []

    counts = (Guess.objects.count(), Round.objects.count(), LedgerEntry.objects.count())
    call_command("seed_demo", stdout=io.StringIO())
    assert counts == (Guess.objects.count(), Round.objects.count(), LedgerEntry.objects.count())

    # The visitor's landing page shows the live rounds with their pools.
    html = client.get("/").content.decode()
    assert "Classic: animals" in html and "Pool 💎 500" in html
