"""Bug reports from real pytest output: the facts read from a failure, the writer, the checker.

One small shop project (written below) is broken in five ways at once and its tests are run once with
the real pytest; each failing test exercises one way of failing (a wrong value with parameters, a
crash, a missing error, a value built over several lines, a membership and a truth check). The
bundled ledgerly toy project gives a report on a real project's tests.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import termgym_data
from termgym.factory.swesynth.failures import _test_decorated, read_failure
from termgym.factory.swesynth.patches import make_patch
from termgym.factory.swesynth.report import (
    RULES,
    ReportError,
    check_report,
    render,
    usable_failures,
    write_report,
)
from termgym.factory.swesynth.validate import run_tests
from termgym.tasks.swesynth import pyparse
from termgym.tasks.swesynth.task import INSTRUCTION

PYTEST = "python -m pytest -q -p no:cacheprovider"

CART = '''\
"""A shopping cart."""


class Cart:
    def __init__(self):
        self.items = []

    def add(self, name, qty=1):
        if qty <= 0:
            raise ValueError("quantity must be positive")
        self.items.append((name, qty))

    def count(self):
        return sum(q for _, q in self.items)

    def names(self):
        return sorted({n for n, _ in self.items})


def parse_price(text):
    return round(float(text.strip("$")), 2)


def is_free(price):
    return price == 0


def module_of(path):
    return path.rsplit("/", 1)[-1].removesuffix(".py")


def labels(names):
    return [f"item: {n.upper()}" for n in names]


def days_of(delta):
    return delta.days
'''

#: (pristine, broken) pairs: five bugs, one per way of failing
BUGS = [
    ("if qty <= 0:", "if qty < 0:"),
    ("return sum(q for _, q in self.items)", "return sum(q for _, q in self.items) + 1"),
    ("sorted({n for n, _ in self.items})", "sorted({n for n, _ in self.items[1:]})"),
    ('float(text.strip("$"))', 'float(text.strip("$").replace(".", ","))'),
    ("return price == 0", "return price == 1"),
    ('.removesuffix(".py")', '.removesuffix(".pyc")'),
    ("n.upper()", "n.title()"),
    ("return delta.days", "return delta.days - 1"),
]

#: a second test module in the style of many real suites: the module imported whole, arguments
#: spread from a parameter list, a parameter whose value is a standard-library object
TESTS_BY_MODULE = '''\
import datetime

import pytest

import shop.cart
from shop import cart


def test_count_through_the_class():
    assert cart.Cart.count(cart.Cart()) == 0


def test_count_through_the_package_path():
    assert shop.cart.Cart.count(shop.cart.Cart()) == 0


@pytest.mark.parametrize("args, expected", [(["$2.25"], 2.25)])
def test_price_from_spread_args(args, expected):
    assert cart.parse_price(*args) == expected


@pytest.mark.parametrize("delta", [datetime.timedelta(days=2)])
def test_days_of_a_delta(delta):
    assert cart.days_of(delta) == 2


def test_a_parser_defaulting_to_the_module_s(parser=None):
    if parser is None:
        parser = cart.module_of
    assert parser("a/b.py") == "b"
'''

#: unittest-style tests, as cachetools and many older suites write them: the class under test as a
#: class attribute of a mixin in another module, a helper method that builds it, state made in
#: ``setUp``, ``self.assertX`` checks, ``assertRaises`` as a context manager around a subscript
MIXIN = '''\
class CartMixin:
    Cart = None

    def cart(self, *items):
        return self.Cart()

    def test_count_of_a_fresh_cart(self):
        cart = self.cart()
        self.assertEqual(0, len(cart.items))
        self.assertEqual(cart.count(), 0)
'''

TESTS_UNITTEST = '''\
import unittest

from shop.cart import Cart, is_free, labels, parse_price

from . import CartMixin


class LabelTest(unittest.TestCase):
    LABELS = staticmethod(labels)

    def test_index_of_a_label(self):
        self.assertEqual(self.LABELS(["ab"]).index("item: AB"), 0)


class CartTest(unittest.TestCase, CartMixin):
    Cart = Cart

    def setUp(self):
        self.full = self.Cart()
        self.full.add("apple", 2)

    def test_count_after_set_up(self):
        self.assertEqual(self.full.count(), 2)

    def test_zero_refused(self):
        with self.assertRaises(ValueError):
            self.Cart().add("apple", 0)

    def test_names_in(self):
        cart = self.cart()
        cart.add("fig")
        self.assertIn("fig", cart.names())

    def test_listed_names(self):
        cart = self.cart()
        cart.add("fig")
        cart.add("kiwi")
        self.assertEqual(sorted(cart.names()), ["fig", "kiwi"])

    def test_free(self):
        self.assertTrue(is_free(0))

    def test_zero_refused_call_form(self):
        self.assertRaises(ValueError, self.Cart().add, "pear", 0)

    def test_price_expected_first(self):
        self.assertEqual(1.5, parse_price("$1.50"))

    def test_item_of_a_cart(self):
        self.assertEqual(self.full.names()[0], "apple")

    def test_a_subclass_counts(self):
        import copy

        class Basket(Cart):
            def label(self):
                return "basket"

        self.assertEqual(copy.copy(Basket()).count(), 0)
'''

#: a module importing the project's names with ``*`` (funcy's suite does)
#: pytest classes in the style of arrow's suite: a class fixture of the conftest sets attributes on
#: the class (``request.cls.cart = ...``, one named after the module it is built from), and a
#: ``setup_method`` that runs its base's first
CONFTEST = '''\
import pytest

from shop import cart


@pytest.fixture(scope="class")
def a_cart(request):
    request.cls.cart = cart.Cart()
    request.cls.label = request.cls.__name__[4:]


@pytest.fixture
def fresh(request):
    return cart.Cart()


@pytest.fixture(scope="class")
def named_cart(request):
    request.cls.cart = cart.Cart()
    request.cls.where = request.node.name
'''

TESTS_FIXTURES = '''\
import pytest

from shop.cart import Cart, labels, parse_price
from shop.deco import logged


def test_a_fixture_that_takes_request(fresh):
    assert fresh.count() == 0


def test_a_function_the_project_decorates():
    @logged
    def price():
        return "$1.50"

    assert parse_price(price()) == 1.5


@pytest.mark.usefixtures("a_cart")
class TestFreshCart:
    def test_count(self):
        assert self.cart.count() == 0

    def test_labels(self):
        assert labels([self.label]) == ["item: FRESHCART"]


class Base:
    def setup_method(self):
        self.cart = Cart()


class TestAfterAdding(Base):
    def setup_method(self):
        super().setup_method()
        self.cart.add("pen", 2)

    def test_count(self):
        assert self.cart.count() == 2


@pytest.mark.usefixtures("named_cart")
class TestOfANode:
    def test_count(self):
        assert self.cart.count() == 0
'''

TESTS_STAR = '''\
from shop.cart import *


def test_star_imported_names():
    assert module_of("a/b.py") == "b"
'''

TESTS = '''\
import pytest

from shop import cart as cart_module
from shop.cart import Cart, is_free, labels, module_of, parse_price


@pytest.fixture
def full_cart():
    cart = Cart()
    cart.add("apple", 2)
    return cart


def test_full_cart_count(full_cart):
    assert full_cart.count() == 2


def test_names_after_a_look():
    cart = Cart()
    cart.add("fig")
    before = cart.count()
    price = parse_price("2")
    assert cart.names() == ["fig"]


def test_counts_in_a_loop():
    cart = Cart()
    assert [cart.count() for _ in range(2)] == [0, 0]


@pytest.mark.parametrize("parser", [parse_price])
def test_a_parser_passed_as_a_parameter(parser):
    assert parser("$1.50") == 1.5


def test_labels_are_upper_case():
    assert labels(["alpha", "beta", "gamma", "delta"]) == ["item: ALPHA", "item: BETA", "item: GAMMA", "item: DELTA"]


@pytest.mark.parametrize("text, expected", [("$1.50", 1.5), ("2", 2.0)])
def test_parse_price(text, expected):
    assert parse_price(text) == expected


def test_count_after_adding():
    cart = Cart()
    cart.add("apple", 2)
    cart.add("pear")
    assert cart.count() == 3


def test_zero_quantity_is_refused():
    with pytest.raises(ValueError):
        Cart().add("apple", 0)


def test_names_include_added():
    cart = Cart()
    cart.add("fig")
    assert "fig" in cart.names()


def test_zero_is_free():
    assert cart_module.is_free(0)


FREE = "$0"


def double(x):
    return 2 * x


def test_free_after_doubling():
    assert is_free(double(parse_price(FREE)))


def test_count_through_a_bound_method():
    cart = Cart()
    assert cart.count() >= 0
    cart = Cart()
    counter = cart.count
    assert counter() == 0


def test_module_of_a_path():
    assert module_of("pkg/tool.py") == "tool"


@pytest.mark.parametrize("start", [[1, 2], [3]])
def test_fresh_cart_is_empty(start):
    assert Cart().count() == 0
'''


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    """The shop project with all five bugs, its failing tests' messages and the bug patch."""
    root = tmp_path_factory.mktemp("shop") / "shop-repo"
    (root / "shop").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "shop" / "__init__.py").write_text("")
    (root / "shop" / "deco.py").write_text("def logged(func):\n    return func\n")
    (root / "tests" / "test_cart.py").write_text(TESTS)
    (root / "tests" / "test_by_module.py").write_text(TESTS_BY_MODULE)
    (root / "tests" / "__init__.py").write_text(MIXIN)
    (root / "tests" / "test_star.py").write_text(TESTS_STAR)
    (root / "tests" / "conftest.py").write_text(CONFTEST)
    (root / "tests" / "test_fixtures.py").write_text(TESTS_FIXTURES)
    (root / "tests" / "test_unittest_style.py").write_text(TESTS_UNITTEST)
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    broken = CART
    for old, new in BUGS:
        assert old in broken
        broken = broken.replace(old, new, 1)
    (root / "shop" / "cart.py").write_text(broken)
    run = run_tests(root, PYTEST)
    failed = sorted(t for t, outcome in run.outcomes.items() if outcome == "failed")
    patch = make_patch({"shop/cart.py": CART}, {"shop/cart.py": broken})
    return root, failed, run.messages, patch


