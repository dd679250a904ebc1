import datetime
from decimal import Decimal

import pytest

from ledgerly.accounts import standard_chart
from ledgerly.journal import JournalEntry, Ledger, Posting, UnbalancedEntry

D = datetime.date


def sale(day, amount, memo="Sale", ref=None):
    return JournalEntry(D(2024, 1, day), memo, ref).debit("1000", amount).credit("4000", amount)


@pytest.fixture
def ledger():
    book = Ledger(standard_chart())
    book.post(JournalEntry(D(2024, 1, 1), "Owner investment").debit("1000", "1000").credit("3000", "1000"))
    book.post(sale(5, "250.00", ref="INV-1"))
    book.post(JournalEntry(D(2024, 1, 10), "Rent").debit("6000", "400").credit("1000", "400"))
    return book


def test_posting_signed_amounts():
    assert Posting("1000", debit="5").signed == Decimal("5.00")
    assert Posting("1000", credit="5").signed == Decimal("-5.00")


@pytest.mark.parametrize("debit, credit", [(0, 0), (1, 1), (-1, 0), (0, -2)])
def test_posting_rejects_bad_amounts(debit, credit):
    with pytest.raises(ValueError):
        Posting("1000", debit=debit, credit=credit)


def test_entry_totals_and_balance():
    entry = JournalEntry(D(2024, 1, 1), "Split").debit("1000", "60").debit("1100", "40").credit("4000", "100")
    assert entry.total_debits() == Decimal("100.00")
    assert entry.total_credits() == Decimal("100.00")
    assert entry.is_balanced()
    entry.validate()


def test_unbalanced_entry_reports_difference():
    entry = JournalEntry(D(2024, 2, 3), "Oops").debit("1000", "10").credit("4000", "9.50")
    assert not entry.is_balanced()
    with pytest.raises(UnbalancedEntry, match="off by 0.50"):
        entry.validate()


def test_entry_needs_two_postings():
    entry = JournalEntry(D(2024, 1, 1), "Lonely").debit("1000", "10")
    with pytest.raises(UnbalancedEntry, match="at least two"):
        entry.validate()


def test_accounts_in_first_use_order():
    entry = JournalEntry(D(2024, 1, 1)).debit("1100", 1).debit("1000", 1).credit("1100", 2)
    assert entry.accounts() == ["1100", "1000"]


def test_reversal_swaps_sides():
    rev = sale(5, "20").reversed(D(2024, 2, 1))
    assert rev.date == D(2024, 2, 1)
    assert rev.memo == "Reversal of Sale"
    assert [(p.account, p.debit, p.credit) for p in rev.postings] == [
        ("1000", Decimal("0.00"), Decimal("20.00")),
        ("4000", Decimal("20.00"), Decimal("0.00")),
    ]


def test_balance_on_normal_side(ledger):
    assert ledger.balance("1000") == Decimal("850.00")
    assert ledger.balance("4000") == Decimal("250.00")
    assert ledger.balance("3000") == Decimal("1000.00")
    assert ledger.balance("6000") == Decimal("400.00")


def test_balance_until_is_inclusive(ledger):
    assert ledger.balance("1000", until=D(2024, 1, 5)) == Decimal("1250.00")
    assert ledger.balance("1000", until=D(2024, 1, 4)) == Decimal("1000.00")


def test_balance_with_children():
    chart = standard_chart()
    chart.create("1010", "Till", parent="1000")
    book = Ledger(chart)
    book.post(JournalEntry(D(2024, 1, 1)).debit("1010", 30).credit("4000", 30))
    book.post(JournalEntry(D(2024, 1, 2)).debit("1000", 5).credit("4000", 5))
    assert book.balance("1000") == Decimal("5.00")
    assert book.balance("1000", include_children=True) == Decimal("35.00")


def test_post_rejects_unknown_and_inactive_accounts(ledger):
    with pytest.raises(KeyError, match="7777"):
        ledger.post(JournalEntry(D(2024, 1, 2)).debit("7777", 1).credit("1000", 1))
    ledger.chart.deactivate("6100")
    with pytest.raises(ValueError, match="inactive"):
        ledger.post(JournalEntry(D(2024, 1, 2)).debit("6100", 1).credit("1000", 1))
    assert len(ledger.entries) == 3


def test_locked_period(ledger):
    ledger.lock_through(D(2024, 1, 31))
    with pytest.raises(ValueError, match="locked"):
        ledger.post(sale(31, 5))
    ledger.post(JournalEntry(D(2024, 2, 1), "Feb").debit("1000", 5).credit("4000", 5))
    with pytest.raises(ValueError, match="backwards"):
        ledger.lock_through(D(2024, 1, 15))


def test_activity_in_range(ledger):
    rows = ledger.activity("1000", start=D(2024, 1, 2), end=D(2024, 1, 10))
    assert rows == [(D(2024, 1, 5), "Sale", Decimal("250.00")), (D(2024, 1, 10), "Rent", Decimal("-400.00"))]


def test_activity_sorted_by_date():
    book = Ledger(standard_chart())
    book.post(sale(9, 1, "late"))
    book.post(sale(2, 2, "early"))
    assert [memo for _, memo, _ in book.activity("4000")] == ["early", "late"]


def test_trial_balance_rows(ledger):
    assert ledger.trial_balance() == [
        ("1000", "Cash", Decimal("850.00"), Decimal("0.00")),
        ("3000", "Owner's Equity", Decimal("0.00"), Decimal("1000.00")),
        ("4000", "Sales", Decimal("0.00"), Decimal("250.00")),
        ("6000", "Rent", Decimal("400.00"), Decimal("0.00")),
    ]
    assert ledger.is_in_balance()


def test_trial_balance_skips_zero_accounts(ledger):
    ledger.post(JournalEntry(D(2024, 1, 11)).debit("1100", 7).credit("4000", 7))
    ledger.post(JournalEntry(D(2024, 1, 12)).debit("1000", 7).credit("1100", 7))
    assert "1100" not in [row[0] for row in ledger.trial_balance()]


def test_find_by_reference(ledger):
    assert [e.memo for e in ledger.find("INV-1")] == ["Sale"]
    assert ledger.find("nope") == []
