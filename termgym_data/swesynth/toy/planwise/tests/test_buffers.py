import pytest

from planwise.buffers import RingBuffer, TokenBucket


def test_ring_append_until_full():
    ring = RingBuffer(3)
    assert ring.append(1) is None
    ring.extend([2, 3])
    assert ring.is_full()
    assert ring.to_list() == [1, 2, 3]


def test_ring_overwrites_oldest():
    ring = RingBuffer(3)
    ring.extend([1, 2, 3])
    assert ring.append(4) == 1
    assert ring.append(5) == 2
    assert ring.to_list() == [3, 4, 5]
    assert ring.dropped == 2
    assert len(ring) == 3


def test_ring_indexing():
    ring = RingBuffer(3)
    ring.extend([1, 2, 3, 4])
    assert ring[0] == 2
    assert ring[-1] == 4
    assert ring[-3] == 2
    with pytest.raises(IndexError):
        ring[3]
    with pytest.raises(IndexError):
        ring[-4]


def test_ring_popleft():
    ring = RingBuffer(2)
    ring.extend([1, 2, 3])
    assert ring.popleft() == 2
    assert ring.to_list() == [3]
    ring.append(9)
    assert ring.to_list() == [3, 9]
    ring.popleft()
    ring.popleft()
    with pytest.raises(IndexError):
        ring.popleft()


def test_ring_mean_and_moving_average():
    ring = RingBuffer(4)
    assert ring.mean() is None
    assert ring.moving_average(2) is None
    ring.extend([2, 4, 6, 8, 10])
    assert ring.mean() == 7
    assert ring.moving_average(2) == 9
    assert ring.moving_average(10) == 7
    with pytest.raises(ValueError):
        ring.moving_average(0)


def test_ring_capacity_validation():
    with pytest.raises(ValueError):
        RingBuffer(0)


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_bucket_allows_burst_then_refuses():
    clock = Clock()
    bucket = TokenBucket(rate=1, capacity=3, clock=clock)
    assert [bucket.try_acquire() for _ in range(4)] == [True, True, True, False]


def test_bucket_refills_over_time_up_to_capacity():
    clock = Clock()
    bucket = TokenBucket(rate=2, capacity=3, clock=clock)
    for _ in range(3):
        bucket.try_acquire()
    clock.t = 1.0
    assert bucket.try_acquire(2)
    assert not bucket.try_acquire()
    clock.t = 100.0
    assert bucket.try_acquire(3)
    assert not bucket.try_acquire(1)


def test_bucket_exact_tokens_available():
    clock = Clock()
    bucket = TokenBucket(rate=1, capacity=1, clock=clock)
    bucket.try_acquire()
    clock.t = 1.0
    assert bucket.try_acquire()


def test_bucket_wait_time():
    clock = Clock()
    bucket = TokenBucket(rate=4, capacity=2, clock=clock)
    assert bucket.wait_time() == 0.0
    bucket.try_acquire(2)
    assert bucket.wait_time() == 0.25
    assert bucket.wait_time(2) == 0.5
    clock.t = 0.25
    assert bucket.wait_time() == 0.0


@pytest.mark.parametrize("rate, capacity", [(0, 1), (-1, 1), (1, 0.5)])
def test_bucket_validation(rate, capacity):
    with pytest.raises(ValueError):
        TokenBucket(rate, capacity, Clock())


def test_bucket_acquire_validation():
    bucket = TokenBucket(1, 2, Clock())
    with pytest.raises(ValueError):
        bucket.try_acquire(0)
    with pytest.raises(ValueError, match="bucket of 2"):
        bucket.try_acquire(3)


def test_ring_of_one_keeps_only_newest():
    ring = RingBuffer(1)
    ring.extend([1, 2, 3])
    assert ring.to_list() == [3]
    assert ring.dropped == 2
