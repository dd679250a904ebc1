"""Reading bank-export CSV lines into transactions."""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Iterable, Optional

from .money import parse_amount

REQUIRED_COLUMNS = ("date", "description", "amount")
DATE_FORMATS = ("%Y-%m-%d", "%d/%m/%Y", "%d.%m.%Y")


class RowError(ValueError):
    """A problem with one input line; carries the 1-based line number."""

    def __init__(self, line_number: int, message: str) -> None:
        """Prefix the message with the line number."""
        super().__init__(f"line {line_number}: {message}")
        self.line_number = line_number


def split_csv_line(line: str, delimiter: str = ",") -> list[str]:
    """Split one CSV line, honouring double quotes and doubled quotes inside them.

    Fields are stripped of surrounding whitespace; an unterminated quote raises.
    """
    if len(delimiter) != 1:
        raise ValueError("delimiter must be a single character")
    fields: list[str] = []
    current: list[str] = []
    in_quotes = False
    i = 0
    while i < len(line):
        char = line[i]
        if in_quotes:
            if char == '"':
                if i + 1 < len(line) and line[i + 1] == '"':
                    current.append('"')
                    i += 1
                else:
                    in_quotes = False
            else:
                current.append(char)
        elif char == '"':
            in_quotes = True
        elif char == delimiter:
            fields.append("".join(current).strip())
            current = []
        else:
            current.append(char)
        i += 1
    if in_quotes:
        raise ValueError("unterminated quoted field")
    fields.append("".join(current).strip())
    return fields


def parse_date(text: str) -> datetime.date:
    """Parse a date in one of the accepted formats (ISO first)."""
    cleaned = text.strip()
    for fmt in DATE_FORMATS:
        try:
            return datetime.datetime.strptime(cleaned, fmt).date()
        except ValueError:
            continue
    raise ValueError(f"unrecognised date {text!r}")


def parse_transactions(lines: Iterable[str], delimiter: str = ",",
                       strict: bool = False) -> tuple[list[dict], list[RowError]]:
    """Turn CSV lines (first line is the header) into transaction dicts.

    Returns ``(transactions, errors)``. Blank lines and lines starting with ``#``
    are skipped. With ``strict`` the first bad line raises instead of being
    collected. Each transaction has ``date``, ``description``, ``amount`` and any
    extra columns as strings.
    """
    transactions: list[dict] = []
    errors: list[RowError] = []
    header: Optional[list[str]] = None
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if header is None:
            header = [name.lower() for name in split_csv_line(line, delimiter)]
            missing = [c for c in REQUIRED_COLUMNS if c not in header]
            if missing:
                raise RowError(number, f"header lacks column(s): {', '.join(missing)}")
            continue
        try:
            transactions.append(_parse_row(header, split_csv_line(line, delimiter), number))
        except RowError as error:
            if strict:
                raise
            errors.append(error)
        except ValueError as error:
            wrapped = RowError(number, str(error))
            if strict:
                raise wrapped from error
            errors.append(wrapped)
    return transactions, errors


def _parse_row(header: list[str], fields: list[str], number: int) -> dict:
    """One data row as a dict; raises ``RowError`` for a wrong cell count."""
    if len(fields) != len(header):
        raise RowError(number, f"expected {len(header)} fields, found {len(fields)}")
    row = dict(zip(header, fields))
    row["date"] = parse_date(row["date"])
    row["amount"] = parse_amount(row["amount"])
    if not row["description"]:
        raise RowError(number, "empty description")
    return row


def summarize(transactions: Iterable[dict]) -> dict[str, Decimal]:
    """Money in, money out and net over the transactions."""
    inflow = Decimal("0.00")
    outflow = Decimal("0.00")
    for tx in transactions:
        if tx["amount"] >= 0:
            inflow += tx["amount"]
        else:
            outflow -= tx["amount"]
    return {"in": inflow, "out": outflow, "net": inflow - outflow}


def categorize(description: str, rules: dict[str, str], default: str = "uncategorized") -> str:
    """Category for a description: the first rule keyword it contains (case-insensitive).

    Longer keywords are tried first so ``"coffee beans"`` wins over ``"coffee"``.
    """
    text = description.lower()
    for keyword in sorted(rules, key=lambda k: (-len(k), k)):
        if keyword.lower() in text:
            return rules[keyword]
    return default


def deduplicate(transactions: list[dict]) -> list[dict]:
    """Drop exact repeats of (date, description, amount), keeping the first."""
    seen: set = set()
    unique = []
    for tx in transactions:
        key = (tx["date"], tx["description"], tx["amount"])
        if key in seen:
            continue
        seen.add(key)
        unique.append(tx)
    return unique
