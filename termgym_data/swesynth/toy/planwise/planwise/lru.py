"""A least-recently-used cache with statistics, expiry and a memoizing decorator."""

from __future__ import annotations

import functools
from collections import OrderedDict
from typing import Any, Callable, Hashable, Optional

_MISSING = object()


class CacheStats:
    """Counters of a cache's life."""

    def __init__(self) -> None:
        """All counters start at zero."""
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.expirations = 0

    @property
    def lookups(self) -> int:
        """Hits plus misses."""
        return self.hits + self.misses

    def hit_rate(self) -> float:
        """Share of lookups that hit, 0.0 before the first lookup, rounded to 4 places."""
        if self.lookups == 0:
            return 0.0
        return round(self.hits / self.lookups, 4)

    def __repr__(self) -> str:
        """One-line summary."""
        return (f"CacheStats(hits={self.hits}, misses={self.misses}, "
                f"evictions={self.evictions}, expirations={self.expirations})")


class LRUCache:
    """A mapping of at most ``capacity`` entries that forgets the least recently used.

    With ``ttl`` and a ``clock`` (a function returning the current time in
    seconds) entries expire ``ttl`` seconds after they were stored.
    """

    def __init__(self, capacity: int = 128, ttl: Optional[float] = None,
                 clock: Optional[Callable[[], float]] = None,
                 on_evict: Optional[Callable[[Hashable, Any], None]] = None) -> None:
        """Create an empty cache."""
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        if ttl is not None and ttl <= 0:
            raise ValueError(f"ttl must be positive, got {ttl}")
        if ttl is not None and clock is None:
            raise ValueError("a ttl needs a clock")
        self.capacity = capacity
        self.ttl = ttl
        self.clock = clock
        self.on_evict = on_evict
        self.stats = CacheStats()
        self._data: OrderedDict[Hashable, tuple[Any, Optional[float]]] = OrderedDict()

    def __len__(self) -> int:
        """Number of stored entries (expired ones included until touched)."""
        return len(self._data)

    def _expired(self, stamp: Optional[float]) -> bool:
        """True when an entry stored at ``stamp`` has outlived the ttl."""
        if self.ttl is None or stamp is None or self.clock is None:
            return False
        return self.clock() - stamp >= self.ttl

    def get(self, key: Hashable, default: Any = None) -> Any:
        """The value for ``key`` (now most recently used) or ``default``."""
        entry = self._data.get(key, _MISSING)
        if entry is _MISSING:
            self.stats.misses += 1
            return default
        value, stamp = entry  # type: ignore[misc]
        if self._expired(stamp):
            del self._data[key]
            self.stats.expirations += 1
            self.stats.misses += 1
            return default
        self._data.move_to_end(key)
        self.stats.hits += 1
        return value

    def __contains__(self, key: object) -> bool:
        """True for a present, unexpired key; does not count as a use."""
        entry = self._data.get(key, _MISSING)  # type: ignore[arg-type]
        return entry is not _MISSING and not self._expired(entry[1])  # type: ignore[index]

    def put(self, key: Hashable, value: Any) -> None:
        """Store ``value``, evicting the least recently used entry when full."""
        stamp = self.clock() if self.clock is not None else None
        if key in self._data:
            self._data.move_to_end(key)
        self._data[key] = (value, stamp)
        while len(self._data) > self.capacity:
            old_key, (old_value, _) = self._data.popitem(last=False)
            self.stats.evictions += 1
            if self.on_evict is not None:
                self.on_evict(old_key, old_value)

    def pop(self, key: Hashable, default: Any = _MISSING) -> Any:
        """Remove ``key`` and return its value; ``KeyError`` without a default."""
        if key in self._data:
            return self._data.pop(key)[0]
        if default is _MISSING:
            raise KeyError(key)
        return default

    def peek_oldest(self) -> Optional[Hashable]:
        """The key that would be evicted next, or None when empty."""
        return next(iter(self._data), None)

    def keys(self) -> list[Hashable]:
        """Keys from least to most recently used."""
        return list(self._data)

    def resize(self, capacity: int) -> list[Hashable]:
        """Change the capacity; returns the keys evicted to fit, oldest first."""
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        evicted = []
        while len(self._data) > capacity:
            key, (value, _) = self._data.popitem(last=False)
            evicted.append(key)
            self.stats.evictions += 1
            if self.on_evict is not None:
                self.on_evict(key, value)
        return evicted

    def purge_expired(self) -> int:
        """Drop every expired entry now; returns how many were dropped."""
        stale = [key for key, (_, stamp) in self._data.items() if self._expired(stamp)]
        for key in stale:
            del self._data[key]
        self.stats.expirations += len(stale)
        return len(stale)

    def clear(self) -> None:
        """Remove everything; statistics are kept."""
        self._data.clear()


def memoize(capacity: int = 128) -> Callable[[Callable], Callable]:
    """Decorator caching a function's results by its positional and keyword arguments.

    The wrapper exposes ``cache`` (the :class:`LRUCache`) and ``cache_clear()``.
    """

    def decorate(function: Callable) -> Callable:
        """Wrap ``function`` with its own cache."""
        cache = LRUCache(capacity)

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            """Look the call up before computing it."""
            key = (args, tuple(sorted(kwargs.items())))
            result = cache.get(key, _MISSING)
            if result is _MISSING:
                result = function(*args, **kwargs)
                cache.put(key, result)
            return result

        wrapper.cache = cache  # type: ignore[attr-defined]
        wrapper.cache_clear = cache.clear  # type: ignore[attr-defined]
        return wrapper

    return decorate
