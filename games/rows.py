"""Rows written through a plain cursor, for the guess POST's hot path.

A guess POST writes two rows (the guess, its ledger entry). Built by
``Model.save(force_insert=True)``, those two statements took about a fifth
of the POST's CPU in Django's query compiler. The helpers here build each
statement once per model and adapt every value with the field's own
``pre_save``/``get_db_prep_save``, so the row written is the one ``save``
would write. They send no ``pre_save``/``post_save`` signals: use them only
for models nothing listens to (``Guess``, ``LedgerEntry``) and whose primary
key is set before the insert (branded ids are).
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


def insert_select(obj, source: str, *, from_source: dict[str, str] | None = None) -> tuple[str, list]:
    """``INSERT INTO <obj's table> (...) SELECT ... FROM <source>``: one
    row per row of ``source`` (a CTE name), with the columns named in
    ``from_source`` taken from it (e.g. ``{"balance_after": "w.keys"}``) and
    every other column from ``obj``. Answers SQL and params, for a
    data-modifying CTE (PostgreSQL); the caller runs it and then
    :func:`mark_saved` the objects it wrote."""
    from_source = from_source or {}
    fields, columns = _columns(type(obj))
    values, params = [], []
    for f in fields:
        if f.attname in from_source:
            values.append(from_source[f.attname])
        else:
            values.append("%s")
            params.append(f.get_db_prep_save(f.pre_save(obj, True), connection))
    table = connection.ops.quote_name(type(obj)._meta.db_table)
    return f"INSERT INTO {table} ({columns}) SELECT {', '.join(values)} FROM {source}", params


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
