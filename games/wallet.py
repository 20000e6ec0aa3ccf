"""The wallet service: the only code that changes balances.

Each change locks the wallet row (``SELECT … FOR UPDATE``), checks the new
balance is not negative, writes it and appends one ``LedgerEntry`` -- all in
one transaction, so a balance always equals the sum of its ledger. The CHECK
constraints on ``Wallet`` make the database refuse a negative balance even
if some future code forgets the check.
"""
from __future__ import annotations

import functools
from datetime import datetime

from django.db import connection, transaction
from django.db.models import Sum
from django.utils import timezone

from echomq import ids

from .models import Currency, LedgerEntry, Player, Wallet

DIAMONDS_PER_KEY = 10


class WalletError(Exception):
    """A balance change was refused; ``message`` is fit to show a player."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class InsufficientFunds(WalletError):
    def __init__(self, currency: str, needed: int, available: int):
        super().__init__(f"Not enough {currency}: this needs {needed}, you have {available}.")
        self.currency, self.needed, self.available = currency, needed, available


def _player_id(player) -> str:
    return player.pk if isinstance(player, Player) else player


def lock_wallet(player) -> Wallet:
    """The player's wallet, row-locked until the surrounding transaction ends."""
    pid = _player_id(player)
    Wallet.objects.get_or_create(player_id=pid)
    return Wallet.objects.select_for_update().get(player_id=pid)


def apply(player, currency: str, delta: int, reason: str, reference: str = "", *,
          wallet: Wallet | None = None) -> LedgerEntry:
    """Change one balance by ``delta`` and record it; InsufficientFunds if it
    would go negative. Pass ``wallet`` when the caller already holds its lock."""
    currency = Currency(currency).value
    if not isinstance(delta, int) or isinstance(delta, bool) or delta == 0:
        raise WalletError("a balance change must be a non-zero whole number")
    with transaction.atomic():
        w = wallet if wallet is not None else lock_wallet(player)
        before = getattr(w, currency)
        after = before + delta
        if after < 0:
            raise InsufficientFunds(currency, -delta, before)
        setattr(w, currency, after)
        w.save(update_fields=[currency, "updated_at"])
        return LedgerEntry.objects.create(player_id=w.player_id, currency=currency, delta=delta,
                                          balance_after=after, reason=reason, reference=reference)


def _check_charge(currency: str, amount: int) -> str:
    currency = Currency(currency).value
    if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
        raise WalletError("a charge must be a positive whole number")
    return currency


def _literal(value: str) -> str:
    """One of the code's own choice values (a currency, a reason, a status)
    as an SQL string literal: letters and underscores only, so it needs no
    quoting beyond the quotes."""
    value = str(value)
    if not value.replace("_", "").isalpha() or not value.isascii():
        raise ValueError(f"not a choice value: {value!r}")
    return f"'{value}'"


@functools.cache
def charge_ctes(currency: str, reason: str, only_if: str = "", reference: str = "%(reference)s") -> str:
    """The charge as two data-modifying CTEs (PostgreSQL), built once per
    currency, reason and condition. ``w`` takes the amount -- ``UPDATE … SET
    c = c - amount WHERE c >= amount [only_if] RETURNING c``: no read, and it
    row-locks the wallet as ``lock_wallet`` does -- and ``l`` writes the
    ledger row selecting from ``w``, so it is written only if the charge is.
    Named parameters, from :func:`charge_params`; the currency and the
    reason are written into the statement (each statement is built for one
    of each), and the ledger's delta is ``-amount`` there, so the statement
    binds fewer values. ``only_if`` is a condition over the caller's own
    CTEs (e.g. "the round is open"); ``reference`` the ledger reference's
    placeholder (a caller's statement may already bind that value under
    another name)."""
    qn = connection.ops.quote_name
    currency = Currency(currency).value
    col = qn(currency)
    ledger = {"id": "%(txn)s", "player_id": "%(player)s", "currency": _literal(currency), "delta": "-%(amount)s",
              "balance_after": f"w.{col}", "reason": _literal(LedgerEntry.Reason(reason).value),
              "reference": reference, "created_at": "%(now)s"}
    columns = {f.attname: f.column for f in LedgerEntry._meta.concrete_fields}
    assert ledger.keys() == columns.keys(), "every ledger column needs a value here"
    return (f"w AS (UPDATE {qn(Wallet._meta.db_table)} SET {col} = {col} - %(amount)s, {qn('updated_at')} = %(now)s "
            f"WHERE {qn(Wallet._meta.pk.column)} = %(player)s AND {col} >= %(amount)s{only_if} RETURNING {col}), "
            f"l AS (INSERT INTO {qn(LedgerEntry._meta.db_table)} ({', '.join(qn(columns[a]) for a in ledger)}) "
            f"SELECT {', '.join(ledger.values())} FROM w)")


