import pytest

from planwise.pqueue import EmptyQueue, PriorityQueue, merge_sorted


def filled(pairs, **kw):
    q = PriorityQueue(**kw)
    for item, priority in pairs:
        q.push(item, priority)
    return q


def test_pops_lowest_first():
    q = filled([("c", 3), ("a", 1), ("b", 2)])
    assert [q.pop()[0] for _ in range(3)] == ["a", "b", "c"]


def test_max_first():
    q = filled([("c", 3), ("a", 1), ("b", 2)], max_first=True)
    assert q.pop() == ("c", 3)


def test_fifo_among_equal_priorities():
    q = filled([(name, 5) for name in "edcba"])
    assert [item for item, _ in q.drain()] == list("edcba")


def test_many_items_come_out_sorted():
    values = [(i * 37) % 101 for i in range(60)]
    q = filled([(v, v) for v in values])
    assert [p for _, p in q.drain()] == sorted(values)


def test_len_bool_contains():
    q = filled([("x", 1)])
    assert len(q) == 1 and q and "x" in q and "y" not in q
    q.pop()
    assert not q and len(q) == 0


def test_peek_does_not_remove():
    q = filled([("a", 2), ("b", 1)])
    assert q.peek() == ("b", 1)
    assert len(q) == 2


def test_empty_queue_errors():
    q = PriorityQueue()
    with pytest.raises(EmptyQueue):
        q.pop()
    with pytest.raises(EmptyQueue):
        q.peek()


def test_push_existing_updates_priority():
    q = filled([("a", 1), ("b", 2), ("c", 3)])
    q.push("c", 0)
    assert q.priority("c") == 0
    assert len(q) == 3
    assert q.pop() == ("c", 0)
    q.push("a", 10)
    assert [item for item, _ in q.drain()] == ["b", "a"]


def test_updated_item_goes_behind_equals():
    q = filled([("a", 1), ("b", 1)])
    q.push("a", 1)
    assert q.pop()[0] == "b"


def test_remove_from_middle():
    q = filled([(n, n) for n in range(10)])
    assert q.remove(4) == 4
    assert 4 not in q
    assert [item for item, _ in q.drain()] == [0, 1, 2, 3, 5, 6, 7, 8, 9]


def test_remove_last_and_unknown():
    q = filled([("a", 1), ("b", 2)])
    q.remove("b")
    assert q.snapshot() == [("a", 1)]
    with pytest.raises(KeyError):
        q.remove("zzz")
    with pytest.raises(KeyError):
        q.priority("zzz")


def test_pop_many():
    q = filled([(n, -n) for n in range(5)])
    assert q.pop_many(2) == [4, 3]
    assert q.pop_many(10) == [2, 1, 0]
    assert q.pop_many(0) == []
    with pytest.raises(ValueError):
        q.pop_many(-1)


def test_snapshot_leaves_queue_intact():
    q = filled([("b", 2), ("a", 1), ("c", 2)])
    assert q.snapshot() == [("a", 1), ("b", 2), ("c", 2)]
    assert len(q) == 3


def test_merge_sorted():
    assert merge_sorted([1, 4, 9], [2, 3, 10], [], [0]) == [0, 1, 2, 3, 4, 9, 10]
    assert merge_sorted() == []


def test_merge_sorted_stable_with_key():
    a = [("x", 1), ("y", 3)]
    b = [("p", 1), ("q", 2)]
    assert merge_sorted(a, b, key=lambda t: t[1]) == [("x", 1), ("p", 1), ("q", 2), ("y", 3)]
