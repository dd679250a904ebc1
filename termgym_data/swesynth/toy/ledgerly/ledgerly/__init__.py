"""ledgerly: bookkeeping, inventory and invoicing with exact money arithmetic."""

from .money import CurrencyMismatch, Money, parse_amount, total

__all__ = ["CurrencyMismatch", "Money", "parse_amount", "total"]
__version__ = "0.4.2"