def _failure(shop, name):
    root, failed, messages, _ = shop
    test = next(t for t in failed if name in t)
    return read_failure(test, messages[test], root)


def test_every_bug_shows_up_as_a_failing_test(shop):
    _, failed, _, _ = shop
    names = {t.split("::")[1].split("[")[0] for t in failed}
    unittest_style = {t.split("::")[-1] for t in failed if "::CartTest::" in t}
    assert unittest_style == {"test_count_of_a_fresh_cart", "test_count_after_set_up", "test_zero_refused",
                              "test_names_in", "test_free", "test_price_expected_first", "test_item_of_a_cart",
                              "test_a_subclass_counts", "test_listed_names", "test_zero_refused_call_form"}
    assert names == {"test_parse_price", "test_count_after_adding", "test_zero_quantity_is_refused",
                     "test_names_include_added", "test_zero_is_free", "test_fresh_cart_is_empty",
                     "test_module_of_a_path", "test_free_after_doubling", "test_count_through_a_bound_method",
                     "test_full_cart_count", "test_labels_are_upper_case", "test_counts_in_a_loop",
                     "test_names_after_a_look", "test_price_from_spread_args", "test_days_of_a_delta",
                     "CartTest", "LabelTest", "test_star_imported_names", "test_count_through_the_class",
                     "test_count_through_the_package_path", "TestFreshCart", "TestAfterAdding", "TestOfANode",
                     "test_a_fixture_that_takes_request", "test_a_function_the_project_decorates",
                     "test_a_parser_passed_as_a_parameter", "test_a_parser_defaulting_to_the_module_s"}


def test_a_crash_with_its_parameters_filled_in(shop):
    f = _failure(shop, "test_parse_price[$1.50")
    assert f.call == "parse_price('$1.50')" and f.behaviour == "parse_price()"
    assert f.error == ("ValueError", "could not convert string to float: '1,50'")
    assert f.expected == "1.5" and f.usable


def test_a_function_passed_as_a_parameter_is_called_by_its_name(shop, monkeypatch):
    """``parser = <function parse_price at 0x..>`` atop the frame: a test parametrized over the
    project's functions calls the one the test module imports, so the repro calls it by that name.
    Sabotage: without reading such reprs the call keeps the parameter and has no repro."""
    from termgym.factory.swesynth import failures

    f = _failure(shop, "test_a_parser_passed_as_a_parameter")
    assert f.call == "parse_price('$1.50')" and f.self_contained and f.usable
    assert f.error == ("ValueError", "could not convert string to float: '1,50'")
    assert failures._named_repr("<class 'shop.cart.Cart'>") == "Cart"
    assert failures._named_repr("<function Cart.add at 0x7f00>") is None  # a method: no name to import
    # a parameter defaulting to the module's function: the module the test imports exports it
    f = _failure(shop, "test_a_parser_defaulting_to_the_module_s")
    assert f.call == "module_of('a/b.py')" and f.self_contained and f.usable, f
    monkeypatch.setattr(failures, "_named_repr", lambda text: None)
    f = _failure(shop, "test_a_parser_passed_as_a_parameter")
    assert f.call == "parser('$1.50')" and not f.self_contained


