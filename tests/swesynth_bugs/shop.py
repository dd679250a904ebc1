"""A small multi-module project written for these tests: helpers in one module, callers in two."""

from __future__ import annotations

import sys
from pathlib import Path

UTIL = '''\
"""Helpers shared by the shop modules."""

TAX_PERCENT = 20


def split_pair(text, sep):
    left, right = text.split(sep, 1)
    return left.strip(), right.strip()


def discount(price, off):
    return price - off


def parse_price(text, currency="EUR"):
    value = float(text.strip().lower().replace(currency.lower(), ""))
    return round(value, 2)


def count_words(text):
    return len(text.split())


def summary(items):
    return {"total": sum(items), "count": len(items)}


def cheapest(prices, limit=3):
    ranked = sorted(p for p in prices if p > 0)
    return [round(p, 2) for p in ranked[:limit]]
'''

CART = '''\
from .util import TAX_PERCENT, count_words, discount, parse_price, split_pair, summary


def line_total(line):
    name, price = split_pair(line, "=")
    return name, parse_price(price)


def with_tax(amount):
    return amount + amount * TAX_PERCENT / 100


def net_after(amount, coupon):
    return discount(amount, coupon)


def describe(lines):
    words = count_words(" ".join(lines))
    totals = summary([parse_price(line.split("=")[1]) for line in lines])
    return f"{words} words, {totals['count']} items, {totals['total']:.2f}"
'''

REPORT = '''\
from .util import TAX_PERCENT, discount, split_pair, summary


def gross(amount):
    return round(amount * (100 + TAX_PERCENT) / 100, 2)


def sale(price, off):
    return discount(price, off)


def header(line):
    key, value = split_pair(line, ":")
    return key.upper() + "=" + value


def stats(values):
    info = summary(values)
    return {"mean": info["total"] / info["count"], "max": max(values), "min": min(values)}
'''

BASKET = '''\
class Basket:
    def __init__(self, owner):
        self.owner = owner
        self.items = []

    def add(self, name, price):
        self.items.append((name, price))
        return self

    def total(self):
        return sum(price for _, price in self.items)

    def names(self):
        return [name for name, _ in self.items]
'''

TESTS = {
    "tests/test_basket.py": '''\
from shop.basket import Basket


def test_basket():
    basket = Basket("ann").add("tea", 2).add("jam", 3)
    assert basket.total() == 5 and basket.names() == ["tea", "jam"]
''',
    "tests/test_util.py": '''\
from shop import parse_price
from shop.util import cheapest, count_words


def test_count_words():
    assert count_words("a b  c") == 3


def test_parse_price():
    assert parse_price(" 3.5 eur ") == 3.5


def test_cheapest():
    assert cheapest([5, -1, 2.346, 9, 1]) == [1, 2.35, 5]
''',
    "tests/test_cart.py": '''\
from shop.cart import describe, line_total, net_after, with_tax


def test_line_total():
    assert line_total("tea = 2.50 EUR") == ("tea", 2.5)


def test_with_tax():
    assert with_tax(100) == 120


def test_net_after():
    assert net_after(10, 3) == 7


def test_describe():
    assert describe(["a=1", "b=2"]) == "2 words, 2 items, 3.00"
''',
    "tests/test_report.py": '''\
from shop.report import gross, header, sale, stats


def test_gross():
    assert gross(10) == 12.0


def test_sale():
    assert sale(10, 4) == 6


def test_header():
    assert header("a : b") == "A=b"


def test_stats():
    assert stats([1, 2, 3]) == {"mean": 2, "max": 3, "min": 1}
''',
}

SOURCES = {"shop/__init__.py": "from .util import parse_price\n", "shop/util.py": UTIL, "shop/cart.py": CART,
           "shop/report.py": REPORT, "shop/basket.py": BASKET}
TEST_COMMAND = f"{sys.executable} -m pytest -q -p no:cacheprovider"


def write_project(root: Path, sources: dict[str, str] | None = None) -> Path:
    for rel, text in {**SOURCES, **(sources or {}), **TESTS, "pytest.ini": "[pytest]\npythonpath = .\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root
