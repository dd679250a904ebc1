"""Time and noise: the primitives the LIVEWEB world and its sites are computed from.

Every number in the world is a pure function of a hash key and a simulated time: ``stable_hash``
names a stream, ``value_noise``/``wander`` move it smoothly over time, ``HashRandom`` draws from it
like :class:`random.Random` but by position. Sites import these; :mod:`.world` composes the sites.
"""

from __future__ import annotations

import functools
import math
import zlib

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
