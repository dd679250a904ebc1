"""Money values: an exact decimal amount tied to a currency.

Amounts are kept as :class:`decimal.Decimal` and rounded half-up to the currency's
minor unit (cents for USD, none for JPY, fils for KWD) whenever a value is created,
so that sums of many invoice lines never drift the way binary floats do.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Iterable, Sequence, Union

Number = Union[int, str, Decimal]

# Digits after the decimal point for each supported currency (ISO 4217 minor units).
CURRENCY_EXPONENTS = {"USD": 2, "EUR": 2, "GBP": 2, "CHF": 2, "JPY": 0, "KWD": 3}
CURRENCY_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥"}
DEFAULT_CURRENCY = "USD"


class CurrencyMismatch(ValueError):
    """Raised when two amounts in different currencies are combined."""


def minor_exponent(currency: str) -> int:
    """Return how many decimal places the currency's smallest unit has.

    Raises ``ValueError`` for a currency code the library does not know.
    """
    exponent = CURRENCY_EXPONENTS.get(currency)
    if exponent is None:
        raise ValueError(f"unknown currency {currency!r}")
    return exponent


def quantize(amount: Decimal, currency: str = DEFAULT_CURRENCY) -> Decimal:
    """Round ``amount`` half-up to the minor unit of ``currency``."""
    step = Decimal(1).scaleb(-minor_exponent(currency))
    return amount.quantize(step, rounding=ROUND_HALF_UP)


def to_decimal(value: Number) -> Decimal:
    """Convert an int, a numeric string or a Decimal to a Decimal.

    Floats are refused because they cannot represent most cent values exactly.
    """
    if isinstance(value, bool):
        raise TypeError("a boolean is not an amount")
    if isinstance(value, float):
        raise TypeError("use a string or Decimal instead of a float for money")
    if isinstance(value, Decimal):
        return value
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, str):
        return parse_amount(value)
    raise TypeError(f"cannot convert {type(value).__name__} to an amount")


def parse_amount(text: str) -> Decimal:
    """Parse a human-written amount such as ``"$1,234.50"``, ``"-3"`` or ``"(12.00)"``.

    Parentheses mean a negative amount, as in accounting statements. Thousands
    separators and a leading currency symbol are ignored.
    """
    cleaned = text.strip()
    if not cleaned:
        raise ValueError("empty amount")
    negative = False
    if cleaned.startswith("(") and cleaned.endswith(")"):
        negative = True
        cleaned = cleaned[1:-1].strip()
    if cleaned.startswith("-"):
        negative = not negative
        cleaned = cleaned[1:].strip()
    for symbol in CURRENCY_SYMBOLS.values():
        if cleaned.startswith(symbol):
            cleaned = cleaned[len(symbol):]
            break
    cleaned = cleaned.replace(",", "").replace(" ", "")
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        raise ValueError(f"not an amount: {text!r}") from None
    if not value.is_finite():
        raise ValueError(f"not a finite amount: {text!r}")
    return -value if negative else value


class Money:
    """An immutable amount of one currency, rounded to its minor unit."""

    __slots__ = ("amount", "currency")

    def __init__(self, amount: Number = 0, currency: str = DEFAULT_CURRENCY) -> None:
        """Create a value; ``amount`` is rounded half-up to the currency's minor unit."""
        object.__setattr__(self, "currency", currency.upper())
        object.__setattr__(self, "amount", quantize(to_decimal(amount), self.currency))

    def __setattr__(self, name: str, value: object) -> None:
        """Refuse mutation: Money is a value type."""
        raise AttributeError("Money is immutable")

    @classmethod
    def from_minor(cls, units: int, currency: str = DEFAULT_CURRENCY) -> Money:
        """Build a value from an integer count of minor units (e.g. cents)."""
        exponent = minor_exponent(currency.upper())
        return cls(Decimal(units).scaleb(-exponent), currency)

    @property
    def minor_units(self) -> int:
        """The amount as an integer count of minor units."""
        return int(self.amount.scaleb(minor_exponent(self.currency)))

    def _check(self, other: object) -> Money:
        """Return ``other`` if it is Money of the same currency, else raise."""
        if not isinstance(other, Money):
            raise TypeError(f"expected Money, got {type(other).__name__}")
        if other.currency != self.currency:
            raise CurrencyMismatch(f"cannot combine {self.currency} with {other.currency}")
        return other

    def __add__(self, other: Money) -> Money:
        """Sum of two values of the same currency."""
        other = self._check(other)
        return Money(self.amount + other.amount, self.currency)

    def __radd__(self, other: object) -> Money:
        """Allow ``sum()`` to start from the integer 0."""
        if other == 0:
            return self
        return self.__add__(other)  # type: ignore[arg-type]

    def __sub__(self, other: Money) -> Money:
        """Difference of two values of the same currency."""
        other = self._check(other)
        return Money(self.amount - other.amount, self.currency)

    def __neg__(self) -> Money:
        """The value with its sign flipped."""
        return Money(-self.amount, self.currency)

    def __abs__(self) -> Money:
        """The value without its sign."""
        return Money(abs(self.amount), self.currency)

    def __mul__(self, factor: Number) -> Money:
        """Scale by a number; the result is rounded to the minor unit."""
        if isinstance(factor, Money):
            raise TypeError("cannot multiply money by money")
        return Money(self.amount * to_decimal(factor), self.currency)

    __rmul__ = __mul__

    def __truediv__(self, divisor: Number) -> Money:
        """Divide by a non-zero number; use :meth:`allocate` to split without losing cents."""
        value = to_decimal(divisor)
        if value == 0:
            raise ZeroDivisionError("cannot divide money by zero")
        return Money(self.amount / value, self.currency)

    def __eq__(self, other: object) -> bool:
        """Equal when both currency and amount match."""
        if not isinstance(other, Money):
            return NotImplemented
        return self.currency == other.currency and self.amount == other.amount

    def __lt__(self, other: Money) -> bool:
        """Order values of the same currency by amount."""
        return self.amount < self._check(other).amount

    def __le__(self, other: Money) -> bool:
        """Order values of the same currency by amount."""
        return self.amount <= self._check(other).amount

    def __gt__(self, other: Money) -> bool:
        """Order values of the same currency by amount."""
        return self.amount > self._check(other).amount

    def __ge__(self, other: Money) -> bool:
        """Order values of the same currency by amount."""
        return self.amount >= self._check(other).amount

    def __hash__(self) -> int:
        """Hash consistent with equality."""
        return hash((self.amount, self.currency))

    def __bool__(self) -> bool:
        """A zero amount is falsy."""
        return self.amount != 0

    def is_negative(self) -> bool:
        """True for amounts below zero."""
        return self.amount < 0

    def allocate(self, ratios: Sequence[int]) -> list[Money]:
        """Split the value across ``ratios`` without losing or creating a minor unit.

        Each share gets the floor of its exact part; the leftover minor units go one
        by one to the first shares, so ``sum(result) == self`` always holds.
        """
        if not ratios:
            raise ValueError("allocate needs at least one ratio")
        if any(r < 0 for r in ratios):
            raise ValueError("ratios must not be negative")
        total_ratio = sum(ratios)
        if total_ratio == 0:
            raise ValueError("ratios must not all be zero")
        units = self.minor_units
        sign = -1 if units < 0 else 1
        units = abs(units)
        shares = [units * r // total_ratio for r in ratios]
        remainder = units - sum(shares)
        for i in range(remainder):
            shares[i % len(shares)] += 1
        return [Money.from_minor(sign * s, self.currency) for s in shares]

    def split(self, parts: int) -> list[Money]:
        """Split into ``parts`` nearly equal shares (see :meth:`allocate`)."""
        if parts < 1:
            raise ValueError(f"cannot split into {parts} parts")
        return self.allocate([1] * parts)

    def format(self, symbol: bool = True, grouping: bool = True) -> str:
        """Render for people: ``$1,234.50``, ``-€3.00``, ``12.00 CHF``."""
        exponent = minor_exponent(self.currency)
        magnitude = abs(self.amount)
        number = f"{magnitude:,.{exponent}f}" if grouping else f"{magnitude:.{exponent}f}"
        sign = "-" if self.amount < 0 else ""
        sym = CURRENCY_SYMBOLS.get(self.currency)
        if symbol and sym:
            return f"{sign}{sym}{number}"
        return f"{sign}{number} {self.currency}"

    def __str__(self) -> str:
        """Short form used in reports: ``USD 12.50``."""
        exponent = minor_exponent(self.currency)
        return "{} {:.{}f}".format(self.currency, self.amount, exponent)

    def __repr__(self) -> str:
        """Debug form that round-trips through ``eval`` with ``Money`` in scope."""
        return f"Money('{self.amount}', '{self.currency}')"


def total(values: Iterable[Money], currency: str = DEFAULT_CURRENCY) -> Money:
    """Sum ``values``; an empty iterable gives zero of ``currency``."""
    result = Money(0, currency)
    for value in values:
        result = result + value
    return result
