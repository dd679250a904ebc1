"""Reports over invoices and the ledger, and plain-text tables to print them."""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Iterable, Optional, Sequence

from .invoice import Invoice
from .journal import JournalEntry, Ledger

DEFAULT_BUCKETS = (30, 60, 90)


def bucket_label(days: int, buckets: Sequence[int] = DEFAULT_BUCKETS) -> str:
    """Aging bucket for ``days`` overdue: ``current``, ``1-30``, ..., ``90+``."""
    if days <= 0:
        return "current"
    lower = 1
    for upper in buckets:
        if days <= upper:
            return f"{lower}-{upper}"
        lower = upper + 1
    return f"{buckets[-1]}+"


def aging_report(invoices: Iterable[Invoice], as_of: datetime.date,
                 buckets: Sequence[int] = DEFAULT_BUCKETS) -> dict[str, Decimal]:
    """Open balances grouped by how overdue they are on ``as_of``.

    Every bucket appears in the result, in order, even when it is empty;
    fully paid and draft invoices are left out.
    """
    if list(buckets) != sorted(buckets) or len(set(buckets)) != len(buckets):
        raise ValueError(f"buckets must be strictly increasing: {buckets}")
    labels = ["current"]
    lower = 1
    for upper in buckets:
        labels.append(f"{lower}-{upper}")
        lower = upper + 1
    labels.append(f"{buckets[-1]}+")
    report = {label: Decimal("0.00") for label in labels}
    for invoice in invoices:
        if invoice.status() in ("paid", "draft"):
            continue
        label = bucket_label(invoice.days_overdue(as_of), buckets)
        report[label] += invoice.balance_due().amount
    return report


def customer_balances(invoices: Iterable[Invoice]) -> list[tuple[str, Decimal]]:
    """Open balance per customer, largest first, ties broken by name."""
    totals: dict[str, Decimal] = {}
    for invoice in invoices:
        owed = invoice.balance_due().amount
        if owed == 0:
            continue
        totals[invoice.customer] = totals.get(invoice.customer, Decimal("0.00")) + owed
    return sorted(totals.items(), key=lambda item: (-item[1], item[0]))


def top_customers(invoices: Iterable[Invoice], n: int = 3) -> list[str]:
    """Names of the ``n`` customers who owe the most."""
    if n < 0:
        raise ValueError("n must not be negative")
    return [name for name, _ in customer_balances(invoices)[:n]]


def income_statement(ledger: Ledger, start: Optional[datetime.date] = None,
                     end: Optional[datetime.date] = None) -> dict[str, Decimal]:
    """Revenue, expenses and net income from ledger activity in ``[start, end]``."""
    revenue = Decimal("0.00")
    expenses = Decimal("0.00")
    for account in ledger.chart:
        if account.type not in ("income", "expense"):
            continue
        movement = sum((amount for _, _, amount in ledger.activity(account.code, start, end)),
                       Decimal("0.00"))
        if account.type == "income":
            revenue -= movement
        else:
            expenses += movement
    return {"revenue": revenue, "expenses": expenses, "net_income": revenue - expenses}


def balance_sheet(ledger: Ledger, as_of: Optional[datetime.date] = None) -> dict[str, object]:
    """Assets, liabilities and equity on ``as_of``.

    Income and expense balances not yet closed are folded into equity as current
    earnings, so a consistent ledger always reports ``balanced`` as True.
    """
    totals = {"asset": Decimal("0.00"), "liability": Decimal("0.00"), "equity": Decimal("0.00")}
    earnings = Decimal("0.00")
    for account in ledger.chart:
        amount = ledger.balance(account.code, until=as_of)
        if account.type in totals:
            totals[account.type] += amount
        elif account.type == "income":
            earnings += amount
        else:
            earnings -= amount
    equity = totals["equity"] + earnings
    return {
        "assets": totals["asset"],
        "liabilities": totals["liability"],
        "equity": equity,
        "balanced": totals["asset"] == totals["liability"] + equity,
    }


def monthly_totals(entries: Iterable[JournalEntry], account: str) -> dict[str, Decimal]:
    """Net debit movement on ``account`` per ``YYYY-MM`` month, in month order."""
    months: dict[str, Decimal] = {}
    for entry in entries:
        key = f"{entry.date.year:04d}-{entry.date.month:02d}"
        for posting in entry.postings:
            if posting.account == account:
                months[key] = months.get(key, Decimal("0.00")) + posting.signed
    return dict(sorted(months.items()))


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]],
                 align: Optional[str] = None, sep: str = "  ") -> str:
    """Lay out ``rows`` under ``headers`` in aligned text columns.

    ``align`` holds one character per column: ``l`` (left) or ``r`` (right); by
    default numbers are right-aligned and everything else left-aligned.
    """
    columns = len(headers)
    for number, row in enumerate(rows, start=1):
        if len(row) != columns:
            raise ValueError(f"row {number} has {len(row)} cells, expected {columns}")
    if align is None:
        first = rows[0] if rows else [""] * columns
        align = "".join("r" if isinstance(cell, (int, Decimal)) else "l" for cell in first)
    if len(align) != columns or set(align) - {"l", "r"}:
        raise ValueError(f"align must be {columns} characters of 'l'/'r', got {align!r}")
    text_rows = [[str(cell) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in text_rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: Sequence[str]) -> str:
        """One aligned row with trailing spaces removed."""
        parts = []
        for i, cell in enumerate(cells):
            parts.append(cell.rjust(widths[i]) if align[i] == "r" else cell.ljust(widths[i]))
        return sep.join(parts).rstrip()

    rule = sep.join("-" * w for w in widths)
    return "\n".join([line(headers), rule] + [line(r) for r in text_rows])


def trial_balance_text(ledger: Ledger, until: Optional[datetime.date] = None) -> str:
    """The trial balance as a table with a totals row."""
    rows = ledger.trial_balance(until)
    debit_total = sum((r[2] for r in rows), Decimal("0.00"))
    credit_total = sum((r[3] for r in rows), Decimal("0.00"))
    body = [[code, name, debit or "", credit or ""] for code, name, debit, credit in rows]
    body.append(["", "Total", debit_total, credit_total])
    return format_table(["Code", "Account", "Debit", "Credit"], body, align="llrr")