def test_spread_arguments_of_a_module_level_import_are_a_self_contained_call(shop):
    """``cart.parse_price(*args)`` with ``args = ['$2.25']`` is what a user types as
    ``parse_price('$2.25')``: the module prefix goes, the literal list is spread."""
    f = _failure(shop, "test_price_from_spread_args")
    assert f.call == "parse_price('$2.25')" and f.self_contained and f.usable
    assert f.error == ("ValueError", "could not convert string to float: '2,25'")


def test_only_the_module_prefix_of_a_dotted_call_goes(shop):
    """``cart.Cart.count(...)`` is ``Cart.count(...)`` to a user, not a function ``count`` of the
    project; ``shop.cart.Cart`` loses the package and its submodule alike."""
    root, _, messages, _ = shop
    for name in ("test_count_through_the_class", "test_count_through_the_package_path"):
        f = _failure(shop, name)
        assert f.call == "Cart.count(Cart())" and f.self_contained and f.usable, (name, f)
        assert (f.observed, f.expected) == ("1", "0")
        assert usable_failures([f.test], messages, root)[0].imports == ["from shop.cart import Cart"]


def test_a_class_fixture_of_the_conftest_is_the_repro_setup(shop):
    """``@pytest.mark.usefixtures("a_cart")`` with ``request.cls.cart = cart.Cart()`` in the conftest:
    ``self.cart`` is the cart that fixture builds (not the module ``cart`` its name shadows), and
    ``request.cls.__name__`` the test class's name."""
    root, _, messages, _ = shop
    f = _failure(shop, "TestFreshCart::test_count")
    assert (f.call, f.setup, f.observed, f.expected) == ("Cart().count()", [], "1", "0") and f.self_contained
    assert usable_failures([f.test], messages, root)[0].imports == ["from shop.cart import Cart"]
    f = _failure(shop, "TestFreshCart::test_labels")
    assert f.call == "labels(['FreshCart'])" and f.self_contained and f.usable


def test_a_fixture_that_takes_request_but_does_not_use_it_is_built(shop):
    f = _failure(shop, "test_a_fixture_that_takes_request")
    assert (f.call, f.observed, f.expected) == ("Cart().count()", "1", "0") and f.self_contained


def test_a_function_the_project_decorates_goes_into_the_repro(shop):
    """``@logged def price(): ...`` in the test is pasted as it is (a user of a decorator library,
    click's ``@command()``, writes one); a function a test framework decorates is not."""
    root, _, messages, _ = shop
    f = _failure(shop, "test_a_function_the_project_decorates")
    assert f.call == "parse_price(price())" and f.self_contained and f.usable
    assert f.setup == ["@logged\ndef price():\n    return '$1.50'"]
    assert usable_failures([f.test], messages, root)[0].imports == ["from shop.cart import parse_price",
                                                                    "from shop.deco import logged"]
    patched = pyparse.parse("@mock.patch('shop.cart.Cart')\ndef price(m):\n    return '$1.50'").body[0]
    assert _test_decorated(patched) and not _test_decorated(pyparse.parse(f.setup[0]).body[0])


def test_a_setup_method_runs_its_base_first(shop):
    f = _failure(shop, "TestAfterAdding::test_count")
    assert (f.call, f.setup) == ("cart.count()", ["cart = Cart()", "cart.add('pen', 2)"]) and f.self_contained
    assert (f.observed, f.expected) == ("3", "2")


def test_a_class_fixture_that_reads_the_test_node_gives_no_repro(shop):
    """``request.node`` is pytest's, nothing a user's code has: the fixture is left out and the
    failure, which reads ``self.cart``, has no self-contained repro."""
    root, _, messages, _ = shop
    f = _failure(shop, "TestOfANode::test_count")
    assert f.call == "self.cart.count()" and not f.self_contained
    assert usable_failures([f.test], messages, root) == []


def test_a_standard_library_value_is_quoted_by_its_repr(shop):
    f = _failure(shop, "test_days_of_a_delta")
    assert f.call == "days_of(datetime.timedelta(days=2))" and f.self_contained
    assert (f.observed, f.expected) == ("1", "2")


def test_the_package_a_test_imports_from_may_be_named(shop):
    root, failed, messages, patch = shop
    test = next(t for t in failed if "test_days_of_a_delta" in t)
    report = ("Hi! `shop.cart.days_of()` seems off by one.\n\n```python\n>>> from shop import cart\n"
              ">>> cart.days_of(datetime.timedelta(days=2))\n1\n```\n\nI expected `2`.")
    assert not [p for p in check_report(report, target_tests=[test], patch=patch, repo=root) if "leak" in p]


def test_names_a_star_import_brings_are_importable(shop):
    root, failed, messages, _ = shop
    f = _failure(shop, "test_star_imported_names")
    assert f.call == "module_of('a/b.py')" and f.self_contained and f.usable
    assert usable_failures([f.test], messages, root)[0].imports == ["from shop.cart import module_of"]


def test_a_value_built_over_several_lines_keeps_its_setup(shop):
    f = _failure(shop, "test_count_after_adding")
    assert f.setup == ["cart = Cart()", "cart.add('apple', 2)", "cart.add('pear')"]
    assert f.call == "cart.count()" and f.behaviour == "Cart.count()"
    assert (f.observed, f.expected, f.relation) == ("4", "3", "==") and f.self_contained


def test_a_missing_error(shop):
    f = _failure(shop, "test_zero_quantity_is_refused")
    assert f.call == "Cart().add('apple', 0)" and f.behaviour == "Cart.add()"
    assert f.relation == "raises" and f.expected_error == "ValueError" and f.observed is None and f.usable


def test_membership_and_truth_checks(shop):
    f = _failure(shop, "test_names_include_added")
    assert f.setup == ["cart = Cart()", "cart.add('fig')"] and f.call == "cart.names()"
    assert (f.relation, f.observed, f.expected) == ("in", "[]", "'fig'")
    g = _failure(shop, "test_zero_is_free")  # the module prefix is dropped: a user calls the function
    assert (g.call, g.behaviour, g.relation, g.observed) == ("is_free(0)", "is_free()", "truthy", "False")


def test_passed_checks_and_overwritten_variables_leave_the_repro(shop):
    f = _failure(shop, "test_count_through_a_bound_method")
    assert f.setup == [] and f.call == "Cart().count()" and f.behaviour == "Cart.count()"
    assert (f.observed, f.expected) == ("1", "0")


