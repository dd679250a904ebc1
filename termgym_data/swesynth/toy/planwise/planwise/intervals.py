"""Half-open numeric intervals and sets of them."""

from __future__ import annotations

from typing import Iterable, Iterator, Optional, Union

Number = Union[int, float]


class Interval:
    """The half-open range ``[start, end)``; ``start`` must not exceed ``end``."""

    __slots__ = ("start", "end")

    def __init__(self, start: Number, end: Number) -> None:
        """Create ``[start, end)``; an empty interval has ``start == end``."""
        if start > end:
            raise ValueError(f"interval start {start} is after end {end}")
        self.start = start
        self.end = end

    @property
    def length(self) -> Number:
        """``end - start``."""
        return self.end - self.start

    def is_empty(self) -> bool:
        """True when the interval contains no point."""
        return self.start == self.end

    def contains(self, point: Number) -> bool:
        """True when ``start <= point < end``."""
        return self.start <= point < self.end

    def overlaps(self, other: Interval) -> bool:
        """True when the two intervals share at least one point."""
        return self.start < other.end and other.start < self.end

    def touches(self, other: Interval) -> bool:
        """True when the intervals overlap or are adjacent (one ends where the other starts)."""
        return self.start <= other.end and other.start <= self.end

    def intersection(self, other: Interval) -> Optional[Interval]:
        """The common part, or None when they do not overlap."""
        if not self.overlaps(other):
            return None
        return Interval(max(self.start, other.start), min(self.end, other.end))

    def __eq__(self, other: object) -> bool:
        """Equal when both bounds match."""
        if not isinstance(other, Interval):
            return NotImplemented
        return self.start == other.start and self.end == other.end

    def __lt__(self, other: Interval) -> bool:
        """Order by start, then by end."""
        return (self.start, self.end) < (other.start, other.end)

    def __hash__(self) -> int:
        """Hash of the bounds."""
        return hash((self.start, self.end))

    def __repr__(self) -> str:
        """``[1, 5)``."""
        return f"[{self.start}, {self.end})"


class IntervalSet:
    """A set of numbers stored as sorted, disjoint, non-adjacent intervals."""

    def __init__(self, intervals: Iterable[Interval] = ()) -> None:
        """Start with the union of ``intervals``."""
        self._items: list[Interval] = []
        for interval in intervals:
            self.add(interval)

    def __iter__(self) -> Iterator[Interval]:
        """The stored intervals in order."""
        return iter(list(self._items))

    def __len__(self) -> int:
        """Number of disjoint intervals."""
        return len(self._items)

    def __bool__(self) -> bool:
        """False for the empty set."""
        return bool(self._items)

    def __eq__(self, other: object) -> bool:
        """Equal when they cover exactly the same points."""
        if not isinstance(other, IntervalSet):
            return NotImplemented
        return self._items == other._items

    def __repr__(self) -> str:
        """``IntervalSet([1, 3), [5, 8))``."""
        return "IntervalSet(" + ", ".join(repr(i) for i in self._items) + ")"

    def add(self, interval: Interval) -> None:
        """Add ``interval``, merging every stored interval it overlaps or touches."""
        if interval.is_empty():
            return
        start, end = interval.start, interval.end
        kept: list[Interval] = []
        for item in self._items:
            if item.touches(Interval(start, end)):
                start = min(start, item.start)
                end = max(end, item.end)
            else:
                kept.append(item)
        kept.append(Interval(start, end))
        kept.sort()
        self._items = kept

    def remove(self, interval: Interval) -> None:
        """Subtract ``interval``, splitting stored intervals that straddle it."""
        if interval.is_empty():
            return
        result: list[Interval] = []
        for item in self._items:
            if not item.overlaps(interval):
                result.append(item)
                continue
            if item.start < interval.start:
                result.append(Interval(item.start, interval.start))
            if interval.end < item.end:
                result.append(Interval(interval.end, item.end))
        self._items = result

    def __contains__(self, point: object) -> bool:
        """True when some stored interval contains ``point`` (binary search)."""
        low, high = 0, len(self._items) - 1
        while low <= high:
            middle = (low + high) // 2
            item = self._items[middle]
            if point < item.start:  # type: ignore[operator]
                high = middle - 1
            elif point >= item.end:  # type: ignore[operator]
                low = middle + 1
            else:
                return True
        return False

    def total_length(self) -> Number:
        """Sum of the lengths of the stored intervals."""
        return sum(item.length for item in self._items)

    def union(self, other: IntervalSet) -> IntervalSet:
        """Points in either set."""
        result = IntervalSet(self._items)
        for item in other:
            result.add(item)
        return result

    def intersection(self, other: IntervalSet) -> IntervalSet:
        """Points in both sets, by walking the two sorted lists together."""
        result: list[Interval] = []
        i = j = 0
        mine, theirs = self._items, other._items
        while i < len(mine) and j < len(theirs):
            common = mine[i].intersection(theirs[j])
            if common is not None:
                result.append(common)
            if mine[i].end < theirs[j].end:
                i += 1
            else:
                j += 1
        out = IntervalSet()
        out._items = result
        return out

    def difference(self, other: IntervalSet) -> IntervalSet:
        """Points in this set but not in ``other``."""
        result = IntervalSet(self._items)
        for item in other:
            result.remove(item)
        return result

    def gaps(self, within: Optional[Interval] = None) -> list[Interval]:
        """Uncovered stretches between stored intervals, or inside ``within`` when given."""
        if within is None:
            return [Interval(a.end, b.start) for a, b in zip(self._items, self._items[1:])]
        free = IntervalSet([within])
        for item in self._items:
            free.remove(item)
        return list(free)

    def span(self) -> Optional[Interval]:
        """From the first start to the last end, or None when empty."""
        if not self._items:
            return None
        return Interval(self._items[0].start, self._items[-1].end)

    def first_fit(self, length: Number, within: Interval) -> Optional[Interval]:
        """The earliest free stretch of ``length`` inside ``within`` (for booking a slot)."""
        if length <= 0:
            raise ValueError(f"length must be positive, got {length}")
        for gap in self.gaps(within):
            if gap.length >= length:
                return Interval(gap.start, gap.start + length)
        return None
