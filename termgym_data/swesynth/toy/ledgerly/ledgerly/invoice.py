"""Invoices: line items, discounts, taxes, payments and a plain-text rendering."""

from __future__ import annotations

import datetime
import re
from decimal import Decimal
from typing import Optional, Sequence

from .money import Money, quantize, to_decimal
from .pricing import TaxRate, compute_taxes, percent_of

DEFAULT_TERMS_DAYS = 30
LINE_WIDTH = 60


class LineItem:
    """A billed product or service: quantity times unit price, less a line discount."""

    def __init__(self, description: str, quantity: object, unit_price: object,
                 discount_percent: object = 0, taxable: bool = True) -> None:
        """Create a line; quantity must be positive and the price not negative."""
        if not description.strip():
            raise ValueError("a line item needs a description")
        self.description = description.strip()
        self.quantity = to_decimal(quantity)  # type: ignore[arg-type]
        self.unit_price = to_decimal(unit_price)  # type: ignore[arg-type]
        self.discount_percent = to_decimal(discount_percent)  # type: ignore[arg-type]
        self.taxable = taxable
        if self.quantity <= 0:
            raise ValueError(f"line {self.description!r}: quantity must be positive")
        if self.unit_price < 0:
            raise ValueError(f"line {self.description!r}: price must not be negative")
        if not 0 <= self.discount_percent <= 100:
            raise ValueError(f"line {self.description!r}: discount must be 0-100 percent")

    def gross(self) -> Decimal:
        """Quantity times unit price before discount."""
        return quantize(self.quantity * self.unit_price)

    def discount(self) -> Decimal:
        """The line discount amount."""
        return percent_of(self.gross(), self.discount_percent)

    def net(self) -> Decimal:
        """Gross less discount."""
        return self.gross() - self.discount()


class Invoice:
    """A bill to one customer with terms, taxes and recorded payments."""

    def __init__(self, number: str, customer: str, issue_date: datetime.date,
                 due_days: int = DEFAULT_TERMS_DAYS, tax_rates: Optional[Sequence[TaxRate]] = None,
                 currency: str = "USD") -> None:
        """Create an empty invoice; payment is due ``due_days`` after issue."""
        if due_days < 0:
            raise ValueError(f"invoice {number}: due_days must not be negative")
        self.number = number
        self.customer = customer
        self.issue_date = issue_date
        self.due_days = due_days
        self.tax_rates = list(tax_rates or [])
        self.currency = currency
        self.lines: list[LineItem] = []
        self.payments: list[tuple[datetime.date, Decimal]] = []

    def add_line(self, line: LineItem) -> LineItem:
        """Append a line item."""
        self.lines.append(line)
        return line

    def remove_line(self, index: int) -> LineItem:
        """Remove and return the line at ``index`` (0-based)."""
        if index < 0 or index >= len(self.lines):
            raise IndexError(f"invoice {self.number} has no line {index}")
        return self.lines.pop(index)

    @property
    def due_date(self) -> datetime.date:
        """The date payment is due."""
        return self.issue_date + datetime.timedelta(days=self.due_days)

    def subtotal(self) -> Decimal:
        """Sum of line nets."""
        return sum((line.net() for line in self.lines), Decimal("0.00"))

    def discount_total(self) -> Decimal:
        """Sum of line discounts."""
        return sum((line.discount() for line in self.lines), Decimal("0.00"))

    def taxable_base(self) -> Decimal:
        """Sum of the nets of taxable lines."""
        return sum((line.net() for line in self.lines if line.taxable), Decimal("0.00"))

    def tax_lines(self) -> list[tuple[str, Decimal]]:
        """(tax name, amount) for each configured tax."""
        return compute_taxes(self.taxable_base(), self.tax_rates)

    def tax_total(self) -> Decimal:
        """Sum of all taxes."""
        return sum((amount for _, amount in self.tax_lines()), Decimal("0.00"))

    def total(self) -> Money:
        """Amount the customer owes before payments."""
        return Money(self.subtotal() + self.tax_total(), self.currency)

    def paid(self) -> Decimal:
        """Sum of recorded payments."""
        return sum((amount for _, amount in self.payments), Decimal("0.00"))

    def balance_due(self) -> Money:
        """Total less payments."""
        return Money(self.total().amount - self.paid(), self.currency)

    def pay(self, amount: object, date: datetime.date) -> Money:
        """Record a payment and return the new balance; overpayment is refused."""
        value = quantize(to_decimal(amount))  # type: ignore[arg-type]
        if value <= 0:
            raise ValueError(f"invoice {self.number}: payment must be positive")
        if date < self.issue_date:
            raise ValueError(f"invoice {self.number}: payment dated before the invoice")
        if value > self.balance_due().amount:
            raise ValueError(
                f"invoice {self.number}: payment {value} exceeds balance {self.balance_due().amount}"
            )
        self.payments.append((date, value))
        return self.balance_due()

    def status(self) -> str:
        """``draft`` (no lines), ``paid``, ``partial`` or ``open``."""
        if not self.lines:
            return "draft"
        if self.balance_due().amount == 0:
            return "paid"
        if self.paid() > 0:
            return "partial"
        return "open"

    def days_overdue(self, as_of: datetime.date) -> int:
        """Days past the due date on ``as_of``; 0 when not yet due or fully paid."""
        if self.status() == "paid":
            return 0
        return max(0, (as_of - self.due_date).days)

    def is_overdue(self, as_of: datetime.date) -> bool:
        """True when money is still owed after the due date."""
        return self.days_overdue(as_of) > 0

    def render(self) -> str:
        """A fixed-width text rendering suitable for e-mail."""
        out = [f"Invoice {self.number}", f"Bill to: {self.customer}",
               f"Issued {self.issue_date.isoformat()}, due {self.due_date.isoformat()}", "-" * LINE_WIDTH]
        for line in self.lines:
            qty = f"{line.quantity.normalize():f}"
            left = f"{line.description[:30]:<30} {qty:>5} x {line.unit_price:>8}"
            out.append(f"{left}{line.net():>{LINE_WIDTH - len(left)}}")
            if line.discount() > 0:
                note = f"  less {line.discount_percent.normalize():f}% discount"
                out.append(note)
        out.append("-" * LINE_WIDTH)
        out.append(_total_row("Subtotal", self.subtotal()))
        for name, amount in self.tax_lines():
            out.append(_total_row(name, amount))
        out.append(_total_row("Total", self.total().amount))
        if self.payments:
            out.append(_total_row("Paid", self.paid()))
            out.append(_total_row("Balance due", self.balance_due().amount))
        return "\n".join(out)


def _total_row(label: str, amount: Decimal) -> str:
    """A right-aligned label/amount row of the invoice footer."""
    return f"{label + ':':>{LINE_WIDTH - 12}}{amount:>12}"


_NUMBER_RE = re.compile(r"^(?P<prefix>.*?)(?P<digits>\d+)$")


def next_invoice_number(last: Optional[str], prefix: str = "INV-", width: int = 5) -> str:
    """The number after ``last`` (``INV-00041`` -> ``INV-00042``), or the first one.

    The numeric part keeps its zero padding and grows past ``width`` when needed.
    """
    if not last:
        return f"{prefix}{1:0{width}d}"
    match = _NUMBER_RE.match(last)
    if match is None:
        raise ValueError(f"cannot continue numbering after {last!r}")
    digits = match.group("digits")
    following = int(digits) + 1
    return f"{match.group('prefix')}{following:0{len(digits)}d}"
