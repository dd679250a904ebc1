"""Double-entry journal entries and the ledger that posts them."""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Iterable, Optional

from .accounts import ChartOfAccounts
from .money import quantize, to_decimal

ZERO = Decimal("0.00")


class UnbalancedEntry(ValueError):
    """Raised when an entry's debits and credits differ."""


class Posting:
    """One line of a journal entry: an account and either a debit or a credit."""

    def __init__(self, account: str, debit: object = 0, credit: object = 0) -> None:
        """Create a posting; exactly one of ``debit`` and ``credit`` must be positive."""
        self.account = account
        self.debit = quantize(to_decimal(debit))  # type: ignore[arg-type]
        self.credit = quantize(to_decimal(credit))  # type: ignore[arg-type]
        if self.debit < 0 or self.credit < 0:
            raise ValueError(f"posting to {account}: amounts must not be negative")
        if self.debit > 0 and self.credit > 0:
            raise ValueError(f"posting to {account}: both debit and credit set")
        if self.debit == 0 and self.credit == 0:
            raise ValueError(f"posting to {account}: zero amount")

    @property
    def signed(self) -> Decimal:
        """Debit as positive, credit as negative."""
        return self.debit - self.credit

    def __repr__(self) -> str:
        """Debug form."""
        return f"Posting({self.account!r}, debit={self.debit}, credit={self.credit})"


class JournalEntry:
    """A dated, balanced set of postings with a memo."""

    def __init__(self, date: datetime.date, memo: str = "", reference: Optional[str] = None) -> None:
        """Start an empty entry for ``date``."""
        self.date = date
        self.memo = memo
        self.reference = reference
        self.postings: list[Posting] = []

    def debit(self, account: str, amount: object) -> JournalEntry:
        """Add a debit line; returns the entry so calls can be chained."""
        self.postings.append(Posting(account, debit=amount))
        return self

    def credit(self, account: str, amount: object) -> JournalEntry:
        """Add a credit line; returns the entry so calls can be chained."""
        self.postings.append(Posting(account, credit=amount))
        return self

    def total_debits(self) -> Decimal:
        """Sum of all debit lines."""
        return sum((p.debit for p in self.postings), ZERO)

    def total_credits(self) -> Decimal:
        """Sum of all credit lines."""
        return sum((p.credit for p in self.postings), ZERO)

    def is_balanced(self) -> bool:
        """True when debits equal credits."""
        return self.total_debits() == self.total_credits()

    def accounts(self) -> list[str]:
        """Distinct account codes touched, in first-use order."""
        seen: list[str] = []
        for posting in self.postings:
            if posting.account not in seen:
                seen.append(posting.account)
        return seen

    def validate(self) -> None:
        """Raise if the entry has fewer than two lines or does not balance."""
        if len(self.postings) < 2:
            raise UnbalancedEntry(f"entry {self.memo!r} needs at least two postings")
        difference = self.total_debits() - self.total_credits()
        if difference != 0:
            raise UnbalancedEntry(
                f"entry {self.memo!r} on {self.date.isoformat()} is off by {difference}"
            )

    def reversed(self, date: Optional[datetime.date] = None) -> JournalEntry:
        """A new entry that undoes this one (debits become credits)."""
        entry = JournalEntry(date or self.date, f"Reversal of {self.memo}", self.reference)
        for p in self.postings:
            entry.postings.append(Posting(p.account, debit=p.credit, credit=p.debit))
        return entry


class Ledger:
    """Posted journal entries over a chart of accounts."""

    def __init__(self, chart: ChartOfAccounts) -> None:
        """Create an empty ledger for ``chart``."""
        self.chart = chart
        self.entries: list[JournalEntry] = []
        self._locked_until: Optional[datetime.date] = None

    def post(self, entry: JournalEntry) -> JournalEntry:
        """Validate ``entry`` and record it.

        Every account must exist and be active, and the entry may not fall in a
        locked (closed) period.
        """
        entry.validate()
        for code in entry.accounts():
            account = self.chart.get(code)
            if not account.active:
                raise ValueError(f"account {code} is inactive")
        if self._locked_until is not None and entry.date <= self._locked_until:
            raise ValueError(
                f"period is locked through {self._locked_until.isoformat()}; "
                f"cannot post on {entry.date.isoformat()}"
            )
        self.entries.append(entry)
        return entry

    def lock_through(self, date: datetime.date) -> None:
        """Close the books through ``date``: later posts must be dated after it."""
        if self._locked_until is not None and date < self._locked_until:
            raise ValueError("cannot move the lock date backwards")
        self._locked_until = date

    def _entries_between(self, start: Optional[datetime.date],
                         end: Optional[datetime.date]) -> Iterable[JournalEntry]:
        """Entries dated within ``[start, end]``; a missing bound is open."""
        for entry in self.entries:
            if start is not None and entry.date < start:
                continue
            if end is not None and entry.date > end:
                continue
            yield entry

    def balance(self, code: str, until: Optional[datetime.date] = None,
                include_children: bool = False) -> Decimal:
        """Balance of an account on its normal side, up to and including ``until``.

        A positive result means the account holds its usual kind of balance (an
        asset with money in it, a liability that is owed).
        """
        account = self.chart.get(code)
        codes = {code}
        if include_children:
            codes.update(a.code for a in self.chart.descendants(code))
        net = ZERO
        for entry in self._entries_between(None, until):
            for posting in entry.postings:
                if posting.account in codes:
                    net += posting.signed
        return net if account.normal_side == "debit" else -net

    def activity(self, code: str, start: Optional[datetime.date] = None,
                 end: Optional[datetime.date] = None) -> list[tuple[datetime.date, str, Decimal]]:
        """Signed movements on ``code`` (debit positive) within the date range, oldest first."""
        self.chart.get(code)
        rows = []
        for entry in self._entries_between(start, end):
            for posting in entry.postings:
                if posting.account == code:
                    rows.append((entry.date, entry.memo, posting.signed))
        rows.sort(key=lambda row: row[0])
        return rows

    def trial_balance(self, until: Optional[datetime.date] = None) -> list[tuple[str, str, Decimal, Decimal]]:
        """Rows of (code, name, debit, credit) for accounts with a non-zero balance."""
        rows = []
        for account in self.chart:
            net = ZERO
            for entry in self._entries_between(None, until):
                for posting in entry.postings:
                    if posting.account == account.code:
                        net += posting.signed
            if net == 0:
                continue
            if net > 0:
                rows.append((account.code, account.name, net, ZERO))
            else:
                rows.append((account.code, account.name, ZERO, -net))
        return rows

    def is_in_balance(self) -> bool:
        """True when the trial balance's debit and credit columns agree."""
        rows = self.trial_balance()
        return sum((r[2] for r in rows), ZERO) == sum((r[3] for r in rows), ZERO)

    def find(self, reference: str) -> list[JournalEntry]:
        """Entries carrying ``reference`` in posting order."""
        return [e for e in self.entries if e.reference == reference]
