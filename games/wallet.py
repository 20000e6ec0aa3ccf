"""The wallet service: the only code that changes balances.

Each change locks the wallet row (``SELECT … FOR UPDATE``), checks the new
balance is not negative, writes it and appends one ``LedgerEntry`` -- all in
one transaction, so a balance always equals the sum of its ledger. The CHECK
constraints on ``Wallet`` make the database refuse a negative balance even
if some future code forgets the check.
"""
from __future__ import annotations

from datetime import datetime

from django.db import connection, transaction
from django.db.models import Sum
from django.utils import timezone

from .rows import insert_row, insert_select, mark_saved
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


def _take(pid: str, currency: str, amount: int, only_if: str = "") -> tuple[str, list, str, datetime]:
    """``UPDATE wallet SET c = c - amount WHERE c >= amount RETURNING c``:
    no read, and it row-locks the wallet as ``lock_wallet`` does."""
    qn, now = connection.ops.quote_name, timezone.now()
    col = qn(currency)  # a Currency value, checked by the caller
    sql = (f"UPDATE {qn(Wallet._meta.db_table)} SET {col} = {col} - %s, {qn('updated_at')} = %s "
           f"WHERE {qn(Wallet._meta.pk.column)} = %s AND {col} >= %s{only_if} RETURNING {col}")
    return sql, [amount, connection.ops.adapt_datetimefield_value(now), pid, amount], col, now


def _charge_ctes(pid: str, currency: str, amount: int, reason: str, reference: str, along, *,
                 only_if: str = "") -> tuple[list[str], list, str, LedgerEntry]:
    """The charge as data-modifying CTEs (PostgreSQL): ``w`` takes the amount
    (``UPDATE … WHERE c >= amount [AND only_if] RETURNING c``), ``l`` writes
    the ledger row and ``a`` the ``along`` row, both selecting from ``w``, so
    they are written only if the charge is. Answers the CTEs, their params,
    the currency's quoted column and the (unsaved) ledger entry."""
    update, params, col, now = _take(pid, currency, amount, only_if)
    entry = LedgerEntry(player_id=pid, currency=currency, delta=-amount, balance_after=None, reason=reason,
                        reference=reference, created_at=now)
    ledger, ledger_params = insert_select(entry, "w", from_source={"balance_after": f"w.{col}"})
    ctes, params = [f"w AS ({update})", f"l AS ({ledger})"], params + ledger_params
    if along is not None:
        row, row_params = insert_select(along, "w")
        ctes.append(f"a AS ({row})")
        params += row_params
    return ctes, params, col, entry


def _charge_in_one_statement(pid: str, currency: str, amount: int, reason: str, reference: str, along, *,
                             guard_ctes: str = "", guard_params: list = (), only_if: str = "") -> LedgerEntry | None:
    """Run ``_charge_ctes`` (after the caller's ``guard_ctes``, if any) as
    one statement. The ledger entry, or None with nothing written."""
    ctes, params, col, entry = _charge_ctes(pid, currency, amount, reason, reference, along, only_if=only_if)
    with connection.cursor() as cursor:
        cursor.execute(f"WITH {', '.join(([guard_ctes] if guard_ctes else []) + ctes)} SELECT {col} FROM w",
                       [*guard_params, *params])
        row = cursor.fetchone()
    if row is None:
        return None
    entry.balance_after = row[0]
    mark_saved(entry, *([along] if along is not None else []))
    return entry


def _check_charge(currency: str, amount: int) -> str:
    currency = Currency(currency).value
    if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
        raise WalletError("a charge must be a positive whole number")
    return currency


def charge(player, currency: str, amount: int, reason: str, reference: str, *, along=None) -> LedgerEntry:
    """Take ``amount`` (> 0) with no read: a conditional ``UPDATE … SET c =
    c - amount WHERE c >= amount RETURNING c`` (which row-locks the wallet
    until the transaction ends, as ``lock_wallet`` does) and the ledger
    INSERT. ``along`` is one more new row written only if the charge is
    made (the guess it pays for). InsufficientFunds, with nothing written,
    when the balance is short or there is no wallet. Call it inside the
    caller's transaction.

    On PostgreSQL it is all one statement (``_charge_ctes``): a short
    balance (no row returned) writes nothing, and a refused INSERT (a
    unique constraint) fails the whole statement. Elsewhere (SQLite) it is
    one statement per row, in the caller's transaction."""
    currency = _check_charge(currency, amount)
    pid = _player_id(player)
    if connection.vendor == "postgresql":
        entry = _charge_in_one_statement(pid, currency, amount, reason, reference, along)
        if entry is None:
            raise InsufficientFunds(currency, amount, balances(pid)[currency])
        return entry
    update, params, _, now = _take(pid, currency, amount)
    with connection.cursor() as cursor:
        cursor.execute(update, params)
        row = cursor.fetchone()
    if row is None:
        raise InsufficientFunds(currency, amount, balances(pid)[currency])
    entry = LedgerEntry(player_id=pid, currency=currency, delta=-amount, balance_after=row[0], reason=reason,
                        reference=reference, created_at=now)
    insert_row(entry)  # = entry.save(force_insert=True), without the compiler's CPU
    if along is not None:
        insert_row(along)
    return entry


def charge_if(player, currency: str, amount: int, reason: str, reference: str, *, along,
              guard_ctes: str, guard_params: list, only_if: str) -> LedgerEntry | None:
    """PostgreSQL only: ``charge`` as one statement that also checks
    ``only_if`` (a condition over the caller's ``guard_ctes``, e.g. "the
    round is open") in the same statement, in autocommit. Answers the
    ledger entry, or None with nothing written (short of funds, or the
    guard did not hold: the caller finds out which)."""
    currency = _check_charge(currency, amount)
    return _charge_in_one_statement(_player_id(player), currency, amount, reason, reference, along,
                                    guard_ctes=guard_ctes, guard_params=guard_params, only_if=only_if)


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