def test_a_fixture_is_built_in_the_repro(shop):
    f = _failure(shop, "test_full_cart_count")
    assert f.setup == ["full_cart = Cart()", "full_cart.add('apple', 2)"] and f.call == "full_cart.count()"
    assert (f.behaviour, f.observed, f.expected) == ("Cart.count()", "3", "2") and f.self_contained


def test_unread_results_leave_the_repro_unless_they_touch_its_objects(shop):
    f = _failure(shop, "test_names_after_a_look")  # cart.count() might change the cart: it stays
    assert f.setup == ["cart = Cart()", "cart.add('fig')", "before = cart.count()"]
    assert (f.call, f.observed, f.expected) == ("cart.names()", "[]", "['fig']")


def test_an_object_used_in_a_loop_is_not_folded_into_it(shop):
    f = _failure(shop, "test_counts_in_a_loop")  # folding would build a new cart on every round
    assert f.setup == ["cart = Cart()"] and f.call == "[cart.count() for _ in range(2)]"
    assert (f.behaviour, f.observed, f.expected) == ("Cart.count()", "[1, 1]", "[0, 0]")


def test_values_pytest_cut_short_give_the_first_difference(shop):
    root, failed, messages, _ = shop
    test = next(t for t in failed if "test_labels_are_upper_case" in t)
    assert "..." in messages[test].splitlines()[0]  # pytest shortened both lists
    f = read_failure(test, messages[test], root)
    assert f.call == "labels(['alpha', 'beta', 'gamma', 'delta'])[0]"
    assert (f.observed, f.expected) == ("'item: Alpha'", "'item: ALPHA'")


def test_a_helper_of_the_test_module_goes_into_the_repro(shop):
    f = _failure(shop, "test_free_after_doubling")  # and the constant's value into the call
    assert f.setup == ["def double(x):\n    return 2 * x"] and f.call == "is_free(double(parse_price('$0')))"
    assert f.behaviour == "is_free()" and f.observed == "False" and f.self_contained
    text = render(f, structure="session", opening=0, closing=0, style=0)
    assert ">>> def double(x):\n...     return 2 * x\n...\n>>> is_free(double(parse_price('$0')))\nFalse" in text


def test_every_way_of_failing_gets_a_report_that_passes_the_checker(shop):
    root, failed, messages, patch = shop
    pytest_style = [t for t in failed if "CartTest" not in t and "LabelTest" not in t and "star" not in t
                    and "test_fixtures" not in t]
    failures = usable_failures(pytest_style, messages, root)
    # two parametrized cases of one test collapse into one (same call, same outcome), and so do the
    # two tests that reach ``Cart.count`` through the module and through the package, and so does
    # ``parse_price`` passed as a parameter (its call is the parametrized test's)
    assert len(failures) == 15
    failures += usable_failures([t for t in failed if "CartTest" in t], messages, root)
    assert len(failures) == 15 + 10
    failures = [f for f in failures if ".py" not in f.call]  # see the next-but-two test
    for structure in ("paragraph", "sections", "session", "list"):
        for f in failures:
            text = render(f, structure=structure, opening=1, closing=2, style=3)
            assert check_report(text, target_tests=failed, patch=patch, repo=root) == [], (structure, text)
            assert f.behaviour in text and f.call in text


def test_the_wording_varies_with_the_seed_and_is_reproducible(shop):
    root, failed, messages, patch = shop
    reports = [write_report(failed, messages, patch, repo=root, seed=seed) for seed in range(12)]
    assert reports == [write_report(failed, messages, patch, repo=root, seed=seed) for seed in range(12)]
    assert len({r.splitlines()[0] for r in reports}) >= 4  # openings
    assert len({("```" in r, "- Actual:" in r, "**" in r, ">>>" in r) for r in reports}) >= 3  # structures
    for r in reports:
        assert check_report(r, target_tests=failed, patch=patch, repo=root) == []
        assert "test_" not in r and "$1.50-1.5" not in r and "start0" not in r and "tests/" not in r


# -- unittest-style failures ----------------------------------------------------------------------------


def test_unittest_assert_equal_reads_setup_state_and_the_values(shop):
    """``self.full`` made in ``setUp`` through the class attribute ``self.Cart``: the repro builds it."""
    f = _failure(shop, "CartTest::test_count_after_set_up")
    assert f.setup == ["full = Cart()", "full.add('apple', 2)"] and f.call == "full.count()"
    assert (f.behaviour, f.relation, f.observed, f.expected) == ("Cart.count()", "==", "3", "2")
    assert f.self_contained and f.usable


def test_unittest_set_up_the_test_does_not_use_leaves_the_repro(shop):
    f = _failure(shop, "CartTest::test_free")
    assert f.setup == [] and f.call == "is_free(0)"
    assert (f.relation, f.observed) == ("truthy", "False") and f.usable


def test_unittest_expected_first_and_a_crash(shop):
    f = _failure(shop, "CartTest::test_price_expected_first")
    assert f.call == "parse_price('$1.50')" and f.expected == "1.5" and f.error[0] == "ValueError"


def test_unittest_assert_raises_as_a_context_manager(shop):
    f = _failure(shop, "CartTest::test_zero_refused")
    assert f.call == "Cart().add('apple', 0)" and f.behaviour == "Cart.add()"
    assert (f.relation, f.expected_error) == ("raises", "ValueError") and f.usable


def test_unittest_assert_raises_called_with_the_function_and_its_arguments(shop):
    f = _failure(shop, "CartTest::test_zero_refused_call_form")
    assert f.call == "Cart().add('pear', 0)" and f.behaviour == "Cart.add()"
    assert (f.relation, f.expected_error) == ("raises", "ValueError") and f.usable


def test_unittest_assert_in_through_a_helper_method(shop):
    """``self.cart()`` (a helper method returning ``self.Cart()``) is written ``Cart()``."""
    f = _failure(shop, "CartTest::test_names_in")
    assert f.setup == ["cart = Cart()", "cart.add('fig')"] and f.call == "cart.names()"
    assert (f.behaviour, f.relation, f.observed, f.expected) == ("Cart.names()", "in", "[]", "'fig'")


def test_a_mixin_test_in_another_module_is_read_there(shop):
    """junit files a mixin's test under the mixin's module: the class is found in its sibling."""
    f = _failure(shop, "CartTest::test_count_of_a_fresh_cart")
    assert f.test.startswith("tests/__init__.py::")
    assert f.setup == [] and f.call == "Cart().count()" and f.behaviour == "Cart.count()"
    assert (f.observed, f.expected) == ("1", "0") and f.self_contained


