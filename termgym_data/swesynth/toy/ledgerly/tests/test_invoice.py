import datetime
from decimal import Decimal

import pytest

from ledgerly.invoice import Invoice, LineItem, next_invoice_number
from ledgerly.money import Money
from ledgerly.pricing import TaxRate

D = datetime.date


@pytest.fixture
def invoice():
    inv = Invoice("INV-00007", "Acme Ltd", D(2024, 3, 1), tax_rates=[TaxRate("VAT", "0.20")])
    inv.add_line(LineItem("Widget", 3, "9.99"))
    inv.add_line(LineItem("Consulting", "1.5", "80.00", discount_percent=10, taxable=False))
    return inv


def test_line_amounts():
    line = LineItem("Cable", 4, "2.49", discount_percent=25)
    assert line.gross() == Decimal("9.96")
    assert line.discount() == Decimal("2.49")
    assert line.net() == Decimal("7.47")


@pytest.mark.parametrize(
    "args",
    [("", 1, 1), ("x", 0, 1), ("x", -1, 1), ("x", 1, "-0.01"), ("x", 1, 1, 101), ("x", 1, 1, -5)],
)
def test_line_validation(args):
    with pytest.raises(ValueError):
        LineItem(*args)


def test_subtotal_and_discount_total(invoice):
    assert invoice.subtotal() == Decimal("137.97")
    assert invoice.discount_total() == Decimal("12.00")


def test_taxes_only_on_taxable_lines(invoice):
    assert invoice.taxable_base() == Decimal("29.97")
    assert invoice.tax_lines() == [("VAT", Decimal("5.99"))]
    assert invoice.tax_total() == Decimal("5.99")


def test_total_is_money(invoice):
    assert invoice.total() == Money("143.96")


def test_due_date_default_terms(invoice):
    assert invoice.due_date == D(2024, 3, 31)
    assert Invoice("X", "Y", D(2024, 2, 20), due_days=10).due_date == D(2024, 3, 1)


def test_negative_terms_refused():
    with pytest.raises(ValueError, match="due_days"):
        Invoice("X", "Y", D(2024, 1, 1), due_days=-1)


def test_remove_line_bounds(invoice):
    assert invoice.remove_line(1).description == "Consulting"
    assert len(invoice.lines) == 1
    with pytest.raises(IndexError):
        invoice.remove_line(1)
    with pytest.raises(IndexError):
        invoice.remove_line(-1)


def test_status_progression(invoice):
    assert Invoice("X", "Y", D(2024, 1, 1)).status() == "draft"
    assert invoice.status() == "open"
    assert invoice.pay("100", D(2024, 3, 5)) == Money("43.96")
    assert invoice.status() == "partial"
    invoice.pay("43.96", D(2024, 3, 6))
    assert invoice.status() == "paid"


def test_overpayment_refused(invoice):
    with pytest.raises(ValueError, match="exceeds balance"):
        invoice.pay("143.97", D(2024, 3, 2))
    assert invoice.payments == []


@pytest.mark.parametrize("amount", ["0", "-5"])
def test_payment_must_be_positive(invoice, amount):
    with pytest.raises(ValueError, match="positive"):
        invoice.pay(amount, D(2024, 3, 2))


def test_payment_before_issue_refused(invoice):
    with pytest.raises(ValueError, match="before"):
        invoice.pay("1", D(2024, 2, 29))


@pytest.mark.parametrize(
    "as_of, days", [(D(2024, 3, 30), 0), (D(2024, 3, 31), 0), (D(2024, 4, 1), 1), (D(2024, 5, 1), 31)]
)
def test_days_overdue(invoice, as_of, days):
    assert invoice.days_overdue(as_of) == days
    assert invoice.is_overdue(as_of) == (days > 0)


def test_paid_invoice_is_never_overdue(invoice):
    invoice.pay("143.96", D(2024, 3, 2))
    assert invoice.days_overdue(D(2025, 1, 1)) == 0


def test_render(invoice):
    invoice.pay("40", D(2024, 3, 2))
    text = invoice.render().splitlines()
    assert text[0] == "Invoice INV-00007"
    assert text[2] == "Issued 2024-03-01, due 2024-03-31"
    assert text[4] == "Widget" + " " * 29 + "3 x     9.99        29.97"
    assert text[6] == "  less 10% discount"
    assert text[8] == " " * 39 + "Subtotal:      137.97"
    assert text[9].endswith("VAT:        5.99")
    assert text[-1] == " " * 36 + "Balance due:      103.96"
    assert all(len(line) <= 60 for line in text)


def test_render_without_payments_has_no_balance_line(invoice):
    assert "Balance due" not in invoice.render()


@pytest.mark.parametrize(
    "last, expected",
    [(None, "INV-00001"), ("", "INV-00001"), ("INV-00041", "INV-00042"), ("INV-99999", "INV-100000"),
     ("Q7", "Q8"), ("2024-009", "2024-010")],
)
def test_next_invoice_number(last, expected):
    assert next_invoice_number(last) == expected


def test_next_invoice_number_custom_prefix_and_bad_input():
    assert next_invoice_number(None, prefix="B", width=3) == "B001"
    with pytest.raises(ValueError):
        next_invoice_number("INV-")


def test_due_on_receipt_terms():
    inv = Invoice("X", "Y", D(2024, 5, 5), due_days=0)
    assert inv.due_date == D(2024, 5, 5)
