"""``termgym swesynth history``: tasks from a project's own release history.

The fast tests pin the function-level mining on written source pairs (a newer and an older release
of the same module): which functions become candidates, what is skipped and why, what a revert
puts back, which functions are offered together, and the kind a task is given from its failing
tests. The slow test adds a PyPI project nobody bundled (pathspec 1.1.0), mines its release
1.0.4, and plays a resulting task through ``gym.make``: the oracle scores 1, doing nothing 0.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from termgym.factory.swesynth.failures import Failure
from termgym.factory.swesynth.history import (
    HISTORY_TYPE,
    HistoryError,
    Release,
    ReleaseHistory,
    ReleaseTests,
    _sort_versions,
    call_groups,
    classify_kind,
    counterpart,
    defined_names,
    earlier_releases,
    fetch_release,
    fetch_releases,
    function_reverts,
    how_test_changed,
    module_functions,
)
from termgym.factory.swesynth.inject import apply_mutations, units
from termgym.factory.swesynth.report import check_report, render

NEW = '''\
"""Slugs."""

import re

SEPARATOR = "-"


def _clean(text):
    return re.sub(r"[^a-z0-9]+", " ", text.lower())


def slugify(text, separator=SEPARATOR, max_length=None):
    """Make a slug of ``text``: lower case words joined by ``separator``."""
    words = _clean(text).split()
    slug = separator.join(words)
    if max_length is not None:
        slug = slug[:max_length].rstrip(separator)
    return slug


def unchanged(x):
    return x + 1


def only_docs(x):
    """New words."""
    return x * 2


def uses_helper(text):
    return _clean(text).strip()


class Counter:
    def __init__(self):
        self.count = 0

    def add(self, n=1):
        self.count += n
        return self.count

    @property
    def value(self):
        return self.count

    @value.setter
    def value(self, v):
        self.count = v
'''

OLD = '''\
"""Slugs."""

import re

SEPARATOR = "-"


def _clean(text, pattern=r"[^a-z]+"):
    return re.sub(pattern, " ", text.lower())


def slugify(text, separator=SEPARATOR):
    """Make a slug."""
    words = _clean(text, r"[^a-z]+").split()
    return separator.join(words)


def unchanged(x):
    return x + 1


def only_docs(x):
    """Old words."""
    return x * 2


def uses_helper(text):
    return _strip_all(text)


class Counter:
    def __init__(self):
        self.count = 0

    def add(self, n=1):
        self._bump(n)
        return self.count

    def _bump(self, n):
        self.count += n

    @property
    def value(self):
        return self.count + 0

    @value.setter
    def value(self, v):
        self.count = int(v)
'''


def _reverts(skipped=None):
    return {r.qualname: r for r in function_reverts("slugs.py", NEW, OLD, "1.0", skipped)}


def test_functions_whose_code_changed_become_reverts_and_the_rest_are_left_or_counted():
    skipped: Counter = Counter()
    reverts = _reverts(skipped)
    # _clean and slugify changed code; unchanged and only_docs (docstring only) did not; uses_helper
    # reads a name the newer module does not have; Counter.add calls a method the newer class lost,
    # which comes back beside it; the property's getter and setter share a name, so neither is offered
    assert sorted(reverts) == ["Counter.add", "_clean", "slugify"]
    assert skipped == Counter({"reads names the newer code no longer has": 1})
    assert all(r.old_version == "1.0" and r.path == "slugs.py" for r in reverts.values())


def test_a_method_the_newer_class_dropped_comes_back_beside_the_method_that_calls_it():
    r = _reverts()["Counter.add"]
    (m,) = r.mutations()  # in the class, so no second edit
    mutated = apply_mutations(NEW, [m])
    methods = module_functions(mutated)
    assert "Counter._bump" in methods and methods["Counter._bump"].line < methods["Counter.add"].line
    namespace: dict = {}
    exec(compile(mutated, "slugs.py", "exec"), namespace)
    c = namespace["Counter"]()
    assert (c.add(2), c.add()) == (2, 3)
    # the sabotage: the method's older text alone calls a method its class no longer has
    alone = apply_mutations(NEW, [dataclasses.replace(m, replacement=m.replacement[m.replacement.index("    def add"):])])
    namespace = {}
    exec(compile(alone, "slugs.py", "exec"), namespace)
    with pytest.raises(AttributeError, match="_bump"):
        namespace["Counter"]().add(1)


def test_a_revert_puts_the_older_code_back_under_the_newer_docstring():
    r = _reverts()["slugify"]
    mutated = apply_mutations(NEW, r.mutations())
    func = module_functions(mutated)["slugify"]
    assert "max_length" not in ast.unparse(func.node.args)  # the older signature is back
    assert ast.get_docstring(func.node) == "Make a slug of ``text``: lower case words joined by ``separator``."
    assert "return separator.join(words)" in func.text
    # everything else is the newer release's
    assert module_functions(mutated)["_clean"].text == module_functions(NEW)["_clean"].text
    (m,) = r.mutations()
    assert (m.bug_type, m.function, m.description) == (HISTORY_TYPE, "slugify", "slugify as released in 1.0")


def test_a_constant_the_newer_release_dropped_comes_back_with_its_function():
    new = "import re\n\n\ndef host(h):\n    return h.strip('.')\n"
    old = "import re\n\nCHARSET = 'utf-8'\n\n\ndef host(h, charset=CHARSET):\n    return h.strip()\n"
    (r,) = function_reverts("h.py", new, old, "3.0")
    assert apply_mutations(new, r.mutations()) == \
        "import re\n\n\nCHARSET = 'utf-8'\n\n\ndef host(h, charset=CHARSET):\n    return h.strip()\n"
    # a computed value is more than a revert: skipped
    skipped: Counter = Counter()
    assert function_reverts("h.py", new, old.replace("'utf-8'", "re.escape('x')"), "3.0", skipped) == []
    assert skipped == Counter({"reads names the newer code no longer has": 1})


def test_a_helper_and_an_import_the_newer_release_dropped_come_back_with_their_function():
    new = "import re\n\n\ndef host(h):\n    return h.strip('.').lower()\n"
    old = ("import re\nfrom os.path import basename as base\n\n\n@staticmethod\ndef _tidy(h):\n    return _cut(h)\n\n\n"
           "def _cut(h):\n    return base(re.sub('x', '', h))\n\n\ndef host(h):\n    return _tidy(h)\n")
    (r,) = function_reverts("h.py", new, old, "3.0")
    mutated = apply_mutations(new, r.mutations())
    # the helper and the helper it calls, in the older module's order, and the import that one needs
    # where the module's imports are: the module as the older release wrote it
    assert mutated == old
    ast.parse(mutated)
    # a function right after the imports takes its import in front of it: one edit, no insertion at
    # the place it replaces (two edits there would overlap)
    tight_new, tight_old = "import re\ndef host(h):\n    return h\n", "import re\nimport os\ndef host(h):\n    return os.sep + h\n"
    (tight,) = function_reverts("h.py", tight_new, tight_old, "3.0")
    assert not tight.inserts and ast.parse(apply_mutations(tight_new, tight.mutations()))
    assert "import os" in apply_mutations(tight_new, tight.mutations())
    # a class, or more definitions than MAX_PUT_BACK, is more than a revert: skipped
    skipped: Counter = Counter()
    as_class = old.replace("@staticmethod\ndef _tidy(h):\n    return _cut(h)", "class _tidy:\n    pass")
    assert function_reverts("h.py", new, as_class, "3.0", skipped) == []
    more = old.replace("return _cut(h)\n", "return _cut(h) + _a + _b\n") + "_a = 'a'\n_b = 'b'\n"
    assert function_reverts("h.py", new, more, "3.0", skipped) == []
    assert skipped == Counter({"reads names the newer code no longer has": 2})


def test_a_method_s_dropped_module_names_come_back_before_its_class_as_one_candidate():
    new = ("import os\n\n\n@decorate\nclass Outer:\n    class Inner:\n        def size(self, v):\n"
           "            return len(v)\n\n        def other(self):\n            return 0\n")
    old = ("import os\nimport textwrap\n\nLIMIT = 10\n\n\n@decorate\nclass Outer:\n    class Inner:\n"
           "        def size(self, v):\n            textwrap.dedent('x')\n            return min(len(v), LIMIT)\n\n"
           "        def other(self):\n            return LIMIT\n")
    reverts = {r.qualname: r for r in function_reverts("o.py", new, old, "0.5")}
    r = reverts["Outer.Inner.size"]
    imports, prelude, body = r.mutations()
    assert imports.start == imports.end == len("import os\n") and imports.replacement == "import textwrap\n"
    assert prelude.start == prelude.end == new.index("@decorate") and prelude.replacement == "LIMIT = 10\n\n\n"
    assert imports.group == prelude.group == body.group == r.own_group
    assert {m.function for m in (imports, prelude, body)} == {"Outer.Inner.size"}
    mutated = apply_mutations(new, r.mutations())
    # at module level: the import with the module's imports, the constant before the decorated
    # top-level class (where the method's body looks them up)
    assert mutated.startswith("import os\nimport textwrap\n\n\nLIMIT = 10\n\n\n@decorate\nclass Outer:")
    assert "return min(len(v), LIMIT)" in mutated
    namespace = {"decorate": lambda cls: cls}
    exec(compile(mutated, "o.py", "exec"), namespace)  # the names resolve where the method runs
    assert namespace["Outer"].Inner().size([1] * 20) == 10
    assert len(units(r.mutations())) == 1  # drawn, applied and judged together
    # two methods of the class putting names back at one place are never one group (they would overlap)
    both = [dataclasses.replace(x, signature_changed=True) for x in reverts.values()]
    assert call_groups(both) == []
    # the sabotage: the method's edit alone, without the names put back, fails where it runs
    namespace = {"decorate": lambda cls: cls}
    exec(compile(apply_mutations(new, [body]), "o.py", "exec"), namespace)
    with pytest.raises(NameError):
        namespace["Outer"].Inner().size([1])
    # a method that reads an attribute (not a method) its newer class lost is still skipped, said why
    skipped: Counter = Counter()
    kept = function_reverts("c.py", "class C:\n    def __init__(self):\n        pass\n\n    def f(self):\n"
                            "        return 1\n", "class C:\n    def __init__(self):\n        self._g = 2\n\n"
                            "    def f(self):\n        return self._g\n", "0.1", skipped)
    assert [r.qualname for r in kept] == ["C.__init__"]
    assert skipped == Counter({"reads attributes its newer class no longer has": 1})


def test_an_import_put_back_is_checked_against_the_project_module_it_names():
    new = "from .utils import a\n\n\ndef f(x):\n    return a(x)\n"
    old = ("from .utils import a, gone_helper, kept_helper\nfrom . import sub\nfrom pkg.tools import t\n\n\n"
           "def f(x):\n    return gone_helper(a(x))\n\n\ndef g(x):\n    return kept_helper(sub.s(t(x)))\n")
    new = new + "\n\ndef g(x):\n    return x\n"
    modules = {"src/pkg/mod.py": new, "src/pkg/utils.py": "def a(x):\n    return x\n\n\ndef kept_helper(x):\n"
               "    return x\n", "src/pkg/sub.py": "def s(x):\n    return x\n",
               "src/pkg/tools/__init__.py": "def t(x):\n    return x\n"}
    skipped: Counter = Counter()
    reverts = function_reverts("src/pkg/mod.py", new, old, "1.0", skipped, modules=modules)
    # f's older body needs utils.gone_helper, which the newer utils no longer defines: it would fail
    # at collection, so it is skipped and said why; g's imports all resolve (a helper utils still
    # has, a submodule, the project's own package by its absolute name)
    assert [r.qualname for r in reverts] == ["g"]
    assert skipped == Counter({"puts back an import of a name the newer project no longer has": 1})
    ((_, _, imports),) = reverts[0].inserts  # with the module's imports, not before the function
    assert imports == "from .utils import kept_helper\nfrom . import sub\nfrom pkg.tools import t\n"
    # without the newer tree's modules nothing is checked (an import of another package is never)
    assert sorted(r.qualname for r in function_reverts("src/pkg/mod.py", new, old, "1.0")) == ["f", "g"]
    absolute = old.replace("from .utils import a, gone_helper", "from pkg.utils import a, gone_helper")
    assert [r.qualname for r in function_reverts("src/pkg/mod.py", new.replace("from .utils", "from pkg.utils"),
                                                 absolute, "1.0", modules=modules)] == ["g"]
    # a module of the project the newer release removed (jinja2's ``_compat``), relative or absolute
    for gone in ("from ._compat import text_type", "from pkg._compat import text_type"):
        older = old.replace("from . import sub", f"from . import sub\n{gone}").replace("sub.s(t(x))",
                                                                                      "sub.s(text_type(x))")
        skipped = Counter()
        assert [r.qualname for r in function_reverts("src/pkg/mod.py", new, older, "1.0", skipped,
                                                     modules=modules)] == []
        assert skipped["puts back an import of a name the newer project no longer has"] == 2, gone


def test_a_method_is_put_back_at_its_class_indentation():
    new = "class A:\n\tdef f(self):\n\t\treturn 1\n"
    old = "class A:\n    def f(self):\n        return 2\n"
    (r,) = function_reverts("a.py", new, old, "0.9")
    mutated = apply_mutations(new, r.mutations())  # parses, or it raises
    assert mutated.startswith("class A:\n\tdef f(self):\n\t") and "return 2" in mutated


def test_a_helper_whose_signature_changed_goes_back_with_its_callers():
    reverts = _reverts()
    # slugify's older body calls _clean with the parameter 1.0's _clean had: they go back together
    assert reverts["_clean"].signature_changed and reverts["slugify"].signature_changed
    (group,) = call_groups(list(reverts.values()))
    assert sorted(r.qualname for r in group) == ["_clean", "slugify"]
    elsewhere = function_reverts("other.py", "def tidy(t):\n    return t\n", "def tidy(t):\n    return _clean(t)\n",
                                 "1.0")
    assert elsewhere == []  # _clean is not bound in other.py: skipped
    caller = function_reverts("other.py", "from slugs import _clean\n\n\ndef tidy(t):\n    return t\n",
                              "from slugs import _clean\n\n\ndef tidy(t):\n    return _clean(t)\n", "1.0")
    groups = call_groups([*reverts.values(), *caller])  # a caller in another file joins the function it calls
    assert sorted(sorted(r.qualname for r in g) for g in groups) == [
        ["_clean", "slugify"], ["_clean", "slugify", "tidy"], ["_clean", "tidy"]]  # _clean with both callers
    # a helper whose signature stayed links nothing: each function alone is the candidate
    same = function_reverts("h.py", "def h(x):\n    return x\n\n\ndef f(x):\n    return h(x) + 1\n",
                            "def h(x):\n    return -x\n\n\ndef f(x):\n    return h(x) + 2\n", "1.0")
    assert len(same) == 2 and call_groups(same) == []
    source = ReleaseHistory(Path("."), "2.0", [], groups=True)
    mutations = source._remember(*group[0].mutations("g"), "1.0"), source._remember(*group[1].mutations("g"), "1.0")
    assert len(units(list(mutations))) == 1  # drawn, applied and judged together


def _tests(text: str) -> ReleaseTests:
    return ReleaseTests({"tests/test_slugs.py": text})


NEW_TESTS = '''\
from slugs import slugify


def test_plain():
    assert slugify("A b") == "a-b"


def test_digits():
    assert slugify("A 1") == "a-1"


def test_cut():
    assert slugify("abc def", max_length=5) == "abc"


class TestSep:
    def test_sep(self):
        assert slugify("a b", "_") == "a_b"
        assert slugify("a b", ".") == "a.b"
'''

OLD_TESTS = '''\
from slugs import slugify


def test_plain():
    assert slugify("A b") == "a-b"


def test_digits():
    assert slugify("A 1") == "a"


class TestSep:
    def test_sep(self):
        assert slugify("a b", "_") == "a_b"
'''


def test_how_each_failing_test_was_in_the_older_release():
    new, old = _tests(NEW_TESTS), _tests(OLD_TESTS)
    assert how_test_changed("tests/test_slugs.py::test_plain", new, old) == "same"
    assert how_test_changed("tests/test_slugs.py::test_digits", new, old) == "changed"
    assert how_test_changed("tests/test_slugs.py::test_cut", new, old) == "new"
    assert how_test_changed("tests/test_slugs.py::TestSep::test_sep", new, old) == "extended"
    assert how_test_changed("tests/test_slugs.py::test_gone", new, old) == "unknown"
    # a renamed test file: the older test is found by class and name elsewhere
    moved = ReleaseTests({"tests/test_old_name.py": OLD_TESTS})
    assert how_test_changed("tests/test_slugs.py::test_digits", new, moved) == "changed"


@pytest.mark.parametrize(("failing", "kind"), [
    (["tests/test_slugs.py::test_cut"], "feature"),  # uses max_length, which 1.0 did not define
    (["tests/test_slugs.py::test_digits"], "behaviour-change"),  # 1.0's test expected "a"
    (["tests/test_slugs.py::TestSep::test_sep"], "fix"),  # a case added to an existing test
    (["tests/test_slugs.py::test_plain", "tests/test_slugs.py::test_cut"], "fix"),  # not every test is new API
])
def test_the_kind_is_decided_by_the_failing_tests(failing, kind):
    names_new = defined_names({"slugs.py": NEW})
    names_old = defined_names({"slugs.py": OLD})
    assert "max_length" in names_new - names_old
    got = classify_kind(failing, _tests(NEW_TESTS), _tests(OLD_TESTS), names_new, names_old)
    assert got.kind == kind, got.reason
    if kind == "feature":
        assert "max_length" in got.reason


def test_release_history_proposes_once_per_change_and_says_where_a_task_came_from(tmp_path):
    new_tree, r1, r0 = tmp_path / "new", tmp_path / "1.0", tmp_path / "0.9"
    for tree, src, tests in ((new_tree, NEW, NEW_TESTS), (r1, OLD, OLD_TESTS), (r0, OLD, OLD_TESTS)):
        (tree / "tests").mkdir(parents=True)
        (tree / "slugs.py").write_text(src)
        (tree / "tests" / "test_slugs.py").write_text(tests)
    source = ReleaseHistory(new_tree, "2.0", [Release("1.0", r1), Release("0.9", r0)], groups=False)
    mutations = source.propose({"slugs.py": NEW})
    # 0.9 has the same functions as 1.0: its reverts are 1.0's, proposed once
    assert sorted(m.function for m in mutations) == ["Counter.add", "_clean", "slugify"]
    assert source.stats.duplicates == 3 and source.stats.reverts == 3
    assert source.propose({"slugs.py": NEW}) == mutations  # asked again (generate does): the same list
    # mining again for partial reverts only: no whole revert, but the hunks of every change that
    # spans several, each alone (slugify's body without its signature: the older signature alone
    # would leave the body reading ``max_length``, which it no longer has), none of a one-hunk change
    parts = ReleaseHistory(new_tree, "2.0", [Release("1.0", r1)], groups=False, parts_only=True).propose(
        {"slugs.py": NEW})
    assert parts and all("in part as released in 1.0" in m.description for m in parts)
    assert {m.function for m in parts} == {"slugify"} and len(parts) == 1
    assert "max_length=None" in parts[0].replacement and "return separator.join(words)" in parts[0].replacement
    assert all(m.replacement not in {w.replacement for w in mutations} for m in parts)
    slug = next(m for m in mutations if m.function == "slugify")
    origin = source.origin([slug], ["tests/test_slugs.py::test_cut"])
    assert origin["source"] == "history" and (origin["from_version"], origin["to_version"]) == ("1.0", "2.0")
    assert origin["kind"] == "feature" and origin["functions"] == ["slugs.py:slugify"]
    # a revert with its put-back names is two edits of one function: named once (aniso8601's parse_interval)
    assert source.origin([slug, slug], ["tests/test_slugs.py::test_cut"])["functions"] == ["slugs.py:slugify"]


NEW_PARSE = '''\
def _normalise(text):
    return text.lower()


def parse(text):
    value = _normalise(text)
    number = value.strip()
    if not number:
        raise ValueError("empty")
    return len(number)
'''

OLD_PARSE = '''\
class _Normaliser:
    def run(self, text):
        return text.lower()


def parse(text):
    value = _Normaliser().run(text)
    number = value.strip()
    if number is None:
        raise ValueError("empty")
    return len(number)
'''


def test_a_fix_beside_a_rename_goes_back_alone_when_the_whole_function_cannot(tmp_path, monkeypatch):
    """A release replaced a helper class by a function and fixed a check in the same function: the
    older text reads the class, which the newer module no longer has (a class is not put back), so
    it cannot go back whole; the hunk
    with the fix goes back alone (the newer text with that hunk put back), the hunk with the rename
    does not. The task says it is part of the change (``origin.part``). Sabotage: with no parts
    allowed the function gives no candidate, as before."""
    from termgym.factory.swesynth import history

    skipped: Counter = Counter()
    [revert] = function_reverts("parse.py", NEW_PARSE, OLD_PARSE, "1.0", skipped)
    assert revert.qualname == "parse" and revert.part
    assert "if number is None:" in revert.replacement and "_normalise(text)" in revert.replacement
    assert skipped == Counter({"reads names the newer code no longer has": 1,
                               "offered in part instead (one hunk each)": 1})
    [mutation] = revert.mutations()
    assert "in part as released in 1.0" in mutation.description
    scope: dict = {}
    exec(apply_mutations(NEW_PARSE, [mutation]), scope)
    assert scope["parse"]("  ") == 0  # the bug: blank text is no longer refused
    with pytest.raises(ValueError):
        exec(NEW_PARSE, scope) or scope["parse"]("  ")
    # the origin of a kept task says so
    new_tree, old_tree = tmp_path / "new", tmp_path / "1.0"
    for tree, src in ((new_tree, NEW_PARSE), (old_tree, OLD_PARSE)):
        (tree / "tests").mkdir(parents=True)
        (tree / "parse.py").write_text(src)
        (tree / "tests" / "test_parse.py").write_text("from parse import parse\n\n\ndef test_blank():\n    pass\n")
    source = ReleaseHistory(new_tree, "2.0", [Release("1.0", old_tree)], groups=False)
    mutations = source.propose({"parse.py": NEW_PARSE})
    assert source.origin(mutations, ["tests/test_parse.py::test_blank"])["part"] is True
    parts = ReleaseHistory(new_tree, "2.0", [Release("1.0", old_tree)], groups=False, parts_only=True)
    assert parts.propose({"parse.py": NEW_PARSE}) == mutations
    # a change of one hunk has no part that is not the whole: none is offered
    one_hunk = OLD_PARSE.replace("_Normaliser().run(text)", "_normalise(text)")
    assert history.partial_reverts(*(module_functions(t)["parse"] for t in (one_hunk, NEW_PARSE)), {"_normalise"}) == []
    monkeypatch.setattr(history, "MAX_PARTS", 0)
    assert function_reverts("parse.py", NEW_PARSE, OLD_PARSE, "1.0") == []


def test_a_module_that_became_a_package_is_compared_with_the_file_it_was(tmp_path):
    """inflection, schema and ordered-set began as one ``name.py`` and became ``name/__init__.py``
    (or ``src/name/__init__.py``): the older file is that module's, so its functions revert."""
    new_tree, r1, r0 = tmp_path / "new", tmp_path / "1.0", tmp_path / "0.9"
    (new_tree / "src" / "slugs").mkdir(parents=True)
    (new_tree / "src" / "slugs" / "__init__.py").write_text(NEW)
    r1.mkdir()
    (r1 / "slugs.py").write_text(OLD)
    (r0 / "slugs").mkdir(parents=True)  # and the other way round: a package that was a module later
    (r0 / "slugs" / "__init__.py").write_text(OLD)
    assert counterpart("src/slugs/__init__.py", r1) == r1 / "slugs.py"
    assert counterpart("slugs.py", r0) == r0 / "slugs" / "__init__.py"
    assert counterpart("src/slugs/other.py", r1) is None
    source = ReleaseHistory(new_tree, "2.0", [Release("1.0", r1)], groups=False)
    mutations = source.propose({"src/slugs/__init__.py": NEW})
    assert sorted(m.function for m in mutations) == ["Counter.add", "_clean", "slugify"]
    assert source.stats.files_missing == 0 and source.stats.files_compared == 1


