"""Sdists straight from the package index's JSON listing (PEP 691), served here by a real HTTP
server on loopback: the file is checked against the listed SHA-256, nothing of it runs, a release
the index does not list falls back to pip, and a file whose hash differs is refused by name."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from termgym.factory.swesynth.history import fetch_release
from termgym.factory.swesynth.project_add import AddProjectError, index_sdist


def _sdist(name: str, version: str, marker: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        # a setup.py that would leave a mark if anything ran it
        for path, text in ((f"{name}-{version}/setup.py", f"open({marker!r}, 'w').write('ran')\n"),
                           (f"{name}-{version}/src/{name}/__init__.py", "VALUE = 1\n")):
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture
def index(tmp_path):
    marker = str(tmp_path / "ran-setup")
    files = {"/files/demo_pkg-1.2.tar.gz": _sdist("demo_pkg", "1.2", marker),
             "/files/demo_pkg-1.3.tar.gz": _sdist("demo_pkg", "1.3", marker)}
    listing = {"meta": {"api-version": "1.0"}, "name": "demo-pkg", "files": [
        {"filename": "demo_pkg-1.2.tar.gz", "url": "../../files/demo_pkg-1.2.tar.gz",
         "hashes": {"sha256": hashlib.sha256(files["/files/demo_pkg-1.2.tar.gz"]).hexdigest()}},
        {"filename": "demo_pkg-1.3.tar.gz", "url": "/files/demo_pkg-1.3.tar.gz", "hashes": {"sha256": "0" * 64}},
        {"filename": "demo_pkg-1.2-py3-none-any.whl", "url": "/files/x.whl", "hashes": {"sha256": "1" * 64}},
    ]}
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the http.server name)
            seen.append(self.path)
            if self.path == "/simple/demo-pkg/":
                body, kind = json.dumps(listing).encode(), "application/vnd.pypi.simple.v1+json"
            elif self.path in files:
                body, kind = files[self.path], "application/gzip"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/simple", files, seen
    server.shutdown()


def test_an_sdist_comes_straight_from_the_index_checked_against_its_hash(index, tmp_path):
    url, files, seen = index
    got = index_sdist("Demo.Pkg", "1.2", tmp_path / "dl", index=url)
    assert got == tmp_path / "dl" / "demo_pkg-1.2.tar.gz" and got.read_bytes() == files["/files/demo_pkg-1.2.tar.gz"]
    assert seen == ["/simple/demo-pkg/", "/files/demo_pkg-1.2.tar.gz"]  # the listing, then the file: no wheel
    assert index_sdist("demo-pkg", "9.9", tmp_path / "dl", index=url) is None  # not listed: pip is tried
    assert index_sdist("other", "1.0", tmp_path / "dl", index=url) is None  # no listing: pip is tried
    with pytest.raises(AddProjectError, match=r"demo_pkg-1\.3\.tar\.gz from .*: its SHA-256 is not the one"):
        index_sdist("demo-pkg", "1.3", tmp_path / "dl", index=url)
    assert not (tmp_path / "dl" / "demo_pkg-1.3.tar.gz").exists()


def test_a_release_is_fetched_and_unpacked_without_running_anything_of_it(index, tmp_path, monkeypatch):
    url, _files, _seen = index
    monkeypatch.setenv("PIP_INDEX_URL", url)
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))
    tree = fetch_release("demo-pkg", "1.2")
    assert (tree / "src" / "demo_pkg" / "__init__.py").read_text() == "VALUE = 1\n"
    assert tree.name == "demo_pkg-1.2"
    assert not (tmp_path / "ran-setup").exists()
