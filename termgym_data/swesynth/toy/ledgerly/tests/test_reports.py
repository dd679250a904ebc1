import datetime
from decimal import Decimal

import pytest

from ledgerly.accounts import standard_chart
from ledgerly.invoice import Invoice, LineItem
from ledgerly.journal import JournalEntry, Ledger
from ledgerly.reports import (
    aging_report,
    balance_sheet,
    bucket_label,
    customer_balances,
    format_table,
    income_statement,
    monthly_totals,
    top_customers,
    trial_balance_text,
)

D = datetime.date
AS_OF = D(2024, 6, 30)


def make_invoice(customer, issued, amount, paid=None):
    inv = Invoice(f"INV-{customer}", customer, issued)
    inv.add_line(LineItem("Service", 1, amount))
    if paid is not None:
        inv.pay(paid, issued)
    return inv


@pytest.fixture
def invoices():
    return [
        make_invoice("Ann", D(2024, 6, 10), "100"),
        make_invoice("Bob", D(2024, 5, 20), "200"),
        make_invoice("Cat", D(2024, 4, 1), "300", paid="50"),
        make_invoice("Dan", D(2024, 3, 1), "400"),
        make_invoice("Eve", D(2024, 1, 1), "500", paid="500"),
        Invoice("INV-F", "Fay", D(2024, 1, 1)),
        make_invoice("Bob", D(2024, 6, 1), "20"),
    ]


@pytest.fixture
def ledger():
    book = Ledger(standard_chart())
    book.post(JournalEntry(D(2024, 1, 1), "Investment").debit("1000", 1000).credit("3000", 1000))
    book.post(JournalEntry(D(2024, 1, 5), "Sale").debit("1000", 250).credit("4000", 250))
    book.post(JournalEntry(D(2024, 2, 10), "Rent").debit("6000", 400).credit("1000", 400))
    book.post(JournalEntry(D(2024, 2, 11), "Sale").debit("1100", 90).credit("4000", 90))
    return book


@pytest.mark.parametrize(
    "days, label", [(-5, "current"), (0, "current"), (1, "1-30"), (30, "1-30"), (31, "31-60"),
                    (60, "31-60"), (61, "61-90"), (90, "61-90"), (91, "90+")]
)
def test_bucket_label(days, label):
    assert bucket_label(days) == label


def test_bucket_label_custom_buckets():
    assert bucket_label(8, (7, 14)) == "8-14"
    assert bucket_label(15, (7, 14)) == "14+"


def test_aging_report(invoices):
    assert aging_report(invoices, AS_OF) == {
        "current": Decimal("120.00"),
        "1-30": Decimal("200.00"),
        "31-60": Decimal("250.00"),
        "61-90": Decimal("0.00"),
        "90+": Decimal("400.00"),
    }


def test_aging_report_keeps_bucket_order(invoices):
    assert list(aging_report(invoices, AS_OF, buckets=(15, 45))) == ["current", "1-15", "16-45", "45+"]


@pytest.mark.parametrize("buckets", [(60, 30), (30, 30)])
def test_aging_report_rejects_unsorted_buckets(invoices, buckets):
    with pytest.raises(ValueError, match="increasing"):
        aging_report(invoices, AS_OF, buckets)


def test_customer_balances_sorted(invoices):
    assert customer_balances(invoices) == [
        ("Dan", Decimal("400.00")),
        ("Cat", Decimal("250.00")),
        ("Bob", Decimal("220.00")),
        ("Ann", Decimal("100.00")),
    ]


def test_customer_balances_tie_broken_by_name():
    invs = [make_invoice("Zed", D(2024, 1, 1), "10"), make_invoice("Amy", D(2024, 1, 1), "10")]
    assert [name for name, _ in customer_balances(invs)] == ["Amy", "Zed"]


def test_top_customers(invoices):
    assert top_customers(invoices) == ["Dan", "Cat", "Bob"]
    assert top_customers(invoices, 1) == ["Dan"]
    assert top_customers(invoices, 0) == []
    with pytest.raises(ValueError):
        top_customers(invoices, -1)


def test_income_statement_whole_period(ledger):
    assert income_statement(ledger) == {
        "revenue": Decimal("340.00"), "expenses": Decimal("400.00"), "net_income": Decimal("-60.00")
    }


def test_income_statement_for_january(ledger):
    result = income_statement(ledger, D(2024, 1, 1), D(2024, 1, 31))
    assert result["revenue"] == Decimal("250.00")
    assert result["expenses"] == Decimal("0.00")


def test_balance_sheet(ledger):
    sheet = balance_sheet(ledger)
    assert sheet["assets"] == Decimal("940.00")
    assert sheet["liabilities"] == Decimal("0.00")
    assert sheet["equity"] == Decimal("940.00")
    assert sheet["balanced"] is True


def test_balance_sheet_as_of_date(ledger):
    ledger.post(JournalEntry(D(2024, 3, 1), "Loan").debit("1000", 500).credit("2000", 500))
    sheet = balance_sheet(ledger, as_of=D(2024, 1, 31))
    assert sheet["assets"] == Decimal("1250.00")
    assert balance_sheet(ledger)["liabilities"] == Decimal("500.00")


def test_monthly_totals(ledger):
    assert monthly_totals(ledger.entries, "1000") == {"2024-01": Decimal("1250.00"), "2024-02": Decimal("-400.00")}
    assert monthly_totals(reversed(ledger.entries), "4000") == {
        "2024-01": Decimal("-250.00"), "2024-02": Decimal("-90.00")
    }


def test_format_table_default_alignment():
    text = format_table(["Item", "Qty"], [["Apple", 3], ["Kiwi", 12]])
    assert text.splitlines() == ["Item   Qty", "-----  ---", "Apple    3", "Kiwi    12"]


def test_format_table_explicit_alignment_and_separator():
    text = format_table(["A", "B"], [["x", "yy"]], align="rl", sep=" | ")
    assert text.splitlines() == ["A | B", "- | --", "x | yy"]


def test_format_table_errors():
    with pytest.raises(ValueError, match="row 2"):
        format_table(["A"], [["x"], ["y", "z"]])
    with pytest.raises(ValueError, match="align"):
        format_table(["A", "B"], [["x", "y"]], align="lc")


def test_format_table_without_rows():
    assert format_table(["Name", "N"], []) == "Name  N\n----  -"


def test_trial_balance_text(ledger):
    lines = trial_balance_text(ledger).splitlines()
    assert lines[0] == "Code  Account                Debit   Credit"
    assert lines[2] == "1000  Cash                  850.00"
    assert lines[4] == "3000  Owner's Equity                1000.00"
    assert lines[-1] == "      Total                1340.00  1340.00"
