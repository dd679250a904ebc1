import pytest

from planwise.graph import CycleError, DependencyGraph, from_mapping

BUILD = {
    "compile": ["fetch"],
    "test": ["compile"],
    "docs": ["fetch"],
    "package": ["test", "docs"],
    "fetch": [],
}


def test_readme_example():
    g = DependencyGraph()
    g.add_edge("compile", "link")
    g.add_edge("link", "package")
    assert g.topological_order() == ["compile", "link", "package"]


def test_topological_order_ties_alphabetical():
    assert from_mapping(BUILD).topological_order() == ["fetch", "compile", "docs", "test", "package"]


def test_topological_order_independent_nodes():
    g = DependencyGraph()
    for name in ["c", "a", "b"]:
        g.add_node(name)
    assert g.topological_order() == ["a", "b", "c"]


def test_order_respects_every_edge():
    g = from_mapping({"z": ["a"], "a": ["m"], "m": [], "b": ["z", "m"]})
    order = g.topological_order()
    for node in g.nodes:
        for dep in g.dependencies(node):
            assert order.index(dep) < order.index(node)


def test_cycle_detected_with_path():
    g = from_mapping({"a": ["c"], "b": ["a"], "c": ["b"], "d": []})
    with pytest.raises(CycleError) as info:
        g.topological_order()
    assert info.value.cycle == ["a", "b", "c", "a"]
    assert "a -> b -> c -> a" in str(info.value)


def test_find_cycle_none_for_dag():
    assert from_mapping(BUILD).find_cycle() is None


def test_self_loop_refused():
    with pytest.raises(CycleError):
        DependencyGraph().add_edge("x", "x")


def test_empty_name_refused():
    with pytest.raises(ValueError):
        DependencyGraph().add_node("")


def test_dependencies_and_dependents():
    g = from_mapping(BUILD)
    assert g.dependencies("package") == ["docs", "test"]
    assert g.dependents("fetch") == ["compile", "docs"]
    assert g.dependencies("fetch") == []
    with pytest.raises(KeyError):
        g.dependencies("nope")
    with pytest.raises(KeyError):
        g.dependents("nope")


def test_all_dependencies_transitive():
    g = from_mapping(BUILD)
    assert g.all_dependencies("package") == ["compile", "docs", "fetch", "test"]
    assert g.all_dependencies("fetch") == []


def test_remove_node_drops_edges():
    g = from_mapping(BUILD)
    g.remove_node("test")
    assert "test" not in g
    assert len(g) == 4
    assert g.dependencies("package") == ["docs"]
    assert g.dependents("compile") == []
    with pytest.raises(KeyError):
        g.remove_node("test")


def test_levels():
    assert from_mapping(BUILD).levels() == [["fetch"], ["compile", "docs"], ["test"], ["package"]]
    assert DependencyGraph().levels() == []


def test_levels_use_longest_chain():
    g = from_mapping({"a": [], "b": ["a"], "c": ["a", "b"]})
    assert g.levels() == [["a"], ["b"], ["c"]]


def test_critical_path():
    durations = {"fetch": 1, "compile": 5, "test": 3, "docs": 2, "package": 1}
    assert from_mapping(BUILD).critical_path(durations) == (10, ["fetch", "compile", "test", "package"])


def test_critical_path_prefers_longer_branch():
    durations = {"fetch": 1, "compile": 1, "test": 1, "docs": 9, "package": 1}
    assert from_mapping(BUILD).critical_path(durations) == (11, ["fetch", "docs", "package"])


def test_critical_path_missing_duration_and_empty():
    with pytest.raises(KeyError, match="docs"):
        from_mapping(BUILD).critical_path({"fetch": 1, "compile": 1, "test": 1, "package": 1})
    assert DependencyGraph().critical_path({}) == (0.0, [])
