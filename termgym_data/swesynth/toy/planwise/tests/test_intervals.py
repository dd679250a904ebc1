import pytest

from planwise.intervals import Interval, IntervalSet


def iv(a, b):
    return Interval(a, b)


def spans(s):
    return [(i.start, i.end) for i in s]


def test_interval_basics():
    i = iv(2, 5)
    assert i.length == 3
    assert not i.is_empty()
    assert iv(3, 3).is_empty()
    assert repr(i) == "[2, 5)"


def test_interval_rejects_reversed_bounds():
    with pytest.raises(ValueError, match="after end"):
        iv(5, 2)


@pytest.mark.parametrize("point, inside", [(1, False), (2, True), (4.9, True), (5, False)])
def test_contains_is_half_open(point, inside):
    assert iv(2, 5).contains(point) is inside


@pytest.mark.parametrize(
    "a, b, overlaps, touches",
    [((0, 2), (2, 4), False, True), ((0, 3), (2, 4), True, True), ((0, 1), (2, 4), False, False),
     ((1, 5), (2, 3), True, True)],
)
def test_overlaps_and_touches(a, b, overlaps, touches):
    assert iv(*a).overlaps(iv(*b)) is overlaps
    assert iv(*b).overlaps(iv(*a)) is overlaps
    assert iv(*a).touches(iv(*b)) is touches


def test_interval_intersection():
    assert iv(0, 5).intersection(iv(3, 8)) == iv(3, 5)
    assert iv(0, 2).intersection(iv(2, 4)) is None


def test_interval_ordering_and_hash():
    assert sorted([iv(3, 4), iv(1, 9), iv(1, 2)]) == [iv(1, 2), iv(1, 9), iv(3, 4)]
    assert len({iv(1, 2), iv(1, 2)}) == 1
    assert iv(1, 2) != (1, 2)


def test_add_merges_overlapping_and_adjacent():
    s = IntervalSet([iv(1, 3), iv(5, 7), iv(3, 4)])
    assert spans(s) == [(1, 4), (5, 7)]
    s.add(iv(4, 5))
    assert spans(s) == [(1, 7)]


def test_add_keeps_order_and_ignores_empty():
    s = IntervalSet([iv(10, 12), iv(0, 1)])
    s.add(iv(5, 5))
    assert spans(s) == [(0, 1), (10, 12)]
    assert len(s) == 2


def test_add_swallowing_several():
    s = IntervalSet([iv(1, 2), iv(3, 4), iv(6, 7), iv(10, 11)])
    s.add(iv(2, 8))
    assert spans(s) == [(1, 8), (10, 11)]


def test_remove_splits():
    s = IntervalSet([iv(0, 10)])
    s.remove(iv(3, 5))
    assert spans(s) == [(0, 3), (5, 10)]


def test_remove_edges_and_whole():
    s = IntervalSet([iv(0, 4), iv(6, 9)])
    s.remove(iv(0, 1))
    s.remove(iv(8, 20))
    assert spans(s) == [(1, 4), (6, 8)]
    s.remove(iv(-5, 50))
    assert not s


def test_remove_adjacent_is_noop():
    s = IntervalSet([iv(2, 4)])
    s.remove(iv(4, 6))
    s.remove(iv(0, 2))
    assert spans(s) == [(2, 4)]


@pytest.mark.parametrize("point, inside", [(0, True), (2.5, False), (3, True), (5, True), (6, False), (8, True),
                                           (9, False), (-1, False)])
def test_membership(point, inside):
    s = IntervalSet([iv(0, 2), iv(3, 6), iv(7, 9)])
    assert (point in s) is inside


def test_membership_empty_set():
    assert 1 not in IntervalSet()


def test_total_length_and_span():
    s = IntervalSet([iv(0, 2), iv(5, 6)])
    assert s.total_length() == 3
    assert s.span() == iv(0, 6)
    assert IntervalSet().span() is None


def test_union_and_difference():
    a = IntervalSet([iv(0, 5)])
    b = IntervalSet([iv(3, 8), iv(10, 12)])
    assert spans(a.union(b)) == [(0, 8), (10, 12)]
    assert spans(b.difference(a)) == [(5, 8), (10, 12)]
    assert spans(a) == [(0, 5)]


def test_intersection_of_sets():
    a = IntervalSet([iv(0, 5), iv(8, 12)])
    b = IntervalSet([iv(2, 9), iv(11, 20)])
    assert spans(a.intersection(b)) == [(2, 5), (8, 9), (11, 12)]
    assert spans(a.intersection(IntervalSet())) == []


def test_gaps():
    s = IntervalSet([iv(1, 2), iv(4, 5), iv(7, 8)])
    assert spans(s.gaps()) == [(2, 4), (5, 7)]
    assert spans(s.gaps(within=iv(0, 10))) == [(0, 1), (2, 4), (5, 7), (8, 10)]
    assert IntervalSet().gaps() == []


def test_first_fit():
    busy = IntervalSet([iv(9, 10), iv(11, 13)])
    assert busy.first_fit(1, iv(9, 17)) == iv(10, 11)
    assert busy.first_fit(2, iv(9, 17)) == iv(13, 15)
    assert busy.first_fit(5, iv(9, 17)) is None
    with pytest.raises(ValueError):
        busy.first_fit(0, iv(9, 17))


def test_equality_and_repr():
    assert IntervalSet([iv(0, 1), iv(1, 2)]) == IntervalSet([iv(0, 2)])
    assert repr(IntervalSet([iv(1, 3), iv(5, 8)])) == "IntervalSet([1, 3), [5, 8))"