def test_release_lists_and_the_offline_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path))
    assert _sort_versions(["1.0.8", "0.9.1.linux-x86_64", "1.0.10", "1.1.0rc1", "0.8.7", "1.0.9"]) == \
        ["0.8.7", "1.0.8", "1.0.9", "1.0.10"]
    with pytest.raises(HistoryError, match="no cached release list for demo"):
        earlier_releases("demo", "1.0.10", offline=True)
    folder = tmp_path / "swesynth" / "history" / "demo"
    folder.mkdir(parents=True)
    (folder / "versions.json").write_text(json.dumps({"versions": ["0.8.7", "1.0.8", "1.0.9", "1.0.10"]}))
    assert earlier_releases("demo", "1.0.10", 2, offline=True) == ["1.0.9", "1.0.8"]
    with pytest.raises(HistoryError, match="no release of demo before 0.8.7"):
        earlier_releases("demo", "0.8.7", offline=True)
    with pytest.raises(HistoryError, match=r"demo==1\.0\.9 is not in the cache"):
        fetch_release("demo", "1.0.9", offline=True)


def test_a_release_that_cannot_be_fetched_is_skipped_for_the_next_older_one(tmp_path, monkeypatch):
    # more-itertools 8.12.0 has no sdist pip can get; mining used to stop there
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path))
    folder = tmp_path / "swesynth" / "history" / "demo"
    folder.mkdir(parents=True)
    (folder / "versions.json").write_text(json.dumps({"versions": ["0.8.7", "1.0.8", "1.0.9", "1.0.10"]}))
    for version in ("1.0.9", "0.8.7"):  # in the cache: fetched and unpacked once; 1.0.8 is not
        (folder / version / "unpacked" / f"demo-{version}").mkdir(parents=True)
        (folder / version / "tree.json").write_text(json.dumps({"tree": f"unpacked/demo-{version}"}))
    lines = []
    fetched, unfetchable = fetch_releases("demo", "1.0.10", 2, offline=True, log=lines.append)
    assert [r.version for r in fetched] == ["1.0.9", "0.8.7"]
    assert fetched[1].tree == folder / "0.8.7" / "unpacked" / "demo-0.8.7"
    assert list(unfetchable) == ["1.0.8"] and "not in the cache" in unfetchable["1.0.8"]
    assert any("1.0.8: skipped" in line for line in lines)
    assert [r.version for r in fetch_releases("demo", "1.0.10", 1, offline=True)[0]] == ["1.0.9"]
    with pytest.raises(HistoryError, match=r"demo==1\.0\.8 is not in the cache"):  # named: not skipped
        fetch_releases("demo", "1.0.10", versions=["1.0.9", "1.0.8"], offline=True)
    shutil.rmtree(folder / "0.8.7")  # now nothing before 1.0.9 is in the cache
    with pytest.raises(HistoryError, match=r"no release of demo before 1\.0\.9 could be fetched: 1\.0\.8: "):
        fetch_releases("demo", "1.0.9", 3, offline=True)