def charge_params(player, currency: str, amount: int, reference: str, now: datetime | None = None) -> dict:
    """The parameters of :func:`charge_ctes` (the amount checked, the
    ledger row's TXN id minted); the statement was built for ``currency``."""
    _check_charge(currency, amount)
    return {"player": _player_id(player), "amount": amount, "reference": reference, "txn": ids.mint("TXN"),
            "now": now or timezone.now()}


def charge(player, currency: str, amount: int, reason: str, reference: str) -> LedgerEntry:
    """Take ``amount`` (> 0) with no read and record it. InsufficientFunds,
    with nothing written, when the balance is short or there is no wallet.
    Call it inside the caller's transaction: the wallet stays row-locked
    until it ends, as ``lock_wallet`` would hold it.

    Two statements, on every database: the conditional ``UPDATE … WHERE
    balance >= amount RETURNING balance`` (Django's ``update()`` cannot
    say what it left, which the ledger row records) and the ledger row's
    INSERT. (The guess's one statement on PostgreSQL charges through
    :func:`charge_ctes` instead.)"""
    currency = _check_charge(currency, amount)
    params = charge_params(player, currency, amount, reference)
    pid = params["player"]
    qn = connection.ops.quote_name
    col, table = qn(currency), qn(Wallet._meta.db_table)
    sql = (f"UPDATE {table} SET {col} = {col} - %(amount)s, {qn('updated_at')} = %(now)s "
           f"WHERE {qn(Wallet._meta.pk.column)} = %(player)s AND {col} >= %(amount)s RETURNING {col}")
    with connection.cursor() as cursor:
        cursor.execute(sql, {**params, "now": connection.ops.adapt_datetimefield_value(params["now"])})
        row = cursor.fetchone()
    if row is None:
        raise InsufficientFunds(currency, amount, balances(pid)[currency])
    entry = LedgerEntry(id=params["txn"], player_id=pid, currency=currency, delta=-amount,
                        balance_after=row[0], reason=reason, reference=reference, created_at=params["now"])
    entry.save(force_insert=True)
    return entry


def grant(player, currency: str, amount: int, *, reason: str = LedgerEntry.Reason.GRANT,
          reference: str = "") -> LedgerEntry:
    """Credit (positive) or debit (negative) ``amount`` by an operator."""
    return apply(player, currency, amount, reason, reference)


def exchange_diamonds(player, keys: int) -> tuple[LedgerEntry, LedgerEntry]:
    """Turn ``10 * keys`` diamonds into ``keys`` keys, atomically."""
    if not isinstance(keys, int) or keys <= 0:
        raise WalletError("exchange a positive whole number of keys")
    with transaction.atomic():
        w = lock_wallet(player)
        ref = f"{keys * DIAMONDS_PER_KEY} diamonds -> {keys} keys"
        spent = apply(player, Currency.DIAMONDS, -keys * DIAMONDS_PER_KEY, LedgerEntry.Reason.EXCHANGE, ref, wallet=w)
        got = apply(player, Currency.KEYS, keys, LedgerEntry.Reason.EXCHANGE, ref, wallet=w)
        return spent, got


def balances(player) -> dict[str, int]:
    w = Wallet.objects.filter(player_id=_player_id(player)).first()
    return {c.value: (getattr(w, c.value) if w else 0) for c in Currency}


def ledger_sums(player) -> dict[str, int]:
    rows = (LedgerEntry.objects.filter(player_id=_player_id(player))
            .values("currency").annotate(total=Sum("delta")))
    sums = {c.value: 0 for c in Currency}
    sums.update({row["currency"]: row["total"] for row in rows})
    return sums


def mismatched_wallets() -> list[str]:
    """Players whose balances differ from their ledger sums (should be none)."""
    sums: dict[tuple[str, str], int] = {}
    for row in LedgerEntry.objects.values("player_id", "currency").annotate(total=Sum("delta")):
        sums[(row["player_id"], row["currency"])] = row["total"]
    bad = []
    for w in Wallet.objects.all():
        if any(getattr(w, c.value) != sums.get((w.player_id, c.value), 0) for c in Currency):
            bad.append(w.player_id)
    players_with_ledger = {p for p, _ in sums}
    bad += sorted(players_with_ledger - set(Wallet.objects.values_list("player_id", flat=True)))
    return bad
