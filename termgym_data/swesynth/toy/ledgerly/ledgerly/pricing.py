"""Discounts and taxes on decimal amounts."""

from __future__ import annotations

from decimal import Decimal
from typing import Optional, Sequence

from .money import quantize, to_decimal

HUNDRED = Decimal(100)


def percent_of(amount: Decimal, percent: object) -> Decimal:
    """``percent`` % of ``amount``, rounded to cents."""
    return quantize(amount * to_decimal(percent) / HUNDRED)  # type: ignore[arg-type]


def apply_discount(amount: Decimal, percent: object) -> Decimal:
    """``amount`` reduced by ``percent`` %, which must be between 0 and 100."""
    value = to_decimal(percent)  # type: ignore[arg-type]
    if value < 0 or value > 100:
        raise ValueError(f"discount must be between 0 and 100 percent, got {value}")
    return quantize(amount - percent_of(amount, value))


def tiered_discount(quantity: int, tiers: Sequence[tuple[int, object]]) -> Decimal:
    """Discount percent for ``quantity`` under volume ``tiers``.

    ``tiers`` are ``(minimum quantity, percent)`` pairs in any order; the tier
    with the largest minimum that ``quantity`` reaches wins. No tier gives 0.
    """
    best_minimum = -1
    best = Decimal(0)
    for minimum, percent in tiers:
        if minimum < 0:
            raise ValueError(f"tier minimum must not be negative: {minimum}")
        if quantity >= minimum and minimum > best_minimum:
            best_minimum = minimum
            best = to_decimal(percent)  # type: ignore[arg-type]
    return best


def coupon_discount(subtotal: Decimal, code: str, coupons: dict[str, dict]) -> Decimal:
    """Amount taken off ``subtotal`` by coupon ``code``.

    A coupon is ``{"percent": p}`` or ``{"fixed": amount}``, optionally with
    ``"minimum"`` (the subtotal must reach it). Fixed coupons never exceed the
    subtotal. Unknown codes raise ``KeyError``; a subtotal below the minimum gives 0.
    """
    key = code.strip().upper()
    if key not in coupons:
        raise KeyError(f"unknown coupon {code!r}")
    coupon = coupons[key]
    minimum = to_decimal(coupon.get("minimum", 0))
    if subtotal < minimum:
        return Decimal("0.00")
    if "percent" in coupon:
        return percent_of(subtotal, coupon["percent"])
    fixed = to_decimal(coupon["fixed"])
    return quantize(min(fixed, subtotal))


class TaxRate:
    """A named tax; compound taxes are charged on the base plus earlier taxes."""

    def __init__(self, name: str, rate: object, compound: bool = False) -> None:
        """Create a tax; ``rate`` is a fraction such as ``Decimal("0.07")``."""
        self.name = name
        self.rate = to_decimal(rate)  # type: ignore[arg-type]
        if self.rate < 0 or self.rate >= 1:
            raise ValueError(f"tax {name}: rate must be in [0, 1), got {self.rate}")
        self.compound = compound

    def __repr__(self) -> str:
        """Debug form."""
        return f"TaxRate({self.name!r}, {self.rate}, compound={self.compound})"


def compute_taxes(base: Decimal, rates: Sequence[TaxRate]) -> list[tuple[str, Decimal]]:
    """Tax lines for ``base`` in the order the rates are given.

    Simple taxes are charged on ``base``; a compound tax is charged on ``base``
    plus every tax line before it.
    """
    lines: list[tuple[str, Decimal]] = []
    running = Decimal(0)
    for rate in rates:
        taxable = base + running if rate.compound else base
        amount = quantize(taxable * rate.rate)
        lines.append((rate.name, amount))
        running += amount
    return lines


def price_with_tax(net: Decimal, rates: Sequence[TaxRate]) -> Decimal:
    """Gross price: ``net`` plus all taxes."""
    return quantize(net + sum((amount for _, amount in compute_taxes(net, rates)), Decimal(0)))


def net_from_gross(gross: Decimal, rate: TaxRate) -> Decimal:
    """Back out a single simple tax from a tax-inclusive price."""
    if rate.compound:
        raise ValueError("net_from_gross supports only a simple tax")
    return quantize(gross / (1 + rate.rate))


def margin(price: Decimal, cost: Decimal) -> Optional[Decimal]:
    """Gross margin as a percentage of price, or None when the price is zero."""
    if price == 0:
        return None
    return quantize((price - cost) / price * HUNDRED)


def markup_price(cost: Decimal, markup_percent: object, round_to: Optional[Decimal] = None) -> Decimal:
    """Selling price for ``cost`` plus a markup, optionally rounded up to ``round_to``.

    Rounding up to a step such as ``Decimal("0.05")`` gives shelf-friendly prices.
    """
    price = cost + percent_of(cost, markup_percent)
    if round_to is not None:
        if round_to <= 0:
            raise ValueError("round_to must be positive")
        steps = (price / round_to).to_integral_value(rounding="ROUND_CEILING")
        price = steps * round_to
    return quantize(price)