def test_a_small_subclass_and_a_standard_library_import_go_into_the_repro(shop):
    """The test's own subclass is pasted (its project base is the API named); ``copy.copy`` is the
    standard library, not the behaviour."""
    f = _failure(shop, "CartTest::test_a_subclass_counts")
    assert f.setup[0] == "import copy" and f.setup[1].startswith("class Basket(Cart):")
    assert f.call == "copy.copy(Basket()).count()" and f.behaviour == "Cart.count()"
    assert (f.observed, f.expected) == ("1", "0") and f.self_contained and f.usable


def test_a_static_method_attribute_is_the_function_and_a_method_of_its_result_names_it(shop):
    """``LABELS = staticmethod(labels)``: ``self.LABELS(...)`` is ``labels(...)``; ``.index`` of what
    ``labels`` returned names ``labels()``, not ``index()``."""
    root, failed, messages, _ = shop
    test = next(t for t in failed if "LabelTest" in t)
    f = read_failure(test, messages[test], root)
    assert f.call == "labels(['ab']).index('item: AB')" and f.behaviour == "labels()"
    assert f.error == ("ValueError", "'item: AB' is not in list") and f.expected == "0" and f.usable


def test_unittest_reports_pass_the_checker(shop):
    root, failed, messages, patch = shop
    only = [t for t in failed if "CartTest" in t or "LabelTest" in t]
    for seed in range(6):
        report = write_report(only, messages, patch, repo=root, seed=seed)
        assert "self" not in report and "assert" not in report and "CartTest" not in report
        assert check_report(report, target_tests=only, patch=patch, repo=root) == []


def test_no_usable_failure_means_no_report(shop):
    root, failed, messages, patch = shop
    with pytest.raises(ReportError, match="no failing test shows a concrete call"):
        write_report(failed, {t: "boom" for t in failed}, patch, repo=root)
    with pytest.raises(ValueError, match="at least one failing test"):
        write_report([], messages, patch, repo=root)


def test_a_report_told_to_avoid_used_openings_opens_with_another_failing_test(shop):
    """What ``termgym swesynth reports --new-openings`` relies on: the calls other tasks already
    open with are avoided, the report then opens with another failing test's example, and with every
    opening used up there is no report."""
    from termgym.tasks.swesynth.repro import first_call

    root, failed, messages, patch = shop
    pytest_style = [t for t in failed if "CartTest" not in t and "LabelTest" not in t]
    first = first_call(write_report(pytest_style, messages, patch, repo=root, seed=0))
    assert first is not None
    avoid = {first}
    for _ in range(4):  # each opening used up in turn: a new one each time, never an avoided one
        report = write_report(pytest_style, messages, patch, repo=root, seed=0, avoid=avoid)
        opening = first_call(report)
        assert opening not in avoid, (opening, avoid)
        assert check_report(report, target_tests=pytest_style, patch=patch, repo=root) == []
        avoid.add(opening)
    everything = {first_call("```python\n" + "\n".join([*f.imports, *f.setup, f.call]) + "\n```")
                  for f in usable_failures(pytest_style, messages, root)}
    with pytest.raises(ReportError, match="every failing test's example opens with a call other tasks already"):
        write_report(pytest_style, messages, patch, repo=root, seed=0, avoid=everything)


def test_a_failure_no_report_can_describe_cleanly_is_dropped(shop):
    root, failed, messages, patch = shop
    # the only failing call names a Python file: every wording "names a Python file", so no report
    only = [t for t in failed if "test_module_of_a_path" in t]
    with pytest.raises(ReportError, match="no report passed the checker: leak: names a Python file"):
        write_report(only, messages, patch, repo=root, seed=0)
    # with the other failures at hand the writer reports one of those instead
    assert ".py" not in write_report(failed, messages, patch, repo=root, seed=0)


def test_report_on_the_ledgerly_toy_project(tmp_path):
    toy = Path(termgym_data.__file__).parent / "swesynth" / "toy" / "ledgerly"
    root = tmp_path / "ledgerly"
    shutil.copytree(toy, root)
    source = root / "ledgerly" / "accounts.py"
    pristine = source.read_text()
    old = 'return "debit" if self.type in DEBIT_NORMAL else "credit"'
    assert old in pristine
    broken = pristine.replace(old, old.replace('"credit"', '"Credit"'))
    source.write_text(broken)
    run = run_tests(root, PYTEST + " tests/test_accounts.py")
    failed = sorted(t for t, outcome in run.outcomes.items() if outcome == "failed")
    assert any("[2000-credit]" in t for t in failed)
    patch = make_patch({"ledgerly/accounts.py": pristine}, {"ledgerly/accounts.py": broken})
    report = write_report(failed, run.messages, patch, repo=root, seed=3)
    assert "`Account.normal_side`" in report and "'Credit'" in report and "'credit'" in report
    assert "Account('2000', 'x').normal_side" in report or "Account('3000', 'x').normal_side" in report
    assert "2000-credit" not in report and "DEBIT_NORMAL" not in report
    assert check_report(report, target_tests=failed, patch=patch, repo=root) == []


# -- the checker, rule by rule ------------------------------------------------------------------------

GOOD = ("`slugify()` returns the wrong result for some inputs.\n\nWhen I call `slugify('Hello World')`, "
        "I get `'hello_world'`. I expected `'hello-world'`.\n")
TARGETS = ["tests/test_slug.py::test_slugify[Hello World-hello-world]",
           "tests/test_slug.py::TestSlug::test_words[start0-1-expected0]"]
PATCH = make_patch({"textkit/slug.py": "def slugify(text):\n    sep = '-'\n    return text.lower().replace(' ', sep)\n"},
                   {"textkit/slug.py": "def slugify(text):\n    sep = '_'\n    return text.lower().replace(' ', sep)\n"})


def _rules(text: str, **kw) -> set[str]:
    kw.setdefault("target_tests", TARGETS)
    return {p.split(":")[0] for p in check_report(text, **kw)}


def test_a_good_report_passes():
    assert check_report(GOOD, target_tests=TARGETS, patch=PATCH, visible={"slugify"}) == []