@pytest.mark.parametrize("structure", ["paragraph", "sections", "session", "list"])
@pytest.mark.parametrize("failure", [
    Failure("tests/test_slugs.py::test_cut", call='slugify("abc def", max_length=5)', behaviour="slugify()",
            relation="==", error=("TypeError", "slugify() got an unexpected keyword argument 'max_length'"),
            expected="'abc'"),
    Failure("tests/test_slugs.py::test_digits", call='slugify("A 1")', behaviour="slugify()", relation="==",
            observed="'a'", expected="'a-1'"),
], ids=["error", "wrong"])
def test_a_feature_task_asks_for_the_feature(structure, failure):
    for opening in range(5):
        text = render(failure, structure=structure, opening=opening, closing=opening, style=opening, request=True)
        assert check_report(text) == [], text
        lowered = text.lower()
        assert not any(word in lowered for word in ("bug", "broken", "wrong", "off in", "crash")), text
    bug = render(failure, structure=structure, opening=1, closing=0, style=1)
    assert "support" not in bug and check_report(bug) == []


SUBMIT = "THOUGHT: nothing to change\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"


@pytest.mark.slow
def test_a_pypi_project_nobody_bundled_yields_history_tasks_that_play_through_gym_make(tmp_path, monkeypatch,
                                                                                        capsys):
    """url-normalize 3.1.0 (MIT; not bundled, named nowhere in termgym's code) is added from its sdist,
    its release 3.0.1 is mined, and the first validated task plays through ``gym.make``: the oracle
    (3.1.0's code) scores 1, submitting the reverted tree as it is 0. With seed 1 and single functions
    only (``--no-groups``) the plan's first candidate is ``normalize_query``: 3.1.0 made custom
    allow-lists match parameter names normalised like the query's keys, and pinned it with new
    tests, so the task is a fix; its behaviour check tells the bug apart on inputs no test makes, so
    ``gym.make`` serves it by default. (With groups, the first is ``normalize_host`` with the two
    helpers it calls: 3.1.0 also dropped a ``charset`` parameter along them, a change no held-out
    input tells apart, so that task is not served.)"""
    import subprocess
    import sys
    import warnings

    import gymnasium as gym

    import termgym  # noqa: F401  (registers the envs)
    from termgym.cli import main
    from termgym.env import oracle_actions
    from termgym.tasks.swesynth.suite import SweSynthSuite

    monkeypatch.setenv("TERMGYM_TESTENV_DIR", str(tmp_path / "envs"))
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                           "url-normalize==3.1.0", "-d", str(tmp_path / "sdist")], capture_output=True, text=True,
                          timeout=300)
    if proc.returncode != 0:
        pytest.skip(f"the package index is not reachable here: {proc.stderr.strip()[-200:]}")
    root, out = tmp_path / "projects", tmp_path / "history"
    assert main(["swesynth", "add-project", "--sdist", str(next((tmp_path / "sdist").iterdir())), "--root", str(root),
                 "--domain", "URLs", "--description", "URL normalisation.",
                 # the flaky-test probe and check have tests of their own (test_flaky.py); here they would
                 # only add runs of this project's clean suite (~80 s on 2 cores)
                 "--no-flaky-probe",
                 "--deselect", "tests/test_cli.py=runs the command line in subprocesses (slow; the library is "
                               "tested by the other files)"]) == 0
    capsys.readouterr()
    assert main(["swesynth", "history", "url_normalize", "--projects-dir", str(root), "--out", str(out),
                 "--versions", "3.0.1", "--n", "1", "--seed", "1", "--no-groups", "--no-flaky-check"]) == 0
    printed = capsys.readouterr().out
    assert "wrote 1 task(s)" in printed and "kinds: fix 1" in printed
    index = json.loads((out / "suite.json").read_text())
    mined = index["history"]["url_normalize"]
    assert mined["releases"] == ["3.0.1"] and mined["to_version"] == "3.1.0" and mined["kept"] == 1
    suite = SweSynthSuite(out, behaviour="any")
    (task_id,) = suite.task_ids("all")
    record = suite.record(task_id)
    assert record.origin["source"] == "history" and record.origin["kind"] == "fix"
    assert (record.origin["from_version"], record.origin["to_version"]) == ("3.0.1", "3.1.0")
    assert record.bug_types == [HISTORY_TYPE] and record.project == "url_normalize"
    assert record.validation["oracle"].split("/")[0] == record.validation["oracle"].split("/")[1]
    assert record.validation["behaviour"].endswith("tell the bug apart")  # the behaviour check was recorded
    assert record.origin["functions"] == ["url_normalize/normalize_query.py:normalize_query"], record.origin
    assert "process_query_param(param)" in record.fix_patch  # 3.1.0's change is the oracle
    from termgym.factory.swesynth.card import measure

    assert measure(out)["sources"] == {"history": 1} and measure(out)["history_kinds"] == {"fix": 1}
    # --resume carries the run on: with the same seed its task is kept and nothing is judged again
    # (--n 1 is met already); with another seed it refuses by name rather than mix two plans
    records = (out / "records" / "url_normalize.jsonl").read_text()
    options = ["swesynth", "history", "url_normalize", "--projects-dir", str(root), "--out", str(out),
               "--versions", "3.0.1", "--n", "1", "--no-groups", "--no-flaky-check", "--resume"]
    assert main([*options, "--seed", "1"]) == 0
    printed = capsys.readouterr().out
    assert "wrote 1 task(s)" in printed and (out / "records" / "url_normalize.jsonl").read_text() == records
    assert main([*options, "--seed", "2"]) == 1
    err = capsys.readouterr().err
    assert "cannot resume 'url_normalize'" in err and "not seed 2" in err, err
    # --extends: mining the same release for the suite that holds the task skips its revert before
    # any test runs (what a batch of older releases of a mined project needs: only bugs merge takes)
    again = tmp_path / "again"
    assert main(["swesynth", "history", "url_normalize", "--projects-dir", str(root), "--out", str(again),
                 "--versions", "3.0.1", "--n", "1", "--seed", "1", "--no-groups", "--no-flaky-check",
                 "--extends", str(out), "--time-budget", "30"]) in (0, 1)
    printed = capsys.readouterr().out
    assert "the suite it extends has this bug already ×1" in printed, printed
    assert task_id not in ((again / "records" / "url_normalize.jsonl").read_text()
                           if (again / "records" / "url_normalize.jsonl").exists() else "")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = gym.make("termgym/SweSynth-v0", path=str(out), max_steps=10)
    # served by default and graded with its behaviour check: no warning that tests alone decide
    assert not [w for w in caught if type(w.message).__name__ == "UnsafeGradingWarning"]
    try:
        assert task_id in env.unwrapped.suite.task_ids("all") and env.unwrapped.suite.has_servable_check(task_id)
        env.reset(options={"task_id": task_id})
        for message in oracle_actions(env.unwrapped):
            _, reward, terminated, truncated, info = env.step(message)
            if terminated or truncated:
                break
        assert info["grade"]["all_passed"] and reward == 1.0
        env.reset(options={"task_id": task_id})
        _, reward, terminated, _, info = env.step(SUBMIT)
        assert terminated and reward == 0.0 and not info["grade"]["passed"]
    finally:
        env.close()


