"""Stock on hand with first-in-first-out cost layers."""

from __future__ import annotations

from collections import deque
from decimal import Decimal
from typing import Optional

from .money import quantize, to_decimal


class InsufficientStock(Exception):
    """Raised when an issue asks for more units than are on hand."""

    def __init__(self, sku: str, requested: int, available: int) -> None:
        """Remember what was asked and what there was."""
        super().__init__(f"{sku}: requested {requested}, only {available} on hand")
        self.sku = sku
        self.requested = requested
        self.available = available


class StockItem:
    """A stocked product and its reorder policy."""

    def __init__(self, sku: str, name: str, reorder_level: int = 0, reorder_quantity: int = 0,
                 unit: str = "ea") -> None:
        """Describe an item; reorder when on-hand falls to ``reorder_level`` or below."""
        if not sku:
            raise ValueError("an item needs a SKU")
        if reorder_level < 0 or reorder_quantity < 0:
            raise ValueError(f"{sku}: reorder settings must not be negative")
        self.sku = sku.upper()
        self.name = name
        self.reorder_level = reorder_level
        self.reorder_quantity = reorder_quantity
        self.unit = unit


class Inventory:
    """Quantities and FIFO cost layers per SKU, with a movement history."""

    def __init__(self) -> None:
        """Start with no items."""
        self.items: dict[str, StockItem] = {}
        self._layers: dict[str, deque[list]] = {}
        self.history: list[tuple[str, str, int, Decimal]] = []

    def register(self, item: StockItem) -> StockItem:
        """Add an item to the catalogue."""
        if item.sku in self.items:
            raise ValueError(f"item {item.sku} already registered")
        self.items[item.sku] = item
        self._layers[item.sku] = deque()
        return item

    def _layers_for(self, sku: str) -> deque:
        """Cost layers of ``sku`` or a ``KeyError`` naming the unknown SKU."""
        key = sku.upper()
        if key not in self._layers:
            raise KeyError(f"unknown SKU {sku}")
        return self._layers[key]

    def receive(self, sku: str, quantity: int, unit_cost: object) -> None:
        """Add ``quantity`` units bought at ``unit_cost`` as a new cost layer."""
        if quantity <= 0:
            raise ValueError(f"{sku}: received quantity must be positive, got {quantity}")
        cost = to_decimal(unit_cost)  # type: ignore[arg-type]
        if cost < 0:
            raise ValueError(f"{sku}: unit cost must not be negative")
        layers = self._layers_for(sku)
        layers.append([quantity, cost])
        self.history.append(("receive", sku.upper(), quantity, quantize(cost * quantity)))

    def on_hand(self, sku: str) -> int:
        """Units currently in stock."""
        return sum(layer[0] for layer in self._layers_for(sku))

    def value(self, sku: Optional[str] = None) -> Decimal:
        """Cost value of one SKU, or of all stock when ``sku`` is None."""
        skus = [sku] if sku is not None else list(self.items)
        total = Decimal(0)
        for code in skus:
            for quantity, cost in self._layers_for(code):
                total += quantity * cost
        return quantize(total)

    def average_cost(self, sku: str) -> Decimal:
        """Weighted average unit cost of what is on hand (zero when empty)."""
        units = self.on_hand(sku)
        if units == 0:
            return Decimal("0.00")
        return quantize(self.value(sku) / units)

    def issue(self, sku: str, quantity: int) -> Decimal:
        """Take ``quantity`` units out, oldest layers first; return their cost."""
        if quantity <= 0:
            raise ValueError(f"{sku}: issued quantity must be positive, got {quantity}")
        available = self.on_hand(sku)
        if quantity > available:
            raise InsufficientStock(sku.upper(), quantity, available)
        layers = self._layers_for(sku)
        remaining = quantity
        cost = Decimal(0)
        while remaining > 0:
            layer = layers[0]
            take = min(layer[0], remaining)
            cost += take * layer[1]
            layer[0] -= take
            remaining -= take
            if layer[0] == 0:
                layers.popleft()
        cost = quantize(cost)
        self.history.append(("issue", sku.upper(), quantity, cost))
        return cost

    def adjust(self, sku: str, delta: int, reason: str) -> None:
        """Correct the count after a stocktake.

        A positive delta adds units at the current average cost; a negative delta
        removes units FIFO. A reason is required for the audit trail.
        """
        if not reason.strip():
            raise ValueError("an adjustment needs a reason")
        if delta == 0:
            return
        if delta > 0:
            self._layers_for(sku).append([delta, self.average_cost(sku)])
            self.history.append(("adjust+", sku.upper(), delta, Decimal(0)))
        else:
            cost = self.issue(sku, -delta)
            self.history[-1] = ("adjust-", sku.upper(), -delta, cost)

    def needs_reorder(self) -> list[tuple[str, int]]:
        """(SKU, quantity to order) for items at or below their reorder level, by SKU."""
        result = []
        for sku in sorted(self.items):
            item = self.items[sku]
            if item.reorder_quantity == 0:
                continue
            on_hand = self.on_hand(sku)
            if on_hand <= item.reorder_level:
                shortfall = item.reorder_level - on_hand
                result.append((sku, max(item.reorder_quantity, shortfall + 1)))
        return result

    def movements(self, sku: str, kind: Optional[str] = None) -> list[tuple[str, str, int, Decimal]]:
        """History rows for one SKU, optionally only one kind (``receive``, ``issue``...)."""
        key = sku.upper()
        self._layers_for(key)
        return [row for row in self.history if row[1] == key and (kind is None or row[0] == kind)]
