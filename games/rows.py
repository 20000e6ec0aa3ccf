"""Rows written and read through a plain cursor, for the hot paths.

Built by ``Model.save(force_insert=True)``, a guess and its ledger row cost
more CPU in Django's query compiler than the INSERTs themselves. ``insert_row``
builds each model's statement once and adapts every value with the field's
own ``pre_save``/``get_db_prep_save``, so the row written is the one
``save`` would write (SQLite's guess path and free guesses use it; on
PostgreSQL the guess and its charge are one statement, built in
``games.guesses``). It sends no ``pre_save``/``post_save`` signals: use it
only for models nothing listens to (``Guess``, ``LedgerEntry``) and whose
primary key is set before the insert (branded ids are).
"""
from __future__ import annotations

from functools import cache

from django.db import connection


@cache
def _columns(model) -> tuple[tuple, str]:
    fields = tuple(model._meta.concrete_fields)
    qn = connection.ops.quote_name
    return fields, ", ".join(qn(f.column) for f in fields)


def _params(obj, fields) -> list:
    return [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]


def _saved(obj) -> None:
    obj._state.adding, obj._state.db = False, connection.alias


def insert_row(obj) -> None:
    """Write ``obj`` as a new row, as ``obj.save(force_insert=True)`` would."""
    fields, columns = _columns(type(obj))
    table = connection.ops.quote_name(type(obj)._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})",
                       _params(obj, fields))
    _saved(obj)


def mark_saved(*objs) -> None:
    for obj in objs:
        _saved(obj)


# -- reading ----------------------------------------------------------------
@cache
def _converters(model, attnames: tuple[str, ...], vendor: str) -> tuple:
    by_attname = {f.attname: f for f in model._meta.concrete_fields}
    out = []
    for name in attnames:
        col = by_attname[name].get_col(model._meta.db_table)
        out.append((col, tuple(connection.ops.get_db_converters(col) + col.get_db_converters(connection))))
    return tuple(out)


def convert(model, attnames: tuple[str, ...], values) -> list:
    """A plain cursor's values for these fields, as the ORM would read them:
    the same backend and field converters (aware datetimes on SQLite,
    decoded JSON everywhere), looked up once per model and columns."""
    out = []
    for (col, converters), value in zip(_converters(model, attnames, connection.vendor), values):
        for converter in converters:
            value = converter(value, col, connection)
        out.append(value)
    return out


@cache
def _model_order(model, attnames: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[int, ...]]:
    position = {f.attname: i for i, f in enumerate(model._meta.concrete_fields)}
    order = tuple(sorted(range(len(attnames)), key=lambda i: position[attnames[i]]))
    return tuple(attnames[i] for i in order), order


def from_row(model, attnames: tuple[str, ...], values):
    """A model instance from a plain cursor's row (only these fields loaded;
    ``Model.from_db`` wants them in the model's field order)."""
    values = convert(model, attnames, values)
    names, order = _model_order(model, attnames)
    return model.from_db(connection.alias, names, [values[i] for i in order])
