"""Generation parses from worker threads; CPython < 3.11.8 races there (gh-106905)."""

import ast
import gc
import re
import threading
import time
from pathlib import Path

from termgym.tasks.swesynth import pyparse

PACKAGE = Path(pyparse.__file__).parent


def _parse_in_threads(parse) -> list[BaseException]:
    """Two threads parse a large module while every collection hands the GIL to the other."""
    source = Path(ast.__file__).read_text()
    errors: list[BaseException] = []

    def yield_gil(phase, info):
        if phase == "start":
            time.sleep(0.0005)

    def work():
        for _ in range(5):
            try:
                parse(source)
            except SystemError as exc:
                errors.append(exc)

    old = gc.get_threshold()
    gc.callbacks.append(yield_gil)
    gc.set_threshold(50)
    try:
        threads = [threading.Thread(target=work) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        gc.callbacks.remove(yield_gil)
        gc.set_threshold(*old)
    return errors


def test_parse_is_safe_when_threads_switch_mid_conversion():
    assert _parse_in_threads(pyparse.parse) == []


#: The packages whose code parses from generation's worker threads: the runtime's and the factory's.
THREADED = (PACKAGE, PACKAGE.parents[1] / "factory" / "swesynth")


def test_every_parse_in_the_package_goes_through_the_lock():
    assert THREADED[1].is_dir(), THREADED[1]
    offenders = [f"{p.relative_to(PACKAGE.parents[1])}:{n}"
                 for package in THREADED for p in package.rglob("*.py") if p.name != "pyparse.py"
                 for n, line in enumerate(p.read_text().splitlines(), 1)
                 if re.search(r"\bast\.parse\(", line)]
    assert offenders == []