@pytest.mark.parametrize("text, rule", [
    ("<pr_description>\n" + GOOD + "</pr_description>\n", "wrapper-tag"),
    ("`f(1)` gives `2`.", "length"),
    (GOOD + "\nSee tests/test_slug.py::test_slugify for more.\n", "test-id"),
    (GOOD + "\ntest_slugify fails too.\n", "test-id"),
    (GOOD + "\nIt breaks with `start0-1-expected0`.\n", "param-id"),
    (GOOD + "\nThe case Hello World-hello-world is wrong.\n", "param-id"),
    (GOOD + "\nThe same in tests/test_extra.py.\n", "test-path"),
    (GOOD + "\nRunning the test suite shows 3 failing tests.\n", "boilerplate"),
    (GOOD + "\nE       AssertionError: assert 'a' == 'b'\n", "traceback"),
    (GOOD + "\nTraceback (most recent call last):\n  File \"x\", line 3, in f\n", "traceback"),
    (GOOD.replace("I expected `'hello-world'`.", "I expected `'hello-world'.") + "\n", "garbled"),
    (GOOD.replace("`slugify('Hello World')`", "`slugify('Hello World)`"), "garbled"),
    (GOOD.replace("`'hello_world'`", "`['hello', 'wor...`"), "garbled"),
    (GOOD.replace("`'hello_world'`", "`<Slug object at 0x7f00aa>`"), "garbled"),
    (GOOD.replace("I expected `'hello-world'`.", "I expected `'hello-world'` and"), "garbled"),
    (GOOD.replace("I expected", "\u201cI expected"), "garbled"),
    ("Something is wrong with the slugs I make from titles: the separators are not what they should be. "
     "I get `'hello_world'`, I expected `'hello-world'`.\n", "no-behaviour"),
    ("`slugify` returns the wrong separator. I get `'hello_world'`, I expected `'hello-world'`.\n", "no-input"),
    ("`slugify()` misbehaves.\n\nWhen I call `slugify('Hello World')` the result does not match what the "
     "documentation describes. I expected `'hello-world'`.\n", "no-observed"),
    ("`slugify()` misbehaves.\n\nWhen I call `slugify('Hello World')`, I get `'hello_world'`, which looks "
     "odd to me.\n", "no-expected"),
    (GOOD.replace("I get", "the sep is wrong: I get"), "leak"),
    (GOOD + "\nSee slug.py, around line 3.\n", "leak"),
])
def test_each_rule_refuses_its_kind_of_bad_report(text, rule):
    assert rule in RULES
    assert rule in _rules(text, patch=PATCH, visible={"slugify"}), check_report(
        text, target_tests=TARGETS, patch=PATCH, visible={"slugify"})


def test_a_quoted_exception_message_is_program_output_not_boilerplate_or_a_line_number():
    """``unsupported operand type(s)`` in a quoted message is what the program printed; the same
    ``(s)`` in the reporter's own words is still refused."""
    quoted = GOOD + "\nWith a number it raises `TypeError` with the message \u201cunsupported operand type(s) for +\u201d.\n"
    assert "boilerplate" not in _rules(quoted, patch=PATCH, visible={"slugify"})
    assert "boilerplate" in _rules(GOOD + "\nThe separator(s) are wrong.\n", patch=PATCH, visible={"slugify"})
    parser = GOOD + "\nFor `''` it raises `ValueError` with the message \u201cExpecting value: line 1 column 1\u201d.\n"
    assert _rules(parser, patch=PATCH, visible={"slugify"}) == set()  # a line of the input, not of the source
    assert "leak" in _rules(GOOD + "\nIt goes wrong at line 1.\n", patch=PATCH, visible={"slugify"})


def test_checker_problems_name_their_rule():
    problems = check_report(GOOD + "\nIt breaks with `start0-1-expected0`.\n", target_tests=TARGETS)
    assert problems == ["param-id: shows the pytest parameter id 'start0-1-expected0'"]


def test_the_instruction_wraps_the_report_in_exactly_one_tag():
    text = INSTRUCTION.format(workdir="/app", test_command="pytest", problem_statement=GOOD.strip())
    assert text.count("<pr_description>") == 1 and text.count("</pr_description>") == 1
    assert text.index("<pr_description>") < text.index(GOOD.strip()) < text.index("</pr_description>")


def test_mini_swe_agent_prompt_keeps_one_wrapper_around_the_report():
    from termgym.protocols.minisweagent import MiniSweAgentProtocol
    from termgym.tasks.base import CommandTask

    swe = CommandTask("t", INSTRUCTION.format(workdir="/app", test_command="pytest", problem_statement=GOOD.strip()),
                      grade_command="true")
    prompt = MiniSweAgentProtocol().task_prompt(swe)
    assert prompt.count("<pr_description>") == 1 and prompt.count("</pr_description>") == 1
    assert prompt.index("<pr_description>") < prompt.index(GOOD.strip()) < prompt.index("</pr_description>")
    assert "Consider the following task:" in prompt and "<instructions>" in prompt
    plain = MiniSweAgentProtocol().task_prompt(CommandTask("u", "Count the files.", grade_command="true"))
    assert plain.count("<pr_description>") == 1 and plain.index("<pr_description>") < plain.index("Count the files.")


def test_a_helper_class_is_typed_at_the_interpreter_without_blank_lines():
    from termgym.factory.swesynth.failures import Failure

    f = Failure(test="t", call="[bucket.take() for _ in range(2)]", behaviour="Bucket.take()", relation="==",
                observed="[False, False]", expected="[True, False]",
                setup=["class Clock:\n\n    def __call__(self):\n        return 0.0", "bucket = Bucket(clock=Clock())"])
    text = render(f, structure="session", opening=0, closing=0, style=0)
    assert (">>> class Clock:\n...     def __call__(self):\n...         return 0.0\n...\n"
            ">>> bucket = Bucket(clock=Clock())\n>>> [bucket.take() for _ in range(2)]\n[False, False]") in text
    assert check_report(text, target_tests=["tests/test_b.py::test_take"]) == []


def test_protocol_use_of_a_project_object_names_its_method():
    """``len(cache)``, ``cache[1]``, ``sorted(cache)``, ``1 in cache`` on an LRUCache the repro built."""
    import ast

    from termgym.factory.swesynth.failures import _behaviour

    types = {"cache": "LRUCache"}
    for code, want in [("len(cache)", "LRUCache.__len__()"), ("cache[1]", "LRUCache.__getitem__()"),
                       ("sorted(cache)", "LRUCache.__iter__()"), ("1 in cache", "LRUCache.__contains__()"),
                       ("len([1, 2])", None)]:
        assert _behaviour(ast.parse(code, mode="eval").body, types) == want, code


def test_a_method_of_a_literal_is_never_the_behaviour_its_arguments_are():
    """``''.join(r.fixed[0] for r in findall(...))`` is about ``findall`` (a parse history task's
    report said "`join()` crashes", which the audit's public-API check refused)."""
    import ast

    from termgym.factory.swesynth.failures import _behaviour

    for code, want in [("''.join(r.fixed[0] for r in findall('>{}<', s))", "findall()"),
                       ("', '.join(map(str, chunked(xs, 2)))", "chunked()"), ("[].extend(f(x))", "f()"),
                       ("{'a': 1}.get(parse(x))", "parse()"), ("'abc'.upper()", None)]:
        assert _behaviour(ast.parse(code, mode="eval").body, {}) == want, code


