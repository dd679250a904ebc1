"""The host's walk of a sandbox directory: what the agent planted is never followed or opened."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from termgym.sandbox import SandboxSpec, hostfs
from termgym.sandbox.hostfs import TreeTooLarge, open_dir, walk_tree


def _walk(top, **kw):
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return walk_tree(fd, skip_dir=kw.pop("skip_dir", lambda _: False), read=kw.pop("read", lambda _: True),
                         max_entries=kw.pop("max_entries", 1000), max_bytes=kw.pop("max_bytes", 1 << 20), **kw)
    finally:
        os.close(fd)


@pytest.fixture
def tree(tmp_path):
    top = tmp_path / "app"
    (top / "pkg" / "sub").mkdir(parents=True)
    (top / "pkg" / "a.py").write_text("a = 1\n")
    (top / "pkg" / "sub" / "b.py").write_text("b = 2\n")
    (top / ".git").mkdir()
    (top / ".git" / "config").write_text("[core]\n")
    return top


def test_lists_files_reads_what_is_asked_and_skips_directories(tree):
    listing = _walk(tree, skip_dir=lambda p: p.startswith("."), read=lambda p: p.endswith("b.py"))
    assert sorted(listing.files) == ["pkg/a.py", "pkg/sub/b.py"]
    assert listing.content == {"pkg/sub/b.py": b"b = 2\n"}
    assert listing.files["pkg/a.py"].size == 6 and listing.others == {}


def test_a_link_to_a_host_file_is_reported_never_read(tree, tmp_path):
    secret = tmp_path / "host-secret"
    secret.write_text("host only\n")
    os.symlink(secret, tree / "pkg" / "leak.py")
    os.symlink(tmp_path, tree / "pkg" / "up")  # a directory link: never entered
    listing = _walk(tree)
    assert listing.others == {"pkg/leak.py": "a symbolic link", "pkg/up": "a symbolic link"}
    assert b"host only\n" not in listing.content.values()
    assert not any(path.startswith("pkg/up/") for path in listing.files)


def test_a_fifo_and_a_device_node_are_never_opened(tree):
    os.mkfifo(tree / "pkg" / "pipe.py")  # opening it for reading would block the grader
    os.mknod(tree / "pkg" / "dev.py", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    done = []
    worker = threading.Thread(target=lambda: done.append(_walk(tree)), daemon=True)
    worker.start()
    worker.join(10)
    assert done, "the walk blocked on a FIFO"
    assert done[0].others == {"pkg/pipe.py": "a FIFO", "pkg/dev.py": "a character device"}


def test_limits_end_the_walk_with_a_clear_error(tree):
    with pytest.raises(TreeTooLarge, match="more than 3 files and directories"):
        _walk(tree, max_entries=3, what="the tree")
    with pytest.raises(TreeTooLarge, match="more than 8 bytes"):
        _walk(tree, max_bytes=8)


def test_open_dir_refuses_a_link_on_the_way(tree, tmp_path):
    os.symlink(tmp_path, tree / "escape")
    assert open_dir(tree, ["escape"]) is None
    assert open_dir(tree, [".."]) is None
    fd = open_dir(tree, ["pkg", "sub"])
    try:
        assert sorted(os.listdir(fd)) == ["b.py"]
    finally:
        os.close(fd)
    with pytest.raises(FileNotFoundError):
        open_dir(tree, ["missing"])


def test_sabotage_following_links_would_leak_a_host_file(tree, tmp_path, monkeypatch):
    """The guard above can fail: read with links followed and the host file comes back."""
    secret = tmp_path / "host-secret"
    secret.write_text("host only\n")
    os.symlink(secret, tree / "pkg" / "leak.py")

    def follow(dir_fd, name, limit):
        with open(os.open(name, os.O_RDONLY, dir_fd=dir_fd), "rb") as fh:
            return fh.read(limit + 1)

    monkeypatch.setattr(hostfs, "read_regular", follow)
    original = os.stat
    monkeypatch.setattr(hostfs.os, "stat", lambda name, dir_fd=None, follow_symlinks=True: original(
        name, dir_fd=dir_fd, follow_symlinks=True))
    assert _walk(tree).content.get("pkg/leak.py") == b"host only\n"


class _CountingOs:
    """``os`` for hostfs alone, counting the descriptors hostfs itself holds open (other threads of
    the test process open and close their own meanwhile)."""

    def __init__(self) -> None:
        self.live: set[int] = set()
        self.peak = 0

    def __getattr__(self, name):
        return getattr(os, name)

    def _opened(self, fd: int) -> int:
        self.live.add(fd)
        self.peak = max(self.peak, len(self.live))
        return fd

    def open(self, *args, **kwargs) -> int:
        return self._opened(os.open(*args, **kwargs))

    def dup(self, fd: int) -> int:
        return self._opened(os.dup(fd))

    def close(self, fd: int) -> None:
        self.live.discard(fd)
        os.close(fd)


def test_a_wide_tree_holds_one_descriptor_per_level_and_depth_is_bounded(tree):
    for i in range(300):
        (tree / "wide" / f"d{i}").mkdir(parents=True)
        (tree / "wide" / f"d{i}" / "x.py").write_text("")
    counting = _CountingOs()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(hostfs, "os", counting)
        listing = _walk(tree)
        assert len([p for p in listing.files if p.startswith("wide/")]) == 300
        assert counting.peak <= 8, counting.peak  # not one per directory
        assert counting.live == set()  # every descriptor closed
        (tree / "deep" / "/".join(["d"] * 10)).mkdir(parents=True)
        with pytest.raises(TreeTooLarge, match="deeper than 5 directories"):
            _walk(tree, max_depth=5)
        assert counting.live == set()


def test_a_sandbox_opens_its_workdir_on_the_host_except_where_a_bind_hides_it(make, tmp_path):
    """The host sees what the agent wrote in the workdir; a read-only bind inside it is seen only in
    the sandbox, so there the host declines (None) and a grader falls back to the sandbox's view."""
    sandbox = make(SandboxSpec(workdir="/app"))
    sandbox.exec("mkdir -p pkg && echo 'x = 1' > pkg/m.py && ln -s /etc/hostname pkg/link.py")
    fd = sandbox.open_host_dir("/app")
    assert fd is not None
    try:
        listing = walk_tree(fd, skip_dir=lambda _: False, read=lambda _: True, max_entries=100, max_bytes=4096)
    finally:
        os.close(fd)
    assert listing.content["pkg/m.py"] == b"x = 1\n" and listing.others == {"pkg/link.py": "a symbolic link"}
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "d.txt").write_text("bound\n")
    bound = make(SandboxSpec(workdir="/app", ro_binds={str(tmp_path / "data"): "/app/data"}))
    assert bound.exec("cat /app/data/d.txt").output.strip() == "bound"
    assert bound.open_host_dir("/app") is None and bound.open_host_dir("/app/data") is None
    elsewhere = bound.open_host_dir("/tmp")
    assert elsewhere is not None
    os.close(elsewhere)
