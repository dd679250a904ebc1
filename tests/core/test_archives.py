"""Archives termgym did not make unpack only inside their destination, on every Python.

Each case runs twice: through tarfile's own ``"data"`` filter where this Python has it, and through
termgym's check for Pythons without it (Debian 12's 3.11.2, where CI first met the difference).
"""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from termgym.archives import extract_all


def _archive(*members: tuple[str, str, str]) -> tarfile.TarFile:
    """An in-memory tar of ``(kind, name, data-or-link)`` members: kind ``file``, ``dir``, ``sym``,
    ``hard`` or ``fifo``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for kind, name, extra in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(extra)
                info.mode = 0o4777  # setuid and world-writable: both must go
                tar.addfile(info, io.BytesIO(extra.encode()))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE,
                         "fifo": tarfile.FIFOTYPE}[kind]
            info.linkname = extra
            tar.addfile(info)
    buf.seek(0)
    return tarfile.open(fileobj=buf)


@pytest.fixture(params=["tarfile's filter", "termgym's check"])
def mode(request, monkeypatch):
    if request.param == "tarfile's filter":
        if not hasattr(tarfile, "data_filter"):
            pytest.skip("this Python's tarfile has no extraction filters (the other case covers it)")
    else:
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    return request.param


def test_a_plain_archive_unpacks_with_safe_modes(mode, tmp_path):
    dest = tmp_path / "dest"
    dest.mkdir()
    with _archive(("dir", "pkg", ""), ("file", "pkg/a.py", "x = 1\n"), ("sym", "pkg/b.py", "a.py"),
                  ("hard", "pkg/c.py", "pkg/a.py")) as tar:
        extract_all(tar, dest)
    assert (dest / "pkg/a.py").read_text() == "x = 1\n"
    assert os.readlink(dest / "pkg/b.py") == "a.py" and (dest / "pkg/c.py").read_text() == "x = 1\n"
    assert (dest / "pkg/a.py").stat().st_mode & 0o4022 == 0  # no setuid bit, no group/other write


def test_an_absolute_name_lands_inside_the_destination(mode, tmp_path):
    dest = tmp_path / "dest"
    dest.mkdir()
    with _archive(("file", "/abs.txt", "x")) as tar:
        extract_all(tar, dest)
    assert (dest / "abs.txt").read_text() == "x"


@pytest.mark.parametrize("member", [
    ("file", "../escape.txt", "x"),
    ("file", "pkg/../../escape.txt", "x"),
    ("sym", "out", "/etc"),
    ("sym", "out", "../.."),
    ("hard", "out", "../escape.txt"),
    ("fifo", "pipe", ""),
], ids=["dotdot", "nested-dotdot", "symlink-absolute", "symlink-outside", "hardlink-outside", "fifo"])
def test_a_member_leaving_the_destination_is_refused_by_name(mode, member, tmp_path):
    dest = tmp_path / "a" / "dest"
    dest.mkdir(parents=True)
    with _archive(("file", "ok.txt", "fine"), member) as tar, pytest.raises(tarfile.TarError) as err:
        extract_all(tar, dest)
    assert repr(member[1]) in str(err.value)
    assert not (tmp_path / "a" / "escape.txt").exists() and not (tmp_path / "escape.txt").exists()
    if mode == "termgym's check":  # checked before anything is written
        assert not (dest / "ok.txt").exists()
