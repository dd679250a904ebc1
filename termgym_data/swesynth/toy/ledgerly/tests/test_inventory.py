from decimal import Decimal

import pytest

from ledgerly.inventory import InsufficientStock, Inventory, StockItem


@pytest.fixture
def stock():
    inv = Inventory()
    inv.register(StockItem("wid-1", "Widget", reorder_level=5, reorder_quantity=20))
    inv.register(StockItem("GAD-2", "Gadget"))
    inv.receive("WID-1", 10, "2.00")
    inv.receive("wid-1", 5, "3.00")
    return inv


def test_sku_is_uppercased_and_unique(stock):
    assert "WID-1" in stock.items
    with pytest.raises(ValueError, match="already"):
        stock.register(StockItem("Wid-1", "Again"))


def test_item_validation():
    with pytest.raises(ValueError):
        StockItem("", "No sku")
    with pytest.raises(ValueError):
        StockItem("A", "Neg", reorder_level=-1)


def test_on_hand_and_value(stock):
    assert stock.on_hand("wid-1") == 15
    assert stock.value("wid-1") == Decimal("35.00")
    assert stock.value() == Decimal("35.00")
    assert stock.on_hand("GAD-2") == 0


def test_average_cost(stock):
    assert stock.average_cost("WID-1") == Decimal("2.33")
    assert stock.average_cost("GAD-2") == Decimal("0.00")


def test_issue_uses_oldest_layer_first(stock):
    assert stock.issue("WID-1", 4) == Decimal("8.00")
    assert stock.on_hand("WID-1") == 11


def test_issue_spanning_layers(stock):
    assert stock.issue("WID-1", 12) == Decimal("26.00")
    assert stock.value("WID-1") == Decimal("9.00")


def test_issue_everything_then_receive_again(stock):
    stock.issue("WID-1", 15)
    assert stock.on_hand("WID-1") == 0
    stock.receive("WID-1", 1, "9.99")
    assert stock.issue("WID-1", 1) == Decimal("9.99")


def test_insufficient_stock_details(stock):
    with pytest.raises(InsufficientStock) as info:
        stock.issue("wid-1", 16)
    assert info.value.requested == 16
    assert info.value.available == 15
    assert "only 15 on hand" in str(info.value)
    assert stock.on_hand("WID-1") == 15


@pytest.mark.parametrize("qty", [0, -3])
def test_receive_and_issue_need_positive_quantity(stock, qty):
    with pytest.raises(ValueError):
        stock.receive("WID-1", qty, 1)
    with pytest.raises(ValueError):
        stock.issue("WID-1", qty)


def test_receive_rejects_negative_cost_and_unknown_sku(stock):
    with pytest.raises(ValueError):
        stock.receive("WID-1", 1, "-1")
    with pytest.raises(KeyError, match="NOPE"):
        stock.receive("NOPE", 1, 1)


def test_adjust_up_at_average_cost(stock):
    stock.adjust("WID-1", 3, "found in back room")
    assert stock.on_hand("WID-1") == 18
    assert stock.value("WID-1") == Decimal("41.99")


def test_adjust_down_records_cost(stock):
    stock.adjust("WID-1", -2, "damaged")
    assert stock.on_hand("WID-1") == 13
    assert stock.history[-1] == ("adjust-", "WID-1", 2, Decimal("4.00"))


def test_adjust_needs_reason_and_zero_is_noop(stock):
    with pytest.raises(ValueError, match="reason"):
        stock.adjust("WID-1", 1, "  ")
    before = list(stock.history)
    stock.adjust("WID-1", 0, "count ok")
    assert stock.history == before


def test_needs_reorder_at_level(stock):
    assert stock.needs_reorder() == []
    stock.issue("WID-1", 10)
    assert stock.needs_reorder() == [("WID-1", 20)]


def test_reorder_quantity_covers_deep_shortfall():
    inv = Inventory()
    inv.register(StockItem("A", "a", reorder_level=30, reorder_quantity=10))
    assert inv.needs_reorder() == [("A", 31)]


def test_movements_filter(stock):
    stock.issue("WID-1", 1)
    assert [row[0] for row in stock.movements("wid-1")] == ["receive", "receive", "issue"]
    assert stock.movements("WID-1", "issue") == [("issue", "WID-1", 1, Decimal("2.00"))]
    assert stock.movements("GAD-2") == []


def test_default_reorder_level_is_empty_shelf():
    inv = Inventory()
    inv.register(StockItem("B", "b", reorder_quantity=5))
    inv.receive("B", 1, "1")
    assert inv.needs_reorder() == []
    inv.issue("B", 1)
    assert inv.needs_reorder() == [("B", 5)]
