import datetime
from decimal import Decimal

import pytest

from ledgerly.importer import (
    RowError,
    categorize,
    deduplicate,
    parse_date,
    parse_transactions,
    split_csv_line,
    summarize,
)

SAMPLE = [
    "Date,Description,Amount,Ref\n",
    "2024-01-02,Coffee beans,-12.50,A1\n",
    "\n",
    "# exported by the bank\n",
    '03/01/2024,"Client, Inc. payment","1,200.00",A2\n',
    "bad-date,Something,5,A3\n",
    "2024-01-04,Short row\n",
    "2024-01-05,,3,A5\n",
]


@pytest.mark.parametrize(
    "line, fields",
    [
        ("a,b,c", ["a", "b", "c"]),
        (" a , b ", ["a", "b"]),
        ('"x, y",z', ["x, y", "z"]),
        ('"say ""hi""",2', ['say "hi"', "2"]),
        ("a,,c", ["a", "", "c"]),
        ("", [""]),
        ("a,", ["a", ""]),
    ],
)
def test_split_csv_line(line, fields):
    assert split_csv_line(line) == fields


def test_split_csv_line_other_delimiter():
    assert split_csv_line("a;b;c", ";") == ["a", "b", "c"]
    with pytest.raises(ValueError):
        split_csv_line("a", ";;")


def test_split_csv_line_unterminated_quote():
    with pytest.raises(ValueError, match="unterminated"):
        split_csv_line('"abc,d')


@pytest.mark.parametrize("text", ["2024-03-09", "09/03/2024", "09.03.2024", " 2024-03-09 "])
def test_parse_date_formats(text):
    assert parse_date(text) == datetime.date(2024, 3, 9)


def test_parse_date_rejects():
    with pytest.raises(ValueError, match="unrecognised"):
        parse_date("March 9")


def test_parse_transactions_good_rows():
    transactions, _ = parse_transactions(SAMPLE)
    assert len(transactions) == 2
    first, second = transactions
    assert first == {"date": datetime.date(2024, 1, 2), "description": "Coffee beans",
                     "amount": Decimal("-12.50"), "ref": "A1"}
    assert second["description"] == "Client, Inc. payment"
    assert second["amount"] == Decimal("1200.00")
    assert second["date"] == datetime.date(2024, 1, 3)


def test_parse_transactions_collects_errors_with_line_numbers():
    _, errors = parse_transactions(SAMPLE)
    assert [e.line_number for e in errors] == [6, 7, 8]
    assert "expected 4 fields, found 2" in str(errors[1])
    assert str(errors[2]) == "line 8: empty description"


def test_parse_transactions_strict_raises_first_error():
    with pytest.raises(RowError) as info:
        parse_transactions(SAMPLE, strict=True)
    assert info.value.line_number == 6


def test_parse_transactions_missing_header_column():
    with pytest.raises(RowError, match="amount"):
        parse_transactions(["date,description\n", "2024-01-01,x\n"])


def test_summarize():
    txs = [{"amount": Decimal("10")}, {"amount": Decimal("-4")}, {"amount": Decimal("0")}, {"amount": Decimal("-1")}]
    assert summarize(txs) == {"in": Decimal("10"), "out": Decimal("5"), "net": Decimal("5")}


RULES = {"coffee": "drinks", "coffee beans": "groceries", "RENT": "housing"}


@pytest.mark.parametrize(
    "description, category",
    [("Coffee beans 1kg", "groceries"), ("Morning coffee", "drinks"), ("March rent", "housing"),
     ("Bookshop", "uncategorized")],
)
def test_categorize(description, category):
    assert categorize(description, RULES) == category


def test_categorize_custom_default():
    assert categorize("x", {}, default="misc") == "misc"


def test_deduplicate_keeps_first():
    a = {"date": 1, "description": "x", "amount": 1, "n": 1}
    b = {"date": 1, "description": "x", "amount": 1, "n": 2}
    c = {"date": 1, "description": "x", "amount": 2, "n": 3}
    assert [t["n"] for t in deduplicate([a, b, c, b])] == [1, 3]
