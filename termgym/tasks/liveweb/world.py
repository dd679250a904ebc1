"""The simulated live web world: deterministic from a seed, evolving with a simulated clock.

A :class:`World` is a pure function of ``(seed, time)``: every number a site shows is computed
from hash-based noise at the requested simulated time, so any moment can be looked at directly
(no replay from the start), two processes agree on what the world looked like at 12:03, and a
grader can recompute the state at submission time. Time is quantised to ``TICK`` seconds: the
world is constant within a tick, which is what makes grading reproducible.

Each episode owns a :class:`SimClock`: simulated time starts at the episode's start and advances
with real time (``speed`` simulated seconds per real second, 0 to freeze it) and on demand
(:meth:`SimClock.advance`; LIVEWEB also advances it per agent command when ``step_seconds`` is set).
"""

from __future__ import annotations

import functools
import math
import threading
import time
import zlib
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from termgym.tasks.liveweb.sites.base import Site

#: Simulated time at which every world's history is anchored: 2026-01-01T00:00:00Z.
EPOCH = 1767225600
#: The world is constant within a tick (seconds of simulated time).
TICK = 60
DAY = 86400
HOUR = 3600
#: How long the simulated history after a world's anchor is: LIVEWEB episodes start anywhere in it.
HISTORY = 120 * DAY

_MASK = (1 << 64) - 1


def stable_hash(*parts: object) -> int:
    """A 64-bit hash of ``parts`` that is the same in every process (unlike ``hash(str)``)."""
    text = "\x1f".join(str(p) for p in parts).encode()
    return _mix((zlib.crc32(text) << 32) ^ zlib.adler32(text) ^ len(text))


def _mix(x: int) -> int:
    # splitmix64's finaliser: cheap and well distributed, enough for noise and choices.
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


@functools.lru_cache(maxsize=1 << 18)
def unit(key: int, i: int) -> float:
    """Uniform noise in [-1, 1) for lattice point ``i`` of the stream ``key``.

    Cached: lattice points change slowly (the fastest octave every ten minutes), so consecutive
    ticks of a world mostly reuse them, which makes a tick several times cheaper to compute.
    """
    return _mix(key ^ ((i * 0xD1B54A32D192ED03) & _MASK)) / 2**63 - 1.0


def unit01(key: int, i: int) -> float:
    """Uniform noise in [0, 1) for lattice point ``i`` of the stream ``key``."""
    return _mix(key ^ ((i * 0xD1B54A32D192ED03) & _MASK)) / 2**64


def value_noise(key: int, x: float) -> float:
    """Smooth noise in [-1, 1]: random values at integers, smoothstep-interpolated between."""
    i = math.floor(x)
    f = x - i
    f = f * f * (3 - 2 * f)
    a = unit(key, i)
    return a + (unit(key, i + 1) - a) * f


class HashRandom:
    """A tiny counter-based RNG (``choice``, ``random``, ``uniform``, ``randint``) for per-item data.

    Seeding :class:`random.Random` costs more than generating a whole story or book with this,
    and items are generated lazily by index, thousands per world.
    """

    __slots__ = ("key", "i")

    def __init__(self, key: int) -> None:
        self.key, self.i = key & _MASK, 0

    def _next(self) -> int:
        self.i += 1
        return _mix(self.key ^ ((self.i * 0x9E3779B97F4A7C15) & _MASK))

    def random(self) -> float:
        return self._next() / 2**64

    def choice(self, seq):
        return seq[self._next() % len(seq)]

    def uniform(self, a: float, b: float) -> float:
        return a + (b - a) * self.random()

    def randint(self, a: int, b: int) -> int:
        return a + self._next() % (b - a + 1)


#: (period in seconds, relative amplitude): slow trends down to minute-scale jitter.
OCTAVES = ((21 * DAY, 1.0), (5 * DAY, 0.55), (DAY, 0.3), (6 * HOUR, 0.16), (HOUR, 0.07), (10 * 60, 0.025))


def wander(key: int, t: float, volatility: float) -> float:
    """Fractal noise at time ``t``: the log-return of a price-like series relative to its base."""
    total = 0.0
    for o, (period, amp) in enumerate(OCTAVES):
        total += amp * value_noise(key + o, t / period)
    return volatility * total


def sig(x: float, digits: int = 6) -> float:
    """Round to ``digits`` significant digits: the canonical precision of a world number."""
    if x == 0 or not math.isfinite(x):
        return x
    return round(x, digits - 1 - math.floor(math.log10(abs(x))))


