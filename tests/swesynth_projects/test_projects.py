"""The bundled real projects: manifests, verified trees, provisioned test environments, and their
clean suites run in a sandbox under termgym's own grader (what every task of a project relies on)."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import time

import pytest

from termgym.tasks.swesynth import projects as P
from termgym.tasks.swesynth.projects import (
    ALLOWED_LICENCES,
    PERMISSIVE,
    ProjectError,
    TestEnvMissing,
    get_project,
    load_project,
    load_projects,
    project_sandbox_spec_parts,
    project_tree,
    provision,
    require_testenv,
    run_clean_suite,
    verify_sdist,
)


def test_at_least_forty_permissive_projects_from_different_domains():
    """Issue 26's spread: 40+ projects, many domains, unittest-style suites among them, each under a
    licence a project may carry."""
    projects = load_projects()
    assert len(projects) >= 40
    assert len({p.domain for p in projects.values()}) >= 36
    assert all(p.license in ALLOWED_LICENCES for p in projects.values())
    # MPL-2.0 binds each file, not the work (docs/swesynth.md, licences): only pathspec carries it
    assert sorted(n for n, p in projects.items() if p.license not in PERMISSIVE) == ["pathspec"]
    assert sum(1 for p in projects.values() if (p.lines or 0) >= 5000) >= 2
    assert sum(1 for p in projects.values() if p.extra.get("test_style") == "unittest") >= 5


@pytest.mark.parametrize("name", sorted(load_projects()))
def test_manifest_is_complete_and_its_files_match(name):
    project = get_project(name)
    assert verify_sdist(project) == project.folder / project.sdist
    assert project.sdist.startswith(f"{name}-{project.version}.") and project.sdist.endswith(".tar.gz")
    for licence in project.license_files:
        text = (project.folder / licence).read_text(encoding="utf-8")
        assert ("Permission" in text or "Redistribution" in text or "Apache License" in text
                or project.license == "MPL-2.0" and "Mozilla Public License Version 2.0" in text), licence
    assert project.pytest_version, "the lock pins pytest"
    assert all("==" in line for line in project.test_requirements)
    assert {k for k, _ in project.test_hashes} == {P.normalise_name(r.split("==")[0]) for r in project.test_requirements}
    assert project.test_command.startswith("python3 -m pytest ")
    # the test environment never holds the project under repair (an installed copy would show the fix)
    from termgym.sandbox.runtime import normalise, project_distributions
    assert not {normalise(k) for k, _ in project.test_hashes} & project_distributions(project_tree(name))
    for entry in project.deselect:  # every deselected test is left out by the command itself
        needle = entry.test.split("::")[-1].strip("*") if "*" in entry.test else entry.test
        assert needle in project.test_command, entry
        assert len(entry.reason) > 10
    assert project.lines and project.tests and project.suite_seconds
    # nothing but the sdist, its licences and the manifest: no unpacked copies in the package
    assert sorted(p.name for p in project.folder.iterdir()) == sorted({project.sdist, "project.toml",
                                                                       *project.license_files})


def _copy_project(tmp_path, name="isodate"):
    src = get_project(name).folder
    root = tmp_path / "projects"
    shutil.copytree(src, root / name)
    return root, root / name


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace('"pytest==7.2.1"', '"pytest>=7"'), "is not pinned as 'pkg==version'"),
    (lambda t: t.replace('license = "BSD-3-Clause"', 'license = "GPL-3.0-only"'), "not one of the licences a project may carry"),
    (lambda t: t.replace('license_files = ["LICENSE"]', 'license_files = ["NOTICE"]'), "licence file 'NOTICE'"),
    (lambda t: t.replace('name = "isodate"', 'name = "other"'), "differs from its folder"),
    (lambda t: t.replace('test_style = "pytest"', 'test_style = "nose"'), "test_style 'nose' must be"),
    (lambda t: t.replace('test_command = ', 'test_cmd = '), "missing 'test_command'"),
    (lambda t: t.replace('\n"pytest" = ', '\n"pytestx" = '), "no sha256 for test requirement 'pytest'"),
])
def test_bad_manifests_are_refused_by_name(tmp_path, edit, message):
    _, folder = _copy_project(tmp_path)
    toml = folder / "project.toml"
    toml.write_text(edit(toml.read_text()))
    with pytest.raises(ProjectError, match=message) as info:
        load_project(folder)
    assert "project.toml" in str(info.value) or str(folder) in str(info.value)


def test_tree_is_unpacked_once_from_the_verified_sdist(tmp_path, monkeypatch):
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))
    tree = project_tree("tinydb")
    assert str(tree).startswith(str(tmp_path / "cache"))
    assert (tree / "pyproject.toml").is_file() and (tree / "tinydb" / "__init__.py").is_file()
    assert not list(tree.rglob("*.egg-info")) and not list(tree.rglob("__pycache__"))
    stamp = (tree / "tinydb" / "__init__.py").stat().st_mtime_ns
    assert project_tree("tinydb") == tree and (tree / "tinydb" / "__init__.py").stat().st_mtime_ns == stamp

    # a changed sdist is refused before anything is unpacked
    root, folder = _copy_project(tmp_path)
    sdist = folder / get_project("isodate").sdist
    data = sdist.read_bytes()
    sdist.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(ProjectError, match="has sha256 .* the manifest says"):
        project_tree(load_project(folder), cache=tmp_path / "other-cache")


def _sdist_with_links(tmp_path, links, files=()):
    import io
    from types import SimpleNamespace

    path = tmp_path / f"demo-{len(list(tmp_path.iterdir()))}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in [("demo-1.0/CONTRIBUTING.md", b"hi\n"), ("demo-1.0/docs/index.md", b"docs\n"), *files]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in links:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return SimpleNamespace(name="demo", sdist=path.name, sdist_path=path)


def test_links_in_an_sdist_are_judged_by_where_they_land(tmp_path):
    """pyparsing 3.3.3 links ``docs/CONTRIBUTING.md`` to ``../CONTRIBUTING.md``: inside the tree, so
    it unpacks; a link out of the tree, or through a link made before it, is refused by name."""
    (tmp_path / "sdists").mkdir()
    project = _sdist_with_links(tmp_path / "sdists", [("demo-1.0/docs/CONTRIBUTING.md", "../CONTRIBUTING.md")])
    (tmp_path / "a").mkdir()
    P._unpack(project, tmp_path / "a")
    assert (tmp_path / "a" / "tree" / "docs" / "CONTRIBUTING.md").read_text() == "hi\n"
    for n, (links, files) in enumerate([
            ([("demo-1.0/docs/up", "../../etc")], ()),
            ([("demo-1.0/abs", "/etc/passwd")], ()),
            ([("demo-1.0/here", "docs/.."), ("demo-1.0/here/out", "../x")], ()),  # 'here' is the tree itself
    ]):
        project = _sdist_with_links(tmp_path / "sdists", links, files)
        (tmp_path / f"b{n}").mkdir()
        with pytest.raises(ProjectError, match="points outside the tree"):
            P._unpack(project, tmp_path / f"b{n}")
    project = _sdist_with_links(tmp_path / "sdists", [("demo-1.0/docs/sub", "..")],
                                [("demo-1.0/docs/sub/docs/sub/../../../x.py", b"")])
    (tmp_path / "c").mkdir()
    with pytest.raises(ProjectError, match="leaves the tree|goes through a link out of the tree"):
        P._unpack(project, tmp_path / "c")


def test_python_files_get_lf_line_endings_in_new_and_old_trees(tmp_path, monkeypatch):
    """A patch made from a file's text has LF lines, which ``git apply`` cannot apply to a CRLF file:
    mistletoe's sdist ships CRLF sources, its tree has none; a tree unpacked before this rule is
    given LF endings in place the next time it is asked for."""
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))
    with tarfile.open(get_project("mistletoe").sdist_path) as tar:
        shipped = [m for m in tar.getmembers() if m.name.endswith(".py") and b"\r\n" in tar.extractfile(m).read()]
    assert len(shipped) > 10
    tree = project_tree("mistletoe")
    assert not [p for p in tree.rglob("*.py") if b"\r\n" in p.read_bytes()]
    # an older tree: CRLF files and the marker without the format
    old = tree / "mistletoe" / "core_tokens.py"
    text = old.read_bytes()
    old.write_bytes(text.replace(b"\n", b"\r\n"))
    (tree / ".termgym-tree").write_text(get_project("mistletoe").sha256 + "\n")
    monkeypatch.setattr(P, "_trees", {})
    assert project_tree("mistletoe") == tree and old.read_bytes() == text
    assert (tree / ".termgym-tree").read_text().split()[1:] == ["lf"]


def test_missing_test_environment_names_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv("TERMGYM_TESTENV_DIR", str(tmp_path / "none"))
    assert P.missing_testenvs() == sorted(load_projects())
    with pytest.raises(TestEnvMissing, match=r"run `termgym swesynth provision --project tinydb`"):
        require_testenv("tinydb")
    with pytest.raises(TestEnvMissing, match="not provisioned"):
        project_sandbox_spec_parts("tinydb")


def test_provisioned_environments_are_reused_and_read_only():
    """What setup provisioned is found and kept as it is (provisioning again changes nothing)."""
    missing = P.missing_testenvs()
    assert not missing, f"run `termgym swesynth provision` (scripts/setup.sh does): {missing}"
    before = {n: (P.testenv_dir(n) / P.MARKER).stat().st_mtime_ns for n in load_projects()}
    lines = []
    assert provision(log=lines.append) == {n: P.testenv_dir(n) for n in load_projects()}
    assert all("ready" in line for line in lines)
    assert before == {n: (P.testenv_dir(n) / P.MARKER).stat().st_mtime_ns for n in load_projects()}
    env = P.testenv_dir("tinydb")
    marker = json.loads((env / P.MARKER).read_text())
    assert marker["requirements"] == list(get_project("tinydb").test_requirements)
    assert (env / "pytest").is_dir() and not os.access(env / "pytest" / "__init__.py", os.W_OK) or os.geteuid() == 0
    assert oct((env / "pytest" / "__init__.py").stat().st_mode & 0o777) == "0o444"
    parts = project_sandbox_spec_parts("humanize")
    assert parts.ro_binds == {str(P.testenv_dir("humanize")): P.TESTENV_MOUNT}
    assert parts.env["PYTHONPATH"] == f"/app/src:{P.TESTENV_MOUNT}"


@pytest.mark.slow
def test_provisioning_builds_a_pinned_environment_from_the_index(tmp_path, monkeypatch):
    monkeypatch.setenv("TERMGYM_TESTENV_DIR", str(tmp_path / "envs"))
    started = time.monotonic()
    built = provision(["isodate"], log=lambda _: None)["isodate"]
    assert built == P.testenv_dir("isodate") and (built / P.MARKER).is_file()
    assert (built / "pytest" / "__init__.py").is_file()
    assert sorted(p.name for p in built.glob("*.dist-info")) == sorted(
        f"{name}-{version}.dist-info" for name, version in (r.split("==") for r in get_project("isodate").test_requirements))
    assert provision(["isodate"], log=lambda _: None)["isodate"] == built  # second call: nothing to do
    assert time.monotonic() - started < 600


@pytest.mark.slow
@pytest.mark.parametrize("name", ["isodate", "humanize", "tinydb"])
def test_clean_suite_passes_in_the_sandbox_under_the_grader(name):
    """A sample (the full sweep is `termgym swesynth provision --check`): src/ layouts, a test
    dependency used through a decorator (freezegun), a plain package."""
    project = get_project(name)
    run = run_clean_suite(name, backend="local")
    assert run.exit_code == 0 and not run.tamper, (run.tamper, run.log_tail[-1500:])
    assert run.counts.get("passed", 0) == project.tests
    assert run.versions.get("pytest") == project.pytest_version
