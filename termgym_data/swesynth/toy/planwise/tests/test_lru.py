import pytest

from planwise.lru import CacheStats, LRUCache, memoize


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_get_put_and_miss_default():
    cache = LRUCache(2)
    cache.put("a", 1)
    assert cache.get("a") == 1
    assert cache.get("zz") is None
    assert cache.get("zz", "dflt") == "dflt"


def test_evicts_least_recently_used():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.get("a")
    cache.put("c", 3)
    assert cache.keys() == ["a", "c"]
    assert cache.stats.evictions == 1


def test_put_existing_refreshes_recency_without_evicting():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("a", 10)
    cache.put("c", 3)
    assert cache.keys() == ["a", "c"]
    assert cache.get("a") == 10


def test_capacity_one():
    cache = LRUCache(1)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.keys() == ["b"]
    assert len(cache) == 1


def test_stats_and_hit_rate():
    cache = LRUCache(4)
    assert cache.stats.hit_rate() == 0.0
    cache.put("a", 1)
    cache.get("a")
    cache.get("a")
    cache.get("b")
    assert (cache.stats.hits, cache.stats.misses, cache.stats.lookups) == (2, 1, 3)
    assert cache.stats.hit_rate() == 0.6667
    assert repr(CacheStats()) == "CacheStats(hits=0, misses=0, evictions=0, expirations=0)"


def test_contains_does_not_touch_recency_or_stats():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert "a" in cache and "x" not in cache
    cache.put("c", 3)
    assert "a" not in cache
    assert cache.stats.lookups == 0


def test_on_evict_callback():
    seen = []
    cache = LRUCache(1, on_evict=lambda k, v: seen.append((k, v)))
    cache.put("a", 1)
    cache.put("b", 2)
    assert seen == [("a", 1)]


@pytest.mark.parametrize("kwargs", [{"capacity": 0}, {"ttl": 0, "clock": FakeClock()}, {"ttl": 5}])
def test_bad_configuration(kwargs):
    with pytest.raises(ValueError):
        LRUCache(**kwargs)


def test_ttl_expiry_boundary():
    clock = FakeClock()
    cache = LRUCache(4, ttl=10, clock=clock)
    cache.put("a", 1)
    clock.now += 9.9
    assert cache.get("a") == 1
    clock.now += 0.1
    assert "a" not in cache
    assert cache.get("a") is None
    assert cache.stats.expirations == 1
    assert len(cache) == 0


def test_put_resets_ttl():
    clock = FakeClock()
    cache = LRUCache(4, ttl=10, clock=clock)
    cache.put("a", 1)
    clock.now += 8
    cache.put("a", 2)
    clock.now += 8
    assert cache.get("a") == 2


def test_purge_expired():
    clock = FakeClock()
    cache = LRUCache(4, ttl=5, clock=clock)
    cache.put("old", 1)
    clock.now += 3
    cache.put("new", 2)
    clock.now += 3
    assert cache.purge_expired() == 1
    assert cache.keys() == ["new"]


def test_pop_and_peek_oldest():
    cache = LRUCache(3)
    assert cache.peek_oldest() is None
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.peek_oldest() == "a"
    assert cache.pop("a") == 1
    assert cache.pop("a", "gone") == "gone"
    with pytest.raises(KeyError):
        cache.pop("a")


def test_resize_evicts_oldest():
    seen = []
    cache = LRUCache(4, on_evict=lambda k, v: seen.append(k))
    for key in "abcd":
        cache.put(key, key)
    assert cache.resize(2) == ["a", "b"]
    assert seen == ["a", "b"]
    assert cache.capacity == 2
    with pytest.raises(ValueError):
        cache.resize(0)


def test_clear_keeps_stats():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.get("a")
    cache.clear()
    assert len(cache) == 0
    assert cache.stats.hits == 1


def test_memoize_caches_calls():
    calls = []

    @memoize(capacity=2)
    def square(x, offset=0):
        calls.append(x)
        return x * x + offset

    assert square(3) == 9
    assert square(3) == 9
    assert square(3, offset=1) == 10
    assert calls == [3, 3]
    assert square.__name__ == "square"
    square.cache_clear()
    square(3)
    assert calls == [3, 3, 3]


def test_memoize_respects_capacity():
    calls = []

    @memoize(capacity=1)
    def ident(x):
        calls.append(x)
        return x

    ident(1)
    ident(2)
    ident(1)
    assert calls == [1, 2, 1]
    assert ident.cache.stats.misses == 3


def test_clock_without_ttl_never_expires():
    clock = FakeClock()
    cache = LRUCache(2, clock=clock)
    cache.put("a", 1)
    clock.now += 1e9
    assert cache.get("a") == 1
    assert cache.purge_expired() == 0


def test_sub_second_ttl():
    clock = FakeClock()
    cache = LRUCache(2, ttl=0.5, clock=clock)
    cache.put("a", 1)
    clock.now += 0.4
    assert cache.get("a") == 1
    clock.now += 0.1
    assert cache.get("a") is None
