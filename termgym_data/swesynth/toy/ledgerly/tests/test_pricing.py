from decimal import Decimal

import pytest

from ledgerly.pricing import (
    TaxRate,
    apply_discount,
    compute_taxes,
    coupon_discount,
    margin,
    markup_price,
    net_from_gross,
    percent_of,
    price_with_tax,
    tiered_discount,
)

COUPONS = {
    "SAVE10": {"percent": 10},
    "FIVER": {"fixed": "5.00", "minimum": "20"},
    "BIG": {"fixed": "500"},
}


def test_percent_of_rounds_to_cents():
    assert percent_of(Decimal("19.99"), 15) == Decimal("3.00")
    assert percent_of(Decimal("10"), "12.5") == Decimal("1.25")


@pytest.mark.parametrize("percent, expected", [(0, "80.00"), (25, "60.00"), (100, "0.00"), ("12.5", "70.00")])
def test_apply_discount(percent, expected):
    assert apply_discount(Decimal("80"), percent) == Decimal(expected)


@pytest.mark.parametrize("percent", [-1, 101])
def test_apply_discount_range(percent):
    with pytest.raises(ValueError, match="between 0 and 100"):
        apply_discount(Decimal("80"), percent)


TIERS = [(50, 10), (10, 5), (100, 15)]


@pytest.mark.parametrize("quantity, expected", [(1, 0), (9, 0), (10, 5), (49, 5), (50, 10), (100, 15), (500, 15)])
def test_tiered_discount(quantity, expected):
    assert tiered_discount(quantity, TIERS) == Decimal(expected)


def test_tiered_discount_rejects_negative_minimum():
    with pytest.raises(ValueError):
        tiered_discount(5, [(-1, 5)])


def test_coupon_percent_is_case_insensitive():
    assert coupon_discount(Decimal("45.00"), " save10 ", COUPONS) == Decimal("4.50")


def test_coupon_minimum():
    assert coupon_discount(Decimal("19.99"), "FIVER", COUPONS) == Decimal("0.00")
    assert coupon_discount(Decimal("20.00"), "FIVER", COUPONS) == Decimal("5.00")


def test_fixed_coupon_capped_at_subtotal():
    assert coupon_discount(Decimal("42.10"), "BIG", COUPONS) == Decimal("42.10")


def test_unknown_coupon():
    with pytest.raises(KeyError, match="NOPE"):
        coupon_discount(Decimal("1"), "NOPE", COUPONS)


@pytest.mark.parametrize("rate", ["-0.01", "1", "1.5"])
def test_tax_rate_range(rate):
    with pytest.raises(ValueError):
        TaxRate("X", rate)


def test_simple_taxes_on_base():
    rates = [TaxRate("GST", "0.05"), TaxRate("PST", "0.07")]
    assert compute_taxes(Decimal("100.00"), rates) == [("GST", Decimal("5.00")), ("PST", Decimal("7.00"))]


def test_compound_tax_on_base_plus_earlier_taxes():
    rates = [TaxRate("GST", "0.05"), TaxRate("QST", "0.1", compound=True)]
    assert compute_taxes(Decimal("100.00"), rates) == [("GST", Decimal("5.00")), ("QST", Decimal("10.50"))]


def test_price_with_tax():
    assert price_with_tax(Decimal("9.99"), [TaxRate("VAT", "0.2")]) == Decimal("11.99")
    assert price_with_tax(Decimal("9.99"), []) == Decimal("9.99")


def test_net_from_gross():
    assert net_from_gross(Decimal("12.00"), TaxRate("VAT", "0.2")) == Decimal("10.00")
    with pytest.raises(ValueError):
        net_from_gross(Decimal("12.00"), TaxRate("C", "0.1", compound=True))


def test_margin():
    assert margin(Decimal("50"), Decimal("30")) == Decimal("40.00")
    assert margin(Decimal("0"), Decimal("3")) is None
    assert margin(Decimal("10"), Decimal("12")) == Decimal("-20.00")


def test_markup_price_and_rounding():
    assert markup_price(Decimal("4.00"), 30) == Decimal("5.20")
    assert markup_price(Decimal("4.01"), 30, round_to=Decimal("0.25")) == Decimal("5.25")
    assert markup_price(Decimal("4.00"), 25, round_to=Decimal("0.25")) == Decimal("5.00")
    with pytest.raises(ValueError):
        markup_price(Decimal("1"), 10, round_to=Decimal("0"))


def test_tier_with_zero_minimum_applies_to_everything():
    assert tiered_discount(0, [(0, 2), (10, 5)]) == Decimal(2)