def test_a_class_s_own_method_is_named_with_its_class():
    """``Frame.explain(data)`` is about ``Frame.explain()``, not a bare ``explain()`` the project does
    not have (the audit's public-API check refused a hyperframe report that said "`explain()`"); an
    earlier report that left the class out is worded again with it; a constant's method is not a
    class's."""
    import ast

    from termgym.factory.swesynth.failures import _behaviour
    from termgym.factory.swesynth.report_rewrite import _from_code

    for code, want in [("Frame.explain(memoryview(b'x'))", "Frame.explain()"),
                       ("URIReference.from_string('http://a')", "URIReference.from_string()"),
                       ("DEFAULTS.copy()", "copy()"), ("frame.explain(x)", "explain()")]:
        assert _behaviour(ast.parse(code, mode="eval").body, {}) == want, code
    reworded = _from_code("from hyperframe.frame import Frame\nFrame.explain(memoryview(b'x'))\n", "explain()")
    assert reworded.behaviour == "Frame.explain()"
    assert _from_code("from semver import parse\nparse('1.2.3')\n", "parse()").behaviour == "parse()"  # as it was


def test_a_second_bugs_symptom_is_its_own_call_and_never_the_main_example_again(shop):
    """A multi-bug report names each bug's symptom: another bug whose tests also show the main
    example's call gets a call of its own where it has one, and a symptom identical to the main
    example is not said twice."""
    root, failed, messages, patch = shop
    price = [t for t in failed if "test_parse_price[" in t]
    free = [t for t in failed if t.endswith("::test_zero_is_free")]
    assert price and free
    leads = ("There is a second problem", "Something else also looks wrong")
    same = write_report(price, messages, patch, repo=root, seed=3, groups=[price, list(price)])
    assert not any(lead in same for lead in leads), same  # one symptom: said once
    both = write_report(price + free, messages, patch, repo=root, seed=3, groups=[price, price[:1] + free])
    main = read_failure(free[0], messages[free[0]], root)
    tail = next(both.split(lead, 1)[1] for lead in leads if lead in both)
    assert main.call in tail, both  # the second bug's own call, not the first test of its group


def test_a_method_chained_to_a_project_call_is_named_with_that_call(tmp_path):
    """``parse('foo').update_or_create({}, 42)`` is about ``parse(...).update_or_create()``: a report
    that said "`parse()` fails with `TypeError`" sent the agent to a function that does not fail (a
    jsonpath-ng task whose bug is in ``update_or_create``). A built-in type's method on the result
    (``labels(xs).index(...)``) keeps naming the call, unless the bug changes a method of that name
    (``parse(path).find(data)`` with the bug in ``Child.find``); the public-API check reads the
    chained name; an earlier report that named only the first call is worded again with the chain."""
    from termgym.factory.swesynth.failures import chained_behaviour
    from termgym.factory.swesynth.quality import named_api
    from termgym.factory.swesynth.report import changed_names
    from termgym.factory.swesynth.report_rewrite import _behaviour as named_in
    from termgym.factory.swesynth.report_rewrite import _from_code

    for call, named, methods, want in [
            ("parse('foo').update_or_create({}, 42)", "parse()", (), "parse(...).update_or_create()"),
            ("Version.parse('1.3.2').next_version('patch')", "Version.parse()", (), "Version.parse(...).next_version()"),
            ("array().add_line('x')", "array()", (), "array().add_line()"),
            ("labels(['ab']).index('item: AB')", "labels()", (), None),
            ("parse('a.b').find({})", "parse()", (), None),
            ("parse('a.b').find({})", "parse()", {"find"}, "parse(...).find()"),
            ("list(parse(x)).count(1)", "parse()", (), None),
            ("parse('a')._private()", "parse()", (), None),
            ("parse('a')", "parse()", (), None)]:
        assert chained_behaviour(call, named, methods) == want, call
    text = "`parse(...).update_or_create()` fails with `TypeError` for me.\n\nMore."
    assert named_api(text) == "parse(...).update_or_create"
    assert named_in(text) == "parse(...).update_or_create()"
    reworded = _from_code("from jsonpath_ng import parse\nparse('foo').update_or_create({}, 42)\n", "parse()")
    assert reworded.behaviour == "parse(...).update_or_create()"
    assert _from_code("from jsonpath_ng import parse\nparse('a').find({})\n", "parse()", {"find"}).behaviour == \
        "parse(...).find()"
    assert _from_code("from jsonpath_ng import parse\nparse('foo')\n", "parse()").behaviour == "parse()"
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("class Child:\n    def find(self, data):\n        return [data]\n")
    patch = ("diff --git a/pkg/m.py b/pkg/m.py\n--- a/pkg/m.py\n+++ b/pkg/m.py\n@@ -2,2 +2,2 @@ class Child:\n"
             "     def find(self, data):\n-        return [data]\n+        return []\n")
    assert changed_names(patch, tmp_path) == {"find"} and changed_names(patch, None) == set()

    from termgym.factory.swesynth.report_check import check_report

    report = ("`parse(...).update_or_create()` fails with `TypeError` for me.\n\nReproduction:\n\n```python\n"
              "from jsonpath_ng import parse\nparse('foo').update_or_create({}, 42)\n```\n\n"
              "I get a `TypeError`. I expected `{'foo': 42}`.\n")
    assert check_report(report, target_tests=["tests/test_create.py::test_update_or_create"]) == []
    cut = report.replace("`{'foo': 42}`", "`{'foo': ...}`")
    assert any("cut short" in p for p in check_report(cut, target_tests=["tests/test_create.py::test_x"]))
    for address in ("<pkg.m.Child object at 0x7f296f17e480>", "<function Cache.__delitem__ at 0x7f296f17e480>"):
        quoted = report.replace("`{'foo': 42}`", f"`{address}`")  # another address each run: no value
        assert "garbled: a memory address instead of a value" in check_report(
            quoted, target_tests=["tests/test_create.py::test_x"]), address


# -- tests whose failure text does not state the facts: the example's runs do --------------------------

GARDEN = '''\
"""Beds of plants."""


def total(counts):
    return sum(counts)


def tallest(heights):
    return sorted(heights, reverse=True)[:2]


def save(target, text):
    target.write_text(text.upper())
    return len(text)
'''

