"""The hot tables carry only the indexes a query uses: every guess INSERT
and every scoring UPDATE writes each index of ``games_guess``."""
import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def _indexes(table: str) -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", [table])
        return dict(cursor.fetchall())


def test_no_pattern_indexes_on_ids_and_no_index_a_composite_already_leads_with():
    if connection.vendor != "postgresql":
        pytest.skip("pattern-ops indexes are PostgreSQL's; run with DATABASE_URL=postgres://...")
    guess = _indexes("games_guess")
    assert len(guess) == 6, "\n".join(guess.values())  # pk, job_id, (round, status), (status, created_at), 2 uniques
    for table in ("games_guess", "games_ledgerentry", "games_round", "games_player", "games_wallet", "games_lock"):
        assert not [d for d in _indexes(table).values() if "pattern_ops" in d], table
    # what the dropped single-column indexes served is still served
    assert any(d.endswith("(player_id, round_id, idempotency_key)") for d in guess.values())
    assert any(d.endswith("(round_id, status)") for d in guess.values())
