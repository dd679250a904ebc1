"""planwise: interval sets, priority queues, LRU caches, dependency graphs, calendars and scheduling."""

from .graph import CycleError, DependencyGraph
from .intervals import Interval, IntervalSet
from .lru import LRUCache, memoize
from .pqueue import PriorityQueue

__all__ = ["CycleError", "DependencyGraph", "Interval", "IntervalSet", "LRUCache", "PriorityQueue", "memoize"]
__version__ = "0.9.1"
