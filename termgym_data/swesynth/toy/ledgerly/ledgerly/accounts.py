"""Chart of accounts: numbered accounts grouped by the five classic types."""

from __future__ import annotations

from typing import Iterator, Optional

ACCOUNT_TYPES = ("asset", "liability", "equity", "income", "expense")

# Debit-normal accounts grow with debits; the others grow with credits.
DEBIT_NORMAL = frozenset({"asset", "expense"})

# The leading digit of a four-digit code tells its type (a common small-business scheme).
TYPE_BY_LEADING_DIGIT = {"1": "asset", "2": "liability", "3": "equity", "4": "income"}
CODE_LENGTH = 4


def type_for_code(code: str) -> str:
    """Infer the account type from the code's leading digit (5-9 are expenses)."""
    validate_code(code)
    return TYPE_BY_LEADING_DIGIT.get(code[0], "expense")


def validate_code(code: str) -> str:
    """Check that ``code`` is four digits not starting with zero; return it."""
    if not isinstance(code, str):
        raise TypeError(f"account code must be a string, got {type(code).__name__}")
    if len(code) != CODE_LENGTH or not code.isdigit():
        raise ValueError(f"account code must be {CODE_LENGTH} digits: {code!r}")
    if code[0] == "0":
        raise ValueError(f"account code cannot start with 0: {code!r}")
    return code


class Account:
    """One account: a code, a name, a type and an optional parent account code."""

    def __init__(self, code: str, name: str, type: Optional[str] = None,
                 parent: Optional[str] = None, active: bool = True) -> None:
        """Create an account; the type defaults to the one implied by the code."""
        self.code = validate_code(code)
        if not name or not name.strip():
            raise ValueError(f"account {code} needs a name")
        self.name = name.strip()
        self.type = type if type is not None else type_for_code(code)
        if self.type not in ACCOUNT_TYPES:
            raise ValueError(f"unknown account type {self.type!r} for {code}")
        self.parent = parent
        self.active = active

    @property
    def normal_side(self) -> str:
        """``"debit"`` for assets and expenses, ``"credit"`` otherwise."""
        return "debit" if self.type in DEBIT_NORMAL else "credit"

    def label(self) -> str:
        """Code and name together, as printed in reports."""
        return f"{self.code} {self.name}"

    def __repr__(self) -> str:
        """Debug form."""
        return f"Account({self.code!r}, {self.name!r}, {self.type!r})"


class ChartOfAccounts:
    """A set of accounts indexed by code, with parent/child structure."""

    def __init__(self) -> None:
        """Start with no accounts."""
        self._accounts: dict[str, Account] = {}

    def add(self, account: Account) -> Account:
        """Add ``account``; its code must be new and its parent must already exist."""
        if account.code in self._accounts:
            raise ValueError(f"duplicate account code {account.code}")
        if account.parent is not None:
            parent = self.get(account.parent)
            if parent.type != account.type:
                raise ValueError(
                    f"account {account.code} ({account.type}) cannot sit under "
                    f"{parent.code} ({parent.type})"
                )
        self._accounts[account.code] = account
        return account

    def create(self, code: str, name: str, **kwargs: object) -> Account:
        """Build an :class:`Account` from arguments and add it."""
        return self.add(Account(code, name, **kwargs))  # type: ignore[arg-type]

    def get(self, code: str) -> Account:
        """Return the account with ``code`` or raise ``KeyError`` naming it."""
        try:
            return self._accounts[code]
        except KeyError:
            raise KeyError(f"no account with code {code}") from None

    def __contains__(self, code: object) -> bool:
        """True if an account with this code exists."""
        return code in self._accounts

    def __len__(self) -> int:
        """Number of accounts."""
        return len(self._accounts)

    def __iter__(self) -> Iterator[Account]:
        """Accounts in code order."""
        return iter(sorted(self._accounts.values(), key=lambda a: a.code))

    def children(self, code: str) -> list[Account]:
        """Direct children of ``code`` in code order."""
        self.get(code)
        return [a for a in self if a.parent == code]

    def descendants(self, code: str) -> list[Account]:
        """All accounts below ``code``, depth first, in code order at each level."""
        result: list[Account] = []
        for child in self.children(code):
            result.append(child)
            result.extend(self.descendants(child.code))
        return result

    def path(self, code: str) -> list[str]:
        """Codes from the top-level ancestor down to ``code``."""
        chain = [code]
        current = self.get(code)
        while current.parent is not None:
            chain.append(current.parent)
            current = self.get(current.parent)
        chain.reverse()
        return chain

    def by_type(self, type: str, include_inactive: bool = False) -> list[Account]:
        """Accounts of one type in code order; inactive ones only when asked."""
        if type not in ACCOUNT_TYPES:
            raise ValueError(f"unknown account type {type!r}")
        return [a for a in self if a.type == type and (a.active or include_inactive)]

    def search(self, text: str) -> list[Account]:
        """Accounts whose code starts with ``text`` or whose name contains it (any case)."""
        needle = text.strip().lower()
        if not needle:
            return []
        return [a for a in self if a.code.startswith(needle) or needle in a.name.lower()]

    def deactivate(self, code: str) -> None:
        """Mark an account inactive; an account with active children cannot be."""
        account = self.get(code)
        if any(child.active for child in self.children(code)):
            raise ValueError(f"account {code} still has active children")
        account.active = False


def standard_chart() -> ChartOfAccounts:
    """A small ready-made chart for a trading business."""
    chart = ChartOfAccounts()
    for code, name in [
        ("1000", "Cash"), ("1100", "Accounts Receivable"), ("1200", "Inventory"),
        ("2000", "Accounts Payable"), ("2100", "Sales Tax Payable"),
        ("3000", "Owner's Equity"), ("3100", "Retained Earnings"),
        ("4000", "Sales"), ("4100", "Discounts Given"),
        ("5000", "Cost of Goods Sold"), ("6000", "Rent"), ("6100", "Utilities"),
    ]:
        chart.create(code, name)
    return chart
