"""Fixtures for the SWE-SYNTH tests: a small real repository and a scripted OpenAI-style server."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

MINI_SOURCE = '''\
"""A tiny inventory library used to exercise the bug factory."""


class StockError(ValueError):
    """Raised for impossible stock movements."""


def parse_quantity(text, default=0):
    """Parse '12' or ' 7 ' into an int; empty text gives the default."""
    text = text.strip()
    if not text:
        return default
    value = int(text)
    if value < 0:
        raise StockError("quantity cannot be negative")
    return value


def restock(levels, item, amount):
    """Add stock for one item, returning the new level."""
    if amount <= 0:
        raise StockError("restock amount must be positive")
    current = levels.get(item, 0)
    levels[item] = current + amount
    return levels[item]


def low_items(levels, threshold=5):
    """Items whose level is below the threshold, sorted by name."""
    out = []
    for name, level in sorted(levels.items()):
        if level < threshold:
            out.append(name)
    return out


def label(name, level, width=8):
    """A shelf label such as 'bolts   : 12'."""
    return f"{name:<{width}}: {level}"


def total(levels):
    """Sum of every level."""
    result = 0
    for level in levels.values():
        result += level
    return result
'''

MINI_TESTS = '''\
import pytest

from minilib.stock import StockError, label, low_items, parse_quantity, restock, total


def test_parse_plain():
    assert parse_quantity("12") == 12


def test_parse_spaces():
    assert parse_quantity(" 7 ") == 7


def test_parse_empty_gives_default():
    assert parse_quantity("", default=3) == 3


def test_parse_rejects_negative():
    with pytest.raises(StockError):
        parse_quantity("-2")


def test_restock_adds():
    levels = {"bolts": 2}
    assert restock(levels, "bolts", 3) == 5


def test_restock_new_item():
    levels = {}
    assert restock(levels, "nuts", 4) == 4


def test_restock_rejects_zero():
    with pytest.raises(StockError):
        restock({}, "nuts", 0)


def test_low_items():
    assert low_items({"a": 1, "b": 9, "c": 4}) == ["a", "c"]


def test_low_items_threshold_is_exclusive():
    assert low_items({"a": 5, "b": 4}, threshold=5) == ["b"]


def test_label():
    assert label("bolts", 12) == "bolts   : 12"


def test_total():
    assert total({"a": 1, "b": 2, "c": 3}) == 6


def test_total_empty():
    assert total({}) == 0
'''


def write_mini_repo(root: Path) -> Path:
    """A small, real project with a passing pytest suite (12 tests)."""
    (root / "minilib").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "minilib" / "__init__.py").write_text("")
    (root / "minilib" / "stock.py").write_text(MINI_SOURCE)
    (root / "tests" / "test_stock.py").write_text(MINI_TESTS)
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\ntestpaths = tests\n")
    return root


@pytest.fixture
def mini_repo(tmp_path: Path) -> Path:
    return write_mini_repo(tmp_path / "minilib-repo")


@pytest.fixture(scope="session")
def mini_baseline(tmp_path_factory):
    """The mini repository and its required tests, computed once per session (two test runs)."""
    from termgym.factory.swesynth.validate import baseline

    repo = write_mini_repo(tmp_path_factory.mktemp("mini") / "minilib-repo")
    required, _ = baseline(repo, "python -m pytest -q")
    return repo, required


@pytest.fixture
def repo_copy(mini_baseline, tmp_path):
    """A private copy of the mini repository plus its required tests."""
    import shutil

    repo, required = mini_baseline
    dest = tmp_path / "minilib-repo"
    shutil.copytree(repo, dest)
    return dest, required


class ScriptedModel:
    """A real HTTP server on loopback that answers ``/v1/chat/completions`` like a model would.

    ``script(messages) -> str`` produces the assistant text; every request body is kept in
    ``requests``.
    """

    def __init__(self, script) -> None:
        self.script = script
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server naming
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                outer.requests.append(body)
                if self.path != "/v1/chat/completions":
                    self.send_response(404)
                    self.end_headers()
                    return
                content = outer.script(body["messages"])
                payload = json.dumps({"id": "x", "object": "chat.completion", "model": body.get("model"),
                                      "choices": [{"index": 0, "finish_reason": "stop",
                                                   "message": {"role": "assistant", "content": content}}]})
                data = payload.encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def scripted_model():
    servers = []

    def make(script):
        server = ScriptedModel(script)
        servers.append(server)
        return server

    yield make
    for s in servers:
        s.close()


def _breaker_script(messages) -> str:
    """Answer a breaker prompt: return the function with its first '<' turned into '<='
    (or its first '+' into '-'), as a model following the instructions would."""
    prompt = messages[-1]["content"]
    code = re.search(r"```python\n(.*?)```", prompt, re.S).group(1)
    if " < " in code:
        code = code.replace(" < ", " <= ", 1)
    elif " + " in code:
        code = code.replace(" + ", " - ", 1)
    return "Here is the function with the bug.\n```python\n" + code + "```"


@pytest.fixture
def breaker_script():
    return _breaker_script


@pytest.fixture
def mini_source() -> str:
    return MINI_SOURCE
