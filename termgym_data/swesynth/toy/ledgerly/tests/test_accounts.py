import pytest

from ledgerly.accounts import Account, ChartOfAccounts, standard_chart, type_for_code, validate_code


@pytest.mark.parametrize(
    "code, expected",
    [("1000", "asset"), ("2100", "liability"), ("3000", "equity"), ("4000", "income"),
     ("5000", "expense"), ("9999", "expense")],
)
def test_type_for_code(code, expected):
    assert type_for_code(code) == expected


@pytest.mark.parametrize("code", ["100", "10000", "10a0", "0100", ""])
def test_validate_code_rejects(code):
    with pytest.raises(ValueError):
        validate_code(code)


def test_validate_code_requires_string():
    with pytest.raises(TypeError):
        validate_code(1000)


def test_account_defaults_and_label():
    account = Account("1000", "  Cash ")
    assert account.name == "Cash"
    assert account.type == "asset"
    assert account.label() == "1000 Cash"
    assert account.active


def test_account_needs_name_and_known_type():
    with pytest.raises(ValueError):
        Account("1000", " ")
    with pytest.raises(ValueError):
        Account("1000", "Cash", type="bogus")


@pytest.mark.parametrize(
    "code, side", [("1000", "debit"), ("5000", "debit"), ("2000", "credit"), ("3000", "credit"), ("4000", "credit")]
)
def test_normal_side(code, side):
    assert Account(code, "x").normal_side == side


def test_duplicate_code_refused():
    chart = ChartOfAccounts()
    chart.create("1000", "Cash")
    with pytest.raises(ValueError, match="duplicate"):
        chart.create("1000", "Cash again")


def test_child_must_match_parent_type():
    chart = ChartOfAccounts()
    chart.create("1000", "Cash")
    with pytest.raises(ValueError, match="cannot sit under"):
        chart.create("2000", "Loan", parent="1000")


def test_child_needs_existing_parent():
    chart = ChartOfAccounts()
    with pytest.raises(KeyError, match="1000"):
        chart.create("1010", "Petty cash", parent="1000")


def test_iteration_is_in_code_order():
    chart = ChartOfAccounts()
    for code in ["4000", "1000", "2000"]:
        chart.create(code, "x" + code)
    assert [a.code for a in chart] == ["1000", "2000", "4000"]
    assert len(chart) == 3
    assert "2000" in chart and "3000" not in chart


def _tree():
    chart = ChartOfAccounts()
    chart.create("1000", "Cash")
    chart.create("1020", "Bank B", parent="1000")
    chart.create("1010", "Bank A", parent="1000")
    chart.create("1011", "Bank A savings", parent="1010")
    chart.create("1100", "Receivables")
    return chart


def test_children_and_descendants():
    chart = _tree()
    assert [a.code for a in chart.children("1000")] == ["1010", "1020"]
    assert [a.code for a in chart.descendants("1000")] == ["1010", "1011", "1020"]
    assert chart.children("1100") == []


def test_path_from_root():
    assert _tree().path("1011") == ["1000", "1010", "1011"]
    assert _tree().path("1100") == ["1100"]


def test_by_type_hides_inactive_unless_asked():
    chart = standard_chart()
    chart.deactivate("6100")
    assert [a.code for a in chart.by_type("expense")] == ["5000", "6000"]
    assert len(chart.by_type("expense", include_inactive=True)) == 3
    with pytest.raises(ValueError):
        chart.by_type("assets")


def test_search_by_code_prefix_and_name():
    chart = standard_chart()
    assert [a.code for a in chart.search("21")] == ["2100"]
    assert [a.code for a in chart.search("PAYABLE")] == ["2000", "2100"]
    assert chart.search("  ") == []


def test_deactivate_refuses_parent_with_active_children():
    chart = _tree()
    with pytest.raises(ValueError, match="active children"):
        chart.deactivate("1010")
    chart.deactivate("1011")
    chart.deactivate("1010")
    assert not chart.get("1010").active


def test_standard_chart_shape():
    chart = standard_chart()
    assert len(chart) == 12
    assert chart.get("4000").name == "Sales"
    with pytest.raises(KeyError, match="7777"):
        chart.get("7777")
