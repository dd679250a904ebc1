"""Files replaced whole (termgym.atomic, termgym.jsonl's writers): a reader sees the old file or the
new one, no temporary file is left behind, and a write that fails midway leaves the old file as it was."""

from __future__ import annotations

import json
import threading

import pytest

from termgym.atomic import write_text_atomically
from termgym.jsonl import json_lines, write_json, write_json_lines


def test_a_file_is_replaced_whole_and_nothing_is_left_beside_it(tmp_path):
    target = tmp_path / "deep" / "records.jsonl"
    write_json_lines(target, [{"b": 1, "a": 2}, {"c": [1, 2]}], sort_keys=True)
    assert target.read_text() == '{"a":2,"b":1}\n{"c":[1,2]}\n'
    assert [obj for _, obj, _ in json_lines(target)] == [{"a": 2, "b": 1}, {"c": [1, 2]}]
    write_json(target.with_name("suite.json"), {"x": 1}, indent=1)
    assert json.loads(target.with_name("suite.json").read_text()) == {"x": 1}
    assert sorted(p.name for p in target.parent.iterdir()) == ["records.jsonl", "suite.json"]


def test_a_write_that_fails_leaves_the_old_file(tmp_path):
    target = tmp_path / "suite.json"
    write_json(target, {"old": True})

    class Unserialisable:
        pass

    with pytest.raises(TypeError):
        write_json(target, {"new": Unserialisable()})
    with pytest.raises(UnicodeEncodeError):
        write_text_atomically(target, "\ud800")  # a lone surrogate cannot be written as UTF-8
    assert json.loads(target.read_text()) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["suite.json"]  # no temporary file left


def test_threads_writing_one_file_never_leave_it_torn(tmp_path):
    target = tmp_path / "map.json"
    texts = [json.dumps({"writer": i, "pad": "x" * 20000}) + "\n" for i in range(8)]
    errors: list[BaseException] = []

    def write(text):
        try:
            for _ in range(20):
                write_text_atomically(target, text)
        except BaseException as exc:  # noqa: BLE001 - a thread's error is the test's failure
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(t,)) for t in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors  # a temporary name shared between threads: one renames the other's file away
    assert target.read_text() in texts  # one writer's whole text, not a mix
    assert [p.name for p in tmp_path.iterdir()] == ["map.json"]
