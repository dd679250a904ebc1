"""A fixed-size ring buffer and a token-bucket rate limiter."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Optional


class RingBuffer:
    """Keeps the last ``capacity`` values appended; older ones are overwritten."""

    def __init__(self, capacity: int) -> None:
        """Create an empty buffer."""
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._slots: list[Any] = [None] * capacity
        self._start = 0
        self._size = 0
        self.dropped = 0

    def __len__(self) -> int:
        """Number of values held."""
        return self._size

    def is_full(self) -> bool:
        """True once ``capacity`` values are held."""
        return self._size == self.capacity

    def append(self, value: Any) -> Optional[Any]:
        """Add ``value``; returns the value it pushed out, if any."""
        if self._size < self.capacity:
            self._slots[(self._start + self._size) % self.capacity] = value
            self._size += 1
            return None
        evicted = self._slots[self._start]
        self._slots[self._start] = value
        self._start = (self._start + 1) % self.capacity
        self.dropped += 1
        return evicted

    def extend(self, values: Any) -> None:
        """Append each of ``values`` in order."""
        for value in values:
            self.append(value)

    def popleft(self) -> Any:
        """Remove and return the oldest value."""
        if self._size == 0:
            raise IndexError("pop from an empty ring buffer")
        value = self._slots[self._start]
        self._slots[self._start] = None
        self._start = (self._start + 1) % self.capacity
        self._size -= 1
        return value

    def __getitem__(self, index: int) -> Any:
        """Value by age: 0 is the oldest, -1 the newest."""
        if index < 0:
            index += self._size
        if not 0 <= index < self._size:
            raise IndexError(f"ring buffer index out of range: {index}")
        return self._slots[(self._start + index) % self.capacity]

    def __iter__(self) -> Iterator[Any]:
        """Values from oldest to newest."""
        for i in range(self._size):
            yield self._slots[(self._start + i) % self.capacity]

    def to_list(self) -> list[Any]:
        """Values from oldest to newest as a list."""
        return list(self)

    def mean(self) -> Optional[float]:
        """Average of the held values, or None when empty."""
        if self._size == 0:
            return None
        return sum(self) / self._size

    def moving_average(self, window: int) -> Optional[float]:
        """Average of the newest ``window`` values (fewer when not yet available)."""
        if window < 1:
            raise ValueError("window must be at least 1")
        if self._size == 0:
            return None
        recent = self.to_list()[-window:]
        return sum(recent) / len(recent)


class TokenBucket:
    """Allows bursts of up to ``capacity`` actions, refilled at ``rate`` tokens per second.

    Time comes from ``clock`` (seconds, monotonic) so tests and simulations are
    deterministic.
    """

    def __init__(self, rate: float, capacity: float, clock: Callable[[], float]) -> None:
        """Start full."""
        if rate <= 0:
            raise ValueError(f"rate must be positive, got {rate}")
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.rate = rate
        self.capacity = capacity
        self.clock = clock
        self.tokens = float(capacity)
        self._last = clock()

    def _refill(self) -> None:
        """Add the tokens earned since the last call, up to the capacity."""
        now = self.clock()
        elapsed = now - self._last
        if elapsed > 0:
            self.tokens = min(self.capacity, self.tokens + elapsed * self.rate)
        self._last = now

    def try_acquire(self, tokens: float = 1) -> bool:
        """Take ``tokens`` if available now; False (and nothing taken) otherwise."""
        if tokens <= 0:
            raise ValueError("tokens must be positive")
        if tokens > self.capacity:
            raise ValueError(f"cannot take {tokens} tokens from a bucket of {self.capacity}")
        self._refill()
        if self.tokens >= tokens:
            self.tokens -= tokens
            return True
        return False

    def wait_time(self, tokens: float = 1) -> float:
        """Seconds until ``tokens`` would be available (0 when they already are)."""
        self._refill()
        missing = tokens - self.tokens
        if missing <= 0:
            return 0.0
        return missing / self.rate
