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

import threading
import time
from collections import OrderedDict
from typing import Any

from termgym.tasks.liveweb.noise import DAY, EPOCH, HISTORY, HOUR, TICK, stable_hash
from termgym.tasks.liveweb.sites import SITES
from termgym.tasks.liveweb.sites.base import Site


#: Simulated time at which every world's history is anchored: 2026-01-01T00:00:00Z.
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
        """Records of ``"site/collection"`` at time ``t``; ``"site/collection@T"`` is the collection as it
        was at the fixed moment ``T`` (what history pages show), whatever ``t``."""
        src, _, at = src.partition("@")
        if at:
            t = int(at)
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


#: The time constants and ``stable_hash`` are re-exported: they live in :mod:`.noise`.
__all__ = ["DAY", "EPOCH", "HISTORY", "HOUR", "TICK", "SimClock", "World", "stable_hash", "tick_of"]
