"""Dependency graphs: topological order, cycles, levels and the critical path."""

from __future__ import annotations

from typing import Iterable, Mapping, Optional


class CycleError(ValueError):
    """The graph has a cycle; ``cycle`` lists it, starting and ending on the same node."""

    def __init__(self, cycle: list[str]) -> None:
        """Describe the cycle as ``a -> b -> a``."""
        super().__init__("dependency cycle: " + " -> ".join(cycle))
        self.cycle = cycle


class DependencyGraph:
    """Directed graph where an edge ``a -> b`` means ``a`` must come before ``b``."""

    def __init__(self) -> None:
        """Start with no nodes."""
        self._after: dict[str, set[str]] = {}
        self._before: dict[str, set[str]] = {}

    def add_node(self, node: str) -> None:
        """Add ``node`` if it is not already present."""
        if not node:
            raise ValueError("node names must be non-empty")
        self._after.setdefault(node, set())
        self._before.setdefault(node, set())

    def add_edge(self, first: str, then: str) -> None:
        """Record that ``first`` must come before ``then``; self-loops are refused."""
        if first == then:
            raise CycleError([first, first])
        self.add_node(first)
        self.add_node(then)
        self._after[first].add(then)
        self._before[then].add(first)

    def remove_node(self, node: str) -> None:
        """Remove ``node`` and its edges."""
        if node not in self._after:
            raise KeyError(f"unknown node {node!r}")
        for later in self._after.pop(node):
            self._before[later].discard(node)
        for earlier in self._before.pop(node):
            self._after[earlier].discard(node)

    @property
    def nodes(self) -> list[str]:
        """All nodes in sorted order."""
        return sorted(self._after)

    def __contains__(self, node: object) -> bool:
        """True for a known node."""
        return node in self._after

    def __len__(self) -> int:
        """Number of nodes."""
        return len(self._after)

    def dependencies(self, node: str) -> list[str]:
        """Nodes that must come directly before ``node``, sorted."""
        if node not in self._before:
            raise KeyError(f"unknown node {node!r}")
        return sorted(self._before[node])

    def dependents(self, node: str) -> list[str]:
        """Nodes that directly wait for ``node``, sorted."""
        if node not in self._after:
            raise KeyError(f"unknown node {node!r}")
        return sorted(self._after[node])

    def all_dependencies(self, node: str) -> list[str]:
        """Every node ``node`` transitively depends on, sorted."""
        seen: set[str] = set()
        stack = list(self.dependencies(node))
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            stack.extend(self._before[current])
        return sorted(seen)

    def find_cycle(self) -> Optional[list[str]]:
        """One cycle as a node list that starts and ends on the same node, or None."""
        state: dict[str, int] = {}
        path: list[str] = []

        def visit(node: str) -> Optional[list[str]]:
            """Depth-first search; state 1 = on the current path, 2 = finished."""
            state[node] = 1
            path.append(node)
            for later in sorted(self._after[node]):
                if state.get(later) == 1:
                    return path[path.index(later):] + [later]
                if later not in state:
                    found = visit(later)
                    if found:
                        return found
            path.pop()
            state[node] = 2
            return None

        for node in self.nodes:
            if node not in state:
                cycle = visit(node)
                if cycle:
                    return cycle
        return None

    def topological_order(self) -> list[str]:
        """Every node after all of its dependencies; ties are broken alphabetically.

        Raises :class:`CycleError` naming a cycle when no order exists.
        """
        waiting = {node: len(before) for node, before in self._before.items()}
        ready = sorted(node for node, count in waiting.items() if count == 0)
        order: list[str] = []
        while ready:
            node = ready.pop(0)
            order.append(node)
            for later in sorted(self._after[node]):
                waiting[later] -= 1
                if waiting[later] == 0:
                    ready.append(later)
            ready.sort()
        if len(order) != len(self._after):
            raise CycleError(self.find_cycle() or [])
        return order

    def levels(self) -> list[list[str]]:
        """Nodes grouped into waves that can run in parallel: wave 0 has no dependencies."""
        depth: dict[str, int] = {}
        for node in self.topological_order():
            before = self._before[node]
            depth[node] = 1 + max(depth[b] for b in before) if before else 0
        waves: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
        for node in sorted(depth):
            waves[depth[node]].append(node)
        return waves

    def critical_path(self, durations: Mapping[str, float]) -> tuple[float, list[str]]:
        """Length and nodes of the longest duration-weighted chain.

        Every node needs a duration; missing ones raise ``KeyError`` naming the node.
        """
        finish: dict[str, float] = {}
        previous: dict[str, Optional[str]] = {}
        for node in self.topological_order():
            if node not in durations:
                raise KeyError(f"no duration for {node!r}")
            best_before: Optional[str] = None
            start = 0.0
            for earlier in sorted(self._before[node]):
                if finish[earlier] > start:
                    start = finish[earlier]
                    best_before = earlier
            finish[node] = start + durations[node]
            previous[node] = best_before
        if not finish:
            return 0.0, []
        end = max(sorted(finish), key=lambda n: finish[n])
        chain = [end]
        while previous[chain[-1]] is not None:
            chain.append(previous[chain[-1]])  # type: ignore[arg-type]
        chain.reverse()
        return finish[end], chain


def from_mapping(requirements: Mapping[str, Iterable[str]]) -> DependencyGraph:
    """Build a graph from ``{node: [what it needs first, ...]}``."""
    graph = DependencyGraph()
    for node, needs in requirements.items():
        graph.add_node(node)
        for need in needs:
            graph.add_edge(need, node)
    return graph
