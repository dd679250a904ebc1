"""The static import and call graph the cross-module and coordinated operators walk."""

from __future__ import annotations

from termgym.factory.swesynth.bugs.callgraph import ModuleMap, RepoIndex, module_name, module_stem
from tests.swesynth_bugs.shop import SOURCES, TESTS


def test_module_names_and_stems():
    assert module_name("src/pkg/sub/__init__.py") == "src.pkg.sub"
    assert module_stem("pkg/_utils.py") == "utils" and module_stem("pkg/__init__.py") == "pkg"


def test_calls_resolve_through_imports_self_and_unique_methods():
    files = {
        **SOURCES,
        "shop/checkout.py": (
            "from . import util\n"
            "from .basket import Basket\n\n\n"
            "def checkout(lines, cache):\n"
            "    basket = Basket('x')\n"
            "    for line in lines:\n"
            "        basket.add(*util.split_pair(line, '='))\n"
            "    cache.get('k')\n"
            "    return basket.total()\n"
        ),
    }
    repo = RepoIndex(files, TESTS)
    callers = {(d.path, d.qualname): sorted({(c.path, c.caller) for c in calls}) for d, calls in repo.calls.items()}
    assert callers[("shop/util.py", "split_pair")] == [("shop/cart.py", "line_total"), ("shop/checkout.py", "checkout"),
                                                       ("shop/report.py", "header")]
    # `basket.total()`: one class defines `total`; `basket.add()` could be set.add, so it stays unknown.
    assert callers[("shop/basket.py", "Basket.total")] == [("shop/checkout.py", "checkout")]
    assert callers[("shop/basket.py", "Basket.add")] == []
    helpers = {d.qualname: users for d, users in repo.cross_module_helpers()}
    assert helpers["discount"] == ["shop/cart.py", "shop/report.py"] and "Basket.names" not in helpers
    assert repo.named_in_tests("parse_price") and not repo.named_in_tests("split_pair")


def test_imports_follow_package_reexports_and_src_layouts():
    modules = ModuleMap(["src/shop/__init__.py", "src/shop/util.py", "src/shop/cart.py"],
                        {"src/shop/__init__.py": "from .util import parse_price\n"}.__getitem__)
    assert modules.imports_of("tests/test_x.py", "from shop import parse_price\nimport shop.cart\n") == \
        {"src/shop/util.py", "src/shop/cart.py"}
    assert modules.resolve_module("util", "src/shop/cart.py", level=1) == "src/shop/util.py"
    assert modules.resolve_module("json") is None
    unparsable = RepoIndex({"a.py": "def f(:\n", "b.py": "x = 1\n"})
    assert unparsable.unparsable == ["a.py"] and list(unparsable.modules) == ["b.py"]
