import pytest

from textkit.escape import Markup
from textkit.expr import ExpressionError, evaluate_source, lookup, parse


class User:
    def __init__(self, name, admin=False):
        self.name = name
        self.admin = admin
        self._secret = "hidden"

    def greet(self, other):
        return f"hi {other}"


@pytest.mark.parametrize(
    "source, expected",
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("10 - 4 - 3", 3),
        ("2 ** 3 ** 2", 512),
        ("-2 ** 2", -4),
        ("7 // 2 + 7 % 2", 4),
        ("8 / 2", 4.0),
        ("--3", 3),
        ("+5", 5),
    ],
)
def test_arithmetic(source, expected):
    assert evaluate_source(source) == expected


@pytest.mark.parametrize(
    "source, expected",
    [
        ("1 < 2 <= 2", True),
        ("1 < 3 < 2", False),
        ("2 == 2 != 3", True),
        ("3 >= 4", False),
        ("4 >= 4", True),
        ("4 > 3", True),
        ("'a' in 'cat'", True),
        ("'z' not in 'cat'", True),
        ("x is none", True),
        ("x is not none", False),
    ],
)
def test_comparisons(source, expected):
    assert evaluate_source(source, x=None) is expected


def test_boolean_logic_returns_operands():
    assert evaluate_source("0 or 'fallback'") == "fallback"
    assert evaluate_source("'a' and 'b'") == "b"
    assert evaluate_source("'' and explode") == ""
    assert evaluate_source("not 0 and 1") == 1


def test_not_binds_looser_than_comparison():
    assert evaluate_source("not 1 == 2") is True


def test_or_is_lower_than_and():
    assert evaluate_source("true or false and false") is True


def test_names_attributes_and_indexes():
    ctx = {"user": User("ada"), "items": [10, 20, 30], "d": {"k": "v"}}
    assert evaluate_source("user.name", ctx) == "ada"
    assert evaluate_source("items[1] + items[-1]", ctx) == 50
    assert evaluate_source("d.k", ctx) == "v"
    assert evaluate_source("d['k']", ctx) == "v"


def test_calls():
    assert evaluate_source("user.greet('bob')", user=User("ada")) == "hi bob"
    with pytest.raises(ExpressionError, match="not callable"):
        evaluate_source("x()", x=3)


def test_list_literal():
    assert evaluate_source("[1, 2 + 3, 'x']") == [1, 5, "x"]
    assert evaluate_source("[]") == []


@pytest.mark.parametrize(
    "source, expected",
    [
        ("name | upper", "ADA LOVELACE"),
        ("name | title", "Ada Lovelace"),
        ("name | capitalize", "Ada lovelace"),
        ("name | length", 12),
        ("items | join(', ')", "3, 1, 2"),
        ("items | sort | first", 1),
        ("items | sort(true) | last", 1),
        ("items | reverse", [2, 1, 3]),
        ("missing | default('n/a')", "n/a"),
        ("'' | default('n/a', true)", "n/a"),
        ("'' | default('n/a')", ""),
        ("pi | round", 3),
        ("pi | round(2)", 3.14),
        ("name | truncate(5)", "ad..."),
        ("name | replace('a', '4')", "4d4 lovel4ce"),
        ("items | sum", 6),
        ("'  x ' | trim", "x"),
        ("'3.7' | int", 3),
        ("pi | ceil", 4),
        ("(-3) | abs", 3),
        ("-3 | abs", -3),
    ],
)
def test_filters(source, expected):
    ctx = {"name": "ada lovelace", "items": [3, 1, 2], "pi": 3.14159, "missing": None}
    assert evaluate_source(source, ctx) == expected


def test_filter_binds_tighter_than_arithmetic():
    assert evaluate_source("1 + items | length", items=[1, 2]) == 3


def test_escape_and_safe_filters():
    assert evaluate_source("'<b>' | escape") == "&lt;b&gt;"
    assert isinstance(evaluate_source("'<b>' | safe"), Markup)


def test_first_last_of_empty():
    assert evaluate_source("x | first", x=[]) is None
    assert evaluate_source("x | last", x="") is None


@pytest.mark.parametrize(
    "source, message",
    [
        ("1 +", "end of input"),
        ("(1", r"expected '\)' but found 'end of input'"),
        ("1 2", "unexpected 2"),
        ("a.", "expected 'NAME'"),
        ("f(1 2)", "expected ','"),
    ],
)
def test_syntax_errors(source, message):
    with pytest.raises(ExpressionError, match=message):
        parse(source)


@pytest.mark.parametrize(
    "source, message",
    [
        ("nope", "undefined name 'nope'"),
        ("1 / 0", "division by zero"),
        ("1 // 0", "division by zero"),
        ("'a' - 1", "cannot apply '-'"),
        ("x | shout", "unknown filter 'shout'"),
        ("x[5]", "cannot index"),
        ("1 < 'a'", "cannot compare"),
        ("u._secret", "private"),
        ("u.missing", "has no attribute 'missing'"),
        ("d.nokey", "no key 'nokey'"),
    ],
)
def test_evaluation_errors(source, message):
    with pytest.raises(ExpressionError, match=message):
        evaluate_source(source, x=[1], u=User("a"), d={})


def test_lookup_prefers_mapping_keys():
    assert lookup({"items": 1}, "items") == 1