def test_history_tasks_are_held_out_by_project_as_the_default_suite_decided(tmp_path):
    from termgym.factory.swesynth.bundle import SUITE_DIR, hash_held_out, project_held_out

    index = json.loads((SUITE_DIR / "suite.json").read_text())
    held = sorted(index["held_out_projects"])
    trained = sorted(set(index["repos"]) - set(held))
    assert held and trained
    new = tmp_path / "history"  # a suite not written yet: the default suite's decision holds
    assert project_held_out(new, held[0]) is True and project_held_out(new, trained[0]) is False
    assert project_held_out(new, "url_normalize") is hash_held_out("url_normalize")  # one it never saw


def test_the_history_command_names_what_is_wrong(tmp_path, capsys):
    from termgym.cli import main

    assert main(["swesynth", "history", "nosuchproject", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "no SWE-SYNTH project 'nosuchproject'" in err and "add-project nosuchproject==VERSION" in err
    assert main(["swesynth", "history", "tinydb", "--out", str(tmp_path), "--versions", "99.0"]) == 1
    assert "--versions 99.0: not earlier than tinydb" in capsys.readouterr().err
    assert main(["swesynth", "history", "tinydb", "--out", str(tmp_path), "--n", "0"]) == 2
    assert not (tmp_path / "suite.json").exists()
