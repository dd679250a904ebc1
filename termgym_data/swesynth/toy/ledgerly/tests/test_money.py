from decimal import Decimal

import pytest

from ledgerly.money import (
    CurrencyMismatch,
    Money,
    minor_exponent,
    parse_amount,
    quantize,
    to_decimal,
    total,
)


def test_amount_is_rounded_half_up_to_cents():
    assert Money("2.675").amount == Decimal("2.68")
    assert Money("2.674").amount == Decimal("2.67")


def test_yen_has_no_minor_unit():
    assert Money("1234.5", "JPY").amount == Decimal("1235")


def test_kwd_keeps_three_places():
    assert Money("1.2345", "KWD").amount == Decimal("1.235")


def test_currency_code_is_uppercased():
    assert Money(1, "eur").currency == "EUR"


def test_unknown_currency_is_refused():
    with pytest.raises(ValueError, match="XYZ"):
        Money(1, "XYZ")


def test_float_is_refused():
    with pytest.raises(TypeError):
        Money(0.1)


def test_bool_is_refused():
    with pytest.raises(TypeError):
        to_decimal(True)


def test_money_is_immutable():
    with pytest.raises(AttributeError):
        Money(1).amount = Decimal(2)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("12.50", "12.50"),
        ("$1,234.50", "1234.50"),
        ("(12.00)", "-12.00"),
        ("-3", "-3"),
        ("€ 7", "7"),
        ("(-4)", "4"),
    ],
)
def test_parse_amount(text, expected):
    assert parse_amount(text) == Decimal(expected)


@pytest.mark.parametrize("text", ["", "   ", "abc", "1.2.3", "NaN", "Infinity"])
def test_parse_amount_rejects_garbage(text):
    with pytest.raises(ValueError):
        parse_amount(text)


def test_minor_exponent():
    assert minor_exponent("USD") == 2
    assert minor_exponent("JPY") == 0


def test_quantize_defaults_to_usd():
    assert quantize(Decimal("1.005")) == Decimal("1.01")


def test_from_minor_and_minor_units_round_trip():
    value = Money.from_minor(12345)
    assert value.amount == Decimal("123.45")
    assert value.minor_units == 12345
    assert Money.from_minor(-7, "KWD").amount == Decimal("-0.007")


def test_addition_and_subtraction():
    assert Money("1.10") + Money("2.25") == Money("3.35")
    assert Money("1.10") - Money("2.25") == Money("-1.15")


def test_adding_other_currency_raises():
    with pytest.raises(CurrencyMismatch):
        Money(1, "USD") + Money(1, "EUR")


def test_adding_plain_number_raises_type_error():
    with pytest.raises(TypeError):
        Money(1) + 1


def test_sum_builtin_starts_from_zero():
    assert sum([Money("1.50"), Money("2.50")]) == Money(4)


def test_multiplication_rounds():
    assert Money("10.00") * "0.333" == Money("3.33")
    assert 3 * Money("1.25") == Money("3.75")


def test_money_times_money_is_an_error():
    with pytest.raises(TypeError):
        Money(2) * Money(3)


def test_division():
    assert Money(10) / 4 == Money("2.50")
    with pytest.raises(ZeroDivisionError):
        Money(10) / 0


def test_negation_and_abs():
    assert -Money("5.00") == Money("-5.00")
    assert abs(Money("-5.00")) == Money("5.00")


def test_ordering():
    assert Money(1) < Money(2)
    assert Money(2) <= Money(2)
    assert Money(3) > Money(2)
    assert Money(2) >= Money(2)
    assert not Money(2) < Money(2)


def test_ordering_across_currencies_raises():
    with pytest.raises(CurrencyMismatch):
        Money(1, "USD") < Money(2, "GBP")


def test_equality_needs_same_currency():
    assert Money(1, "USD") != Money(1, "EUR")
    assert Money(1) != "1"
    assert hash(Money("1.0")) == hash(Money("1.00"))


def test_truthiness_and_sign():
    assert not Money(0)
    assert Money("0.01")
    assert Money("-0.01").is_negative()
    assert not Money(0).is_negative()


def test_allocate_keeps_every_cent():
    shares = Money("100.00").allocate([1, 1, 1])
    assert shares == [Money("33.34"), Money("33.33"), Money("33.33")]
    assert sum(shares) == Money("100.00")


def test_allocate_uneven_ratios():
    assert Money("0.05").allocate([3, 7]) == [Money("0.02"), Money("0.03")]


def test_allocate_negative_amount():
    assert Money("-0.10").allocate([1, 2]) == [Money("-0.04"), Money("-0.06")]


@pytest.mark.parametrize("ratios", [[], [0, 0], [1, -1]])
def test_allocate_rejects_bad_ratios(ratios):
    with pytest.raises(ValueError):
        Money(1).allocate(ratios)


def test_split():
    assert Money("10.00").split(3) == [Money("3.34"), Money("3.33"), Money("3.33")]
    assert Money("10.00").split(1) == [Money("10.00")]
    with pytest.raises(ValueError):
        Money(1).split(0)


@pytest.mark.parametrize(
    "money, kwargs, expected",
    [
        (Money("1234.5"), {}, "$1,234.50"),
        (Money("-3", "EUR"), {}, "-€3.00"),
        (Money("12", "CHF"), {}, "12.00 CHF"),
        (Money("1234567", "JPY"), {}, "¥1,234,567"),
        (Money("1234.5"), {"symbol": False}, "1,234.50 USD"),
        (Money("1234.5"), {"grouping": False}, "$1234.50"),
    ],
)
def test_format(money, kwargs, expected):
    assert money.format(**kwargs) == expected


def test_str_and_repr():
    assert str(Money("5")) == "USD 5.00"
    assert str(Money("5", "KWD")) == "KWD 5.000"
    assert repr(Money("5")) == "Money('5.00', 'USD')"


def test_total_of_empty_is_zero_in_currency():
    assert total([], "EUR") == Money(0, "EUR")
    assert total([Money(1), Money(2)]) == Money(3)


def test_allocate_spreads_leftover_cents_one_each():
    assert Money("0.02").allocate([1, 1, 1]) == [Money("0.01"), Money("0.01"), Money("0")]


def test_division_by_one_is_identity():
    assert Money("10.01") / 1 == Money("10.01")