class SimClock:
    """Simulated time for one episode.

    ``now()`` = ``start`` + ``speed`` × real seconds since creation + everything :meth:`advance`
    added. Thread-safe (the world server reads it from its own thread).
    """

    def __init__(self, start: float, *, speed: float = 1.0) -> None:
        if speed < 0:
            raise ValueError(f"SimClock speed must be >= 0 (simulated seconds per real second), got {speed}")
        self.start = float(start)
        self.speed = float(speed)
        self._real0 = time.monotonic()
        self._offset = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self.start + self._offset + self.speed * (time.monotonic() - self._real0)

    def advance(self, seconds: float) -> float:
        """Move simulated time forward by ``seconds`` (>= 0); returns the new time."""
        if seconds < 0:
            raise ValueError("time only moves forward: advance() needs seconds >= 0")
        with self._lock:
            self._offset += seconds
        return self.now()

    def restart(self) -> None:
        """Start counting real time from now (call when the episode actually begins)."""
        with self._lock:
            self._real0 = time.monotonic()
            self._offset = 0.0


def tick_of(t: float) -> int:
    """The start (simulated seconds) of the tick containing ``t``."""
    return int(t // TICK) * TICK


class World:
    """All sites of one world seed. ``records(site, t)`` gives a site's exact data at time ``t``.

    The seed fixes the cast (coin, company, subnet names; base prices); ``variant`` perturbs
    everything that moves: every price path, story and book is drawn from noise keyed by
    ``(seed, variant)`` (:meth:`noise_key`), so two variants of one seed list the same coins at
    different prices. Variant 0 is the canonical world of the seed; LIVEWEB draws a fresh variant
    per episode. Per-site static data is generated once per world; time-dependent records are
    cached per tick (a small LRU, since an episode looks at a handful of moments).
    """

    def __init__(self, seed: int, sites: dict[str, Site] | None = None, *, variant: int = 0) -> None:
        from termgym.tasks.liveweb.sites import SITES

        self.seed = int(seed)
        self.variant = int(variant)
        self.sites: dict[str, Site] = dict(sites or SITES)
        #: Each world has its own "now" anchor so seeds differ in season, weekday and history.
        self.base_time = EPOCH + (stable_hash("base", self.seed) % 360) * DAY + 9 * HOUR
        self._static: dict[str, Any] = {}
        self._cache: OrderedDict[tuple[str, int], dict[str, list[dict]]] = OrderedDict()
        self._memo: OrderedDict[tuple, Any] = OrderedDict()
        self._lock = threading.Lock()

    def noise_key(self, *parts: object) -> int:
        """The key of a noise stream of this world (``parts`` name what moves: a coin, a story)."""
        if self.variant:
            return stable_hash(self.seed, "variant", self.variant, *parts)
        return stable_hash(self.seed, *parts)

    def static(self, site: str) -> Any:
        """The site's time-independent data for this world (generated on first use)."""
        with self._lock:
            data = self._static.get(site)
        if data is None:
            data = self.sites[site].generate(self)
            with self._lock:
                data = self._static.setdefault(site, data)
        return data

    def records(self, site: str, t: float) -> dict[str, list[dict]]:
        """``{collection: [record, ...]}`` for ``site`` at the tick containing ``t``. Do not mutate."""
        key = (site, tick_of(t))
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        data = self.sites[site].records(self, self.static(site), key[1])
        with self._lock:
            self._cache[key] = data
            while len(self._cache) > 64:
                self._cache.popitem(last=False)
        return data

    def memo(self, key: tuple, make):
        """A value derived from this world's data (e.g. a serialised API response), cached like records."""
        with self._lock:
            hit = self._memo.get(key)
            if hit is not None:
                self._memo.move_to_end(key)
                return hit
        value = make()
        with self._lock:
            self._memo[key] = value
            while len(self._memo) > 64:
                self._memo.popitem(last=False)
        return value

    def collection(self, src: str, t: float) -> list[dict]:
        """Records of ``"site/collection"`` at time ``t``."""
        site, _, name = src.partition("/")
        try:
            return self.records(site, t)[name]
        except KeyError:
            raise KeyError(f"world has no collection {src!r}") from None

    def site_by_host(self, host: str) -> Site | None:
        for site in self.sites.values():
            if site.host == host:
                return site
        return None
