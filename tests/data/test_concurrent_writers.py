"""Many threads and processes appending episodes to one file: no interleaved or torn lines."""

from __future__ import annotations

import json
import multiprocessing
import threading

from termgym.wrappers.recording import append_jsonl, read_jsonl

PROCESSES = 6
THREADS = 4
RECORDS = 25


def _writer(path: str, proc: int) -> None:
    def thread(t: int) -> None:
        for i in range(RECORDS):
            # Sizes from tiny to ~600 KB, well past a pipe buffer and a page, so that a
            # non-atomic append would interleave.
            size = (i * 7919 + t * 104729 + proc * 1299709) % 600_000 if i % 5 == 0 else 50 + i
            payload = chr(ord("a") + (proc * THREADS + t) % 26) * size
            append_jsonl(path, {"proc": proc, "thread": t, "i": i, "payload": payload, "size": size})

    threads = [threading.Thread(target=thread, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()


def test_many_writers_never_tear_a_line(tmp_path):
    path = tmp_path / "shared.jsonl"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(path), p)) for p in range(PROCESSES)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    seen = set()
    raw_lines = path.read_bytes().split(b"\n")
    assert raw_lines[-1] == b""  # the file ends with a newline
    for line in raw_lines[:-1]:
        record = json.loads(line)  # raises on any torn or interleaved line
        assert len(record["payload"]) == record["size"]
        assert set(record["payload"]) <= {chr(ord("a") + (record["proc"] * THREADS + record["thread"]) % 26)}
        key = (record["proc"], record["thread"], record["i"])
        assert key not in seen
        seen.add(key)
    assert len(seen) == PROCESSES * THREADS * RECORDS
    assert len(list(read_jsonl(path))) == len(seen)
