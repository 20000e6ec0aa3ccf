"""``games.rows``: rows read through a plain cursor come back exactly as the
ORM builds them (aware datetimes, decoded JSON, any field order), and rows
written through it read back as saved."""
import pytest
from django.db import connection

from games import locks
from games.guesses import submit
from games.models import Guess, Round
from games.rows import from_row

pytestmark = pytest.mark.django_db

S = ["🐶", "🐱", "🐭", "🐹", "🐰", "🦊"]


def test_from_row_reads_a_subset_in_any_order_as_the_orm_does(make_player, make_round):
    g = submit(make_player(keys=3), make_round(secret=S), S[::-1], idempotency_key="k")
    fields = ("created_at", "emojis_final", "round_id", "id", "status")  # not the model's order
    qn = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {', '.join(qn(f) for f in fields)} FROM {qn(Guess._meta.db_table)} WHERE id = %s",
                       [g.pk])
        row = cursor.fetchone()
    got = from_row(Guess, fields, row)
    want = Guess.objects.only(*fields).get(pk=g.pk)
    assert {f: getattr(got, f) for f in fields} == {f: getattr(want, f) for f in fields}
    assert got.created_at.tzinfo is not None and got.emojis_final == S[::-1]
    assert got.get_deferred_fields() == want.get_deferred_fields()


def test_round_with_locks_reads_the_round_as_the_orm_does(make_player, make_round):
    p, rnd = make_player(), make_round(secret=S)
    locks.set_lock(p, rnd, 2, "🐭")
    fields, mine = locks.round_with_locks(rnd.pk, p.pk)
    got = Round.from_db(connection.alias, locks.ROUND_FIELDS, fields)
    want = Round.objects.get(pk=rnd.pk)
    assert {f: getattr(got, f) for f in locks.ROUND_FIELDS} == {f: getattr(want, f) for f in locks.ROUND_FIELDS}
    assert mine == {2: "🐭"}
    assert locks.round_with_locks("RND" + "0" * 11, p.pk) == (None, {})
