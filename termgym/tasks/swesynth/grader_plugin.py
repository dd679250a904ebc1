"""The grader's pytest plugin: what pytest reported, signed so that no other process can write it.

This file runs *inside* the grading sandbox, in the same interpreter as the code being graded, so it
imports nothing from termgym. The grader copies it into a directory the sandbox cannot write, under
a random module name, and loads it with ``-p <name>`` before pytest reads any conftest or test
module. What it does, and all it claims (the trust boundary: ``docs/security.md``):

1. at import, before any code of the project runs, it makes the process non-dumpable (no other
   process of the sandbox may read its memory or attach to it), reads its configuration from a
   one-time key file (HMAC key, events file) and deletes the file;
2. it writes pytest's own report of each test phase (setup, call, teardown), the collected ids and
   pytest's final exit status as lines of an HMAC chain to the events file, serialised and signed
   with C functions bound at import (a test that mocks ``json.dumps`` or ``os.write`` does not
   change the stream).

The grader verifies the chain on the host (:func:`termgym.tasks.swesynth.grading.read_events`): a
line written by a process that never held the key, a truncated stream (the session killed or cut
short with ``os._exit``) and an exit status that disagrees with the sandbox's own report all void
the grade. The plugin does **not** defend against the code under test itself: it shares the
interpreter and can reach anything here. It therefore denies nothing and checks nothing about how
the project's code or tests behave (plain ``unittest.TestCase`` suites, frames, ``inspect``,
``gc``, ``ctypes``, trace functions, patched builtins all run as under raw pytest). Whether a patch
fixes the bug is decided outside this process.
"""

import hashlib
import json
import os
import sys

import pluggy
import pytest


def _not_dumpable():
    """Make this process non-dumpable: another process of the same user (one the code under test
    spawns) can then not read ``/proc/<pid>/mem`` for the key, nor attach to it."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE, 0
        raise RuntimeError(f"termgym grader plugin: prctl(PR_SET_DUMPABLE) failed (errno {ctypes.get_errno()})")


def _make_encoder():
    """JSON for the plugin's own payloads (None, bools, ints, strings, lists, dicts) from C functions
    and builtins captured at import."""
    from _json import encode_basestring_ascii as quote

    kind_of, is_a, text, integer, sequence, mapping = type, isinstance, str, int, (list, tuple), dict
    join = ",".join

    def encode(value):
        if value is None:
            return "null"
        if value is True or value is False:
            return "true" if value else "false"
        if is_a(value, integer):
            return integer.__repr__(integer(value))
        if is_a(value, text):
            return quote(value)
        if is_a(value, sequence):
            return "[" + join([encode(v) for v in value]) + "]"
        if is_a(value, mapping):
            return "{" + join([quote(text(k)) + ":" + encode(v) for k, v in mapping.items(value)]) + "}"
        raise TypeError(f"termgym grader plugin: cannot record a {kind_of(value).__name__}")

    return encode


def _make_emitter():
    """The signing writer: ``emit(kind, payload)`` appends one chained, MAC'd line to the events file."""
    _not_dumpable()
    keyfile = os.environ.pop("TERMGYM_GRADER_KEYFILE", "")
    if not keyfile:
        raise RuntimeError("termgym grader plugin: TERMGYM_GRADER_KEYFILE is not set")
    with open(keyfile, encoding="utf-8") as fh:
        config = json.load(fh)
    os.unlink(keyfile)
    key = bytes.fromhex(config["key"])
    fd = os.open(config["events"], os.O_WRONLY | os.O_APPEND)
    write, sha256, encode = os.write, hashlib.sha256, _make_encoder()
    padded = (sha256(key).digest() if len(key) > 64 else key).ljust(64, b"\0")
    inner_pad = bytes([b ^ 0x36 for b in padded])
    outer_pad = bytes([b ^ 0x5C for b in padded])
    del key, padded
    state = {"seq": 0, "mac": b""}

    def emit(kind, payload):
        state["seq"] += 1
        body = encode([state["seq"], kind, payload])
        mac = sha256(outer_pad + sha256(inner_pad + state["mac"] + body.encode()).digest()).hexdigest()
        state["mac"] = mac.encode()
        write(fd, (body + "\t" + mac + "\n").encode())

    return emit


_emit = _make_emitter()
_emit("start", {"python": sys.version.split()[0], "pytest": pytest.__version__, "pluggy": pluggy.__version__})


@pytest.hookimpl(hookwrapper=True)
def pytest_collection_modifyitems(session, config, items):
    yield
    _emit("collected", {"ids": [item.nodeid for item in items]})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    result = yield
    report = result.get_result()
    # pytest's own verdict for the phase: xfail and skips as raw pytest reports them
    _emit("phase", {"id": item.nodeid, "when": call.when, "outcome": str(report.outcome)})


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    _emit("finish", {"exitstatus": int(exitstatus)})