GARDEN_BUGS = [("return sum(counts)", "return sum(counts[1:])"), ("reverse=True)[:2]", "reverse=True)[:1]"),
               ("text.upper()", "text.lower()")]

GARDEN_HELPER = '''\
def eq_(one, other):
    assert one == other, f"{one} != {other}"
'''

GARDEN_TESTS = '''\
from garden.beds import save, tallest, total

from .helper import eq_


def test_total_of_a_bed():
    eq_(total([4, 1, 2]), 7)


def test_two_tallest():
    heights = [3, 9, 4]
    expected = [9, 4]
    assert tallest(heights) == expected


def test_total_through_a_helper():
    def twice(counts):
        return 2 * total(counts)

    assert twice([4, 1, 2]) == 14


def test_saved_in_capitals(tmp_path):
    save(tmp_path / "note.txt", "rose")
    assert (tmp_path / "note.txt").read_text() == "ROSE"
'''


def _local_runner(clean: Path, buggy: Path):
    """Run an example as the sandbox's runner does, here on the host (the writer's ``run``)."""
    import subprocess
    import sys

    from termgym.factory.swesynth.quality import _RUNNER, _outcome

    def one(root: Path, code: str):
        (root / "_runner.py").write_text(_RUNNER)
        (root / "_repro.py").write_text(code)
        done = subprocess.run([sys.executable, "-B", "_runner.py", "_repro.py"], cwd=root, capture_output=True,
                              text=True, timeout=60, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
        return _outcome(done.stdout + done.stderr)

    return lambda code: (one(clean, code), one(buggy, code))


@pytest.fixture(scope="module")
def garden(tmp_path_factory):
    """The garden project, clean and with its three bugs; the failing tests and their messages."""
    trees = {}
    for name, source in (("clean", GARDEN), ("buggy", GARDEN)):
        root = tmp_path_factory.mktemp(name) / "garden-repo"
        (root / "garden").mkdir(parents=True)
        (root / "tests").mkdir()
        (root / "garden" / "__init__.py").write_text("")
        (root / "tests" / "__init__.py").write_text("")
        (root / "tests" / "helper.py").write_text(GARDEN_HELPER)
        (root / "tests" / "test_beds.py").write_text(GARDEN_TESTS)
        (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
        if name == "buggy":
            for old, new in GARDEN_BUGS:
                assert old in source
                source = source.replace(old, new, 1)
        (root / "garden" / "beds.py").write_text(source)
        trees[name] = root
    run = run_tests(trees["buggy"], PYTEST)
    failed = sorted(t for t, outcome in run.outcomes.items() if outcome == "failed")
    assert len(failed) == 4, run.outcomes
    patch = make_patch({"garden/beds.py": GARDEN}, {"garden/beds.py": (trees["buggy"] / "garden/beds.py").read_text()})
    return trees, failed, run.messages, patch


def test_a_suite_s_equality_helper_reads_as_an_assert(garden):
    trees, failed, messages, _ = garden
    test = next(t for t in failed if "test_total_of" in t)
    f = read_failure(test, messages[test], trees["buggy"])
    assert (f.call, f.behaviour, f.relation) == ("total([4, 1, 2])", "total()", "==")
    assert f.self_contained and "eq_" not in " ".join(f.setup)


def test_a_helper_the_test_defines_is_not_the_behaviour_the_call_it_makes_is(garden):
    trees, failed, messages, _ = garden
    test = next(t for t in failed if "through_a_helper" in t)
    f = read_failure(test, messages[test], trees["buggy"])
    assert (f.call, f.behaviour, f.observed, f.expected) == ("twice([4, 1, 2])", "total()", "6", "14")
    assert f.setup[0].startswith("def twice(counts):")


def test_pytest_s_tmp_path_is_a_folder_the_repro_makes(garden):
    trees, failed, messages, _ = garden
    test = next(t for t in failed if "test_saved" in t)
    f = read_failure(test, messages[test], trees["buggy"])
    assert "tmp_path = pathlib.Path(tempfile.mkdtemp())" in f.setup and f.self_contained


def test_failures_whose_text_states_no_facts_are_worded_from_their_runs(garden):
    """The helper's own message (``6 != 7``, no values pytest wrote) gives no report from the text
    alone; with the examples run on both trees it gives one whose example runs and shows its
    difference, the expected value taken from the clean run. The tmp_path test and the one whose
    expected value is a variable of the test are worded as they run too."""
    from termgym.factory.swesynth.audit import run_examples
    from termgym.factory.swesynth.examples import examples, undefined_names

    trees, failed, messages, patch = garden
    helper = [t for t in failed if "test_total_of" in t]
    assert usable_failures(helper, messages, trees["buggy"]) == []  # the text alone: nothing
    with pytest.raises(ReportError, match="no failing test shows a concrete call"):
        write_report(helper, messages, patch, repo=trees["buggy"], seed=0)
    by_runs = usable_failures(helper, messages, trees["buggy"], runs=True)
    assert [f.call for f in by_runs] == ["total([4, 1, 2])"] and by_runs[0].expected is None
    # a value pytest printed is quoted: the variable the test built it in leaves the example
    tallest = usable_failures([t for t in failed if "two_tallest" in t], messages, trees["buggy"])
    assert [(f.call, f.expected, f.setup) for f in tallest] == [("tallest([3, 9, 4])", "[9, 4]", [])]
    run = _local_runner(trees["clean"], trees["buggy"])
    for test, value in (("test_total_of", "`7`"), ("test_two_tallest", "`[9, 4]`"), ("test_saved", "`'ROSE'`")):
        only = [t for t in failed if test in t]
        report = write_report(only, messages, patch, repo=trees["buggy"], seed=0, run=run)
        assert value in report, report
        assert run_examples(report, run) == "" and not any(undefined_names(e) for e in examples(report)), report
        assert check_report(report, target_tests=only, patch=patch, repo=trees["buggy"]) == [], report


def test_an_earlier_report_that_named_its_example_s_own_helper_names_the_call_the_helper_makes():
    """``termgym swesynth reports`` words a report again from its own examples and keeps the API it
    named, unless that is a function the example itself defines (croniter-38750a7dd6 said
    ``efst()``): then the project call the helper makes is named."""
    from termgym.factory.swesynth.report_rewrite import _from_code

    code = "from garden.beds import total\ndef twice(counts):\n    return 2 * total(counts)\n\ntwice([4, 1, 2])"
    assert _from_code(code, "twice()").behaviour == "total()"
    assert _from_code(code, "total()").behaviour == "total()"
    assert _from_code("from garden.beds import total\ntotal([1])", "total()").behaviour == "total()"
