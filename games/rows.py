"""One INSERT of a model row through a plain cursor.

A guess POST writes two rows (the guess, its ledger entry). Built by
``Model.save(force_insert=True)``, those two statements took about a fifth
of the POST's CPU in Django's query compiler. ``insert_row`` builds
the statement once per model and adapts every value with the field's own
``pre_save``/``get_db_prep_save``, so the row written is the one ``save``
would write. It sends no ``pre_save``/``post_save`` signals: use it only for
models nothing listens to (``Guess``, ``LedgerEntry``) and whose primary key
is set before the insert (branded ids are).
"""
from __future__ import annotations

from functools import cache

from django.db import connection


@cache
def _statement(model, vendor: str) -> tuple[str, tuple]:
    fields = tuple(model._meta.concrete_fields)
    qn = connection.ops.quote_name
    columns = ", ".join(qn(f.column) for f in fields)
    return (f"INSERT INTO {qn(model._meta.db_table)} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})",
            fields)


def insert_row(obj) -> None:
    """Write ``obj`` as a new row, as ``obj.save(force_insert=True)`` would."""
    sql, fields = _statement(type(obj), connection.vendor)
    params = [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
    obj._state.adding, obj._state.db = False, connection.alias
