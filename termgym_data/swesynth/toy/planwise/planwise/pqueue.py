"""A binary-heap priority queue with stable ordering, updates and removal."""

from __future__ import annotations

from typing import Any, Generic, Hashable, Iterator, Optional, TypeVar

T = TypeVar("T", bound=Hashable)


class EmptyQueue(IndexError):
    """Raised when popping or peeking an empty queue."""


class PriorityQueue(Generic[T]):
    """Items ordered by priority (lowest first unless ``max_first``), FIFO among equals.

    Each item may be in the queue once; :meth:`push` on a present item changes
    its priority. The heap is kept by hand (rather than with ``heapq``) so the
    position of every item is known, which makes updates and removal O(log n).
    """

    def __init__(self, max_first: bool = False) -> None:
        """Create an empty queue; ``max_first`` pops the highest priority first."""
        self.max_first = max_first
        self._heap: list[list[Any]] = []
        self._index: dict[T, int] = {}
        self._counter = 0

    def __len__(self) -> int:
        """Number of queued items."""
        return len(self._heap)

    def __bool__(self) -> bool:
        """True when something is queued."""
        return len(self._heap) > 0

    def __contains__(self, item: object) -> bool:
        """True when ``item`` is queued."""
        return item in self._index

    def _key(self, entry: list[Any]) -> tuple:
        """Sort key of a heap entry ``[priority, sequence, item]``."""
        priority = -entry[0] if self.max_first else entry[0]
        return (priority, entry[1])

    def _swap(self, i: int, j: int) -> None:
        """Exchange two heap slots and keep the index in step."""
        heap = self._heap
        heap[i], heap[j] = heap[j], heap[i]
        self._index[heap[i][2]] = i
        self._index[heap[j][2]] = j

    def _sift_up(self, position: int) -> None:
        """Move an entry up while it beats its parent."""
        while position > 0:
            parent = (position - 1) // 2
            if self._key(self._heap[position]) < self._key(self._heap[parent]):
                self._swap(position, parent)
                position = parent
            else:
                break

    def _sift_down(self, position: int) -> None:
        """Move an entry down while a child beats it."""
        size = len(self._heap)
        while True:
            left = 2 * position + 1
            right = left + 1
            best = position
            if left < size and self._key(self._heap[left]) < self._key(self._heap[best]):
                best = left
            if right < size and self._key(self._heap[right]) < self._key(self._heap[best]):
                best = right
            if best == position:
                return
            self._swap(position, best)
            position = best

    def push(self, item: T, priority: float = 0) -> None:
        """Queue ``item`` or change its priority if it is already queued.

        An item whose priority changes goes behind others of its new priority.
        """
        self._counter += 1
        if item in self._index:
            position = self._index[item]
            self._heap[position][0] = priority
            self._heap[position][1] = self._counter
            self._sift_up(position)
            self._sift_down(self._index[item])
            return
        self._heap.append([priority, self._counter, item])
        self._index[item] = len(self._heap) - 1
        self._sift_up(len(self._heap) - 1)

    def peek(self) -> tuple[T, float]:
        """The next ``(item, priority)`` without removing it."""
        if not self._heap:
            raise EmptyQueue("peek from an empty priority queue")
        entry = self._heap[0]
        return entry[2], entry[0]

    def pop(self) -> tuple[T, float]:
        """Remove and return the next ``(item, priority)``."""
        if not self._heap:
            raise EmptyQueue("pop from an empty priority queue")
        return self._remove_at(0)

    def _remove_at(self, position: int) -> tuple[T, float]:
        """Remove the entry at ``position`` and restore the heap."""
        last = len(self._heap) - 1
        if position != last:
            self._swap(position, last)
        priority, _, item = self._heap.pop()
        del self._index[item]
        if position < len(self._heap):
            self._sift_up(position)
            self._sift_down(position)
        return item, priority

    def remove(self, item: T) -> float:
        """Take ``item`` out wherever it is; returns its priority."""
        if item not in self._index:
            raise KeyError(f"{item!r} is not queued")
        return self._remove_at(self._index[item])[1]

    def priority(self, item: T) -> float:
        """The current priority of a queued item."""
        if item not in self._index:
            raise KeyError(f"{item!r} is not queued")
        return self._heap[self._index[item]][0]

    def pop_many(self, count: int) -> list[T]:
        """Pop up to ``count`` items in order (fewer if the queue runs out)."""
        if count < 0:
            raise ValueError("count must not be negative")
        items = []
        while self._heap and len(items) < count:
            items.append(self.pop()[0])
        return items

    def drain(self) -> Iterator[tuple[T, float]]:
        """Pop everything in order."""
        while self._heap:
            yield self.pop()

    def snapshot(self) -> list[tuple[T, float]]:
        """All ``(item, priority)`` pairs in pop order, leaving the queue unchanged."""
        ordered = sorted(self._heap, key=self._key)
        return [(entry[2], entry[0]) for entry in ordered]


def merge_sorted(*sequences: list, key: Optional[Any] = None) -> list:
    """Merge already-sorted lists into one sorted list (stable: earlier lists win ties)."""
    queue: PriorityQueue[tuple[int, int]] = PriorityQueue()
    pick = key if key is not None else (lambda value: value)
    for number, sequence in enumerate(sequences):
        if sequence:
            queue.push((number, 0), (pick(sequence[0]), number))  # type: ignore[arg-type]
    result = []
    while queue:
        (number, position), _ = queue.pop()
        sequence = sequences[number]
        result.append(sequence[position])
        if position + 1 < len(sequence):
            queue.push((number, position + 1), (pick(sequence[position + 1]), number))  # type: ignore[arg-type]
    return result
