"""The git index of a SWE-SYNTH workspace does not point at the buggy files.

Git keeps stat data per file in its index (ctime, mtime, dev, ino, uid, gid, size); ``git ls-files
--debug`` prints it. Taken before the file times were normalised, it showed the files the bug patch
rewrote (their index mtime equalled their ctime, on 9 of 9 tasks). Here, on real bundled tasks of
several projects in real bubblewrap sandboxes, every field git stores is compared between the files
the reference fix touches and all the others, as the agent sees them.
"""

from __future__ import annotations

import re

import pytest

from termgym.sandbox import make_sandbox
from termgym.tasks.swesynth import default_suite
from termgym.tasks.swesynth import task as task_module

#: One task from each of four bundled projects.
TASKS = ("isodate-01194bbebc", "voluptuous", "tinydb", "parse")
FIELDS = ("ctime", "mtime", "dev", "ino", "uid", "gid", "size", "flags")
_ENTRY = re.compile(r"^(\S.*)\n  ctime: (\S+)\n  mtime: (\S+)\n  dev: (\d+)\tino: (\d+)\n  uid: (\d+)\tgid: (\d+)\n"
                    r"  size: (\d+)\tflags: (\S+)$", re.M)


def index_entries(sandbox, workdir: str, refresh: bool = False) -> dict[str, dict[str, str]]:
    """``git ls-files --debug`` in the sandbox (after ``git status`` with ``refresh``), per path."""
    first = "git status --short >/dev/null && " if refresh else ""
    out = sandbox.exec(f"cd {workdir} && {first}git ls-files --debug", timeout=60).output
    entries = {m.group(1): dict(zip(FIELDS, m.groups()[1:], strict=True)) for m in _ENTRY.finditer(out)}
    assert entries, out[-500:]
    return entries


def tells(entries: dict[str, dict[str, str]], buggy: list[str]) -> list[str]:
    """The ways the index's stat data singles out the buggy files (empty: it does not).

    A field the other files share one value of must have that value for the buggy files too; a
    field that differs per file by nature (inode numbers, sizes, ctimes of a fresh copy) cannot
    single them out by its value, but the buggy files must not be the most recently modified ones,
    and their index mtime must not equal their ctime where no other file's does (the issue's tell).
    """
    others = [e for path, e in entries.items() if path not in buggy]
    found = []
    for name in FIELDS:
        common = {e[name] for e in others}
        if len(common) == 1 and any(entries[p][name] not in common for p in buggy):
            found.append(f"{name}: the buggy files have {sorted({entries[p][name] for p in buggy})}, "
                         f"every other file {common.pop()}")

    def stamp(value: str) -> tuple[int, int]:
        seconds, _, nanos = value.partition(":")
        return int(seconds), int(nanos or 0)

    if min(stamp(entries[p]["mtime"]) for p in buggy) > max(stamp(e["mtime"]) for e in others):
        found.append("the buggy files have the newest mtimes")
    same = lambda e: e["mtime"] == e["ctime"]  # noqa: E731
    if all(same(entries[p]) for p in buggy) and not any(same(e) for e in others):
        found.append("index mtime equals ctime exactly for the buggy files")
    return found


def buggy_files(task) -> list[str]:
    return sorted(set(re.findall(r"^\+\+\+ b/(\S+)", task.record.fix_patch, re.M)))


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    return default_suite("v1", cache_dir=tmp_path_factory.mktemp("swesynth-cache"))


def load(suite, prefix: str):
    return suite.load(next(t for t in suite.task_ids() if t.startswith(prefix)))


@pytest.mark.parametrize("prefix", TASKS)
def test_index_stat_data_does_not_single_out_the_buggy_files(suite, prefix):
    task = load(suite, prefix)
    buggy = buggy_files(task)
    with make_sandbox("local", task.sandbox_spec()) as sandbox:
        first_look = index_entries(sandbox, task.workdir)
        assert set(buggy) <= set(first_look), (buggy, sorted(first_look)[:5])
        assert tells(first_look, buggy) == []
        # nothing at all before git refreshes it: the same (empty) stat data for every file
        assert len({tuple(e[f] for f in FIELDS if f != "flags") for e in first_look.values()}) == 1
        refreshed = index_entries(sandbox, task.workdir, refresh=True)
        assert tells(refreshed, buggy) == []
        assert {e["mtime"] for e in refreshed.values()} == {f"{task_module.NORMALISED_MTIME}:0"}


def test_the_check_sees_the_tell_when_the_index_keeps_its_stat_data(tmp_path, monkeypatch):
    """Sabotage: without the index rebuild, the check above finds the buggy files."""
    real_git = task_module._git

    def git_without_rebuild(args, cwd, stdin=None):
        if args[:1] != ["read-tree"]:
            real_git(args, cwd, stdin)

    monkeypatch.setattr(task_module, "_git", git_without_rebuild)
    task = load(default_suite("v1", cache_dir=tmp_path), "isodate-01194bbebc")
    with make_sandbox("local", task.sandbox_spec()) as sandbox:
        assert tells(index_entries(sandbox, task.workdir), buggy_files(task)) != []


def test_records_that_name_an_image_prepare_the_same_index(suite):
    """Records with a Docker image prepare the workspace with setup commands inside the sandbox: the
    same rebuilt index. Played on a local sandbox holding the clean repository where the image would."""
    import dataclasses

    from termgym.sandbox import SandboxSpec
    from termgym.tasks.swesynth.task import SweSynthTask

    clean = load(suite, "isodate-01194bbebc").record
    record = dataclasses.replace(clean, image="registry.example/isodate:clean", repo_dir=None)
    spec = SweSynthTask(record).sandbox_spec()
    assert spec.image and not spec.copy_dirs
    local = SandboxSpec(workdir=spec.workdir, copy_dirs={str(clean.repo_dir): spec.workdir}, files=spec.files,
                        env=spec.env, setup_commands=spec.setup_commands)
    with make_sandbox("local", local) as sandbox:
        entries = index_entries(sandbox, spec.workdir)
        buggy = buggy_files(SweSynthTask(record))
        assert set(buggy) <= set(entries) and tells(entries, buggy) == []
        assert len({tuple(e[f] for f in FIELDS if f != "flags") for e in entries.values()}) == 1
