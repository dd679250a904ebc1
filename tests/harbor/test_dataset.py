"""Registered datasets: a local git repository and registry file stand in for Harbor's registry.

The registry names each task by repository, path and commit, as Harbor's ``registry.json`` does;
termgym fetches them with real git, checks the commit, caches them, and serves them offline.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from termgym.cli import main
from termgym.tasks.harbor import HarborSuite
from termgym.tasks.harbor.registry import RegistryError, cached_dataset, download_dataset, read_registry


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def task_repo(tmp_path, write_task):
    """A git repository with two task folders under tasks/, committed twice (v1, then v2 changes one)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    write_task(repo / "tasks", "hello", instruction="Write ok to /app/done.txt (v1).")
    write_task(repo / "tasks", "other", instruction="Another task.")
    (repo / "README.md").write_text("not a task\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "v1")
    v1 = git(repo, "rev-parse", "HEAD")
    (repo / "tasks" / "hello" / "instruction.md").write_text("Write ok to /app/done.txt (v2).\n")
    git(repo, "commit", "-qam", "v2")
    v2 = git(repo, "rev-parse", "HEAD")
    return repo, v1, v2


def registry_file(tmp_path, repo, commit, *, name="bench", version="1.0", tasks=None):
    url = repo.as_uri()
    tasks = tasks if tasks is not None else [
        {"name": "hello", "git_url": url, "git_commit_id": commit, "path": "tasks/hello"},
        {"name": "other", "git_url": url, "git_commit_id": commit, "path": "tasks/other"},
    ]
    path = tmp_path / f"registry-{name}-{version}.json"
    path.write_text(json.dumps([{"name": name, "version": version, "description": "stand-in", "tasks": tasks}]))
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TERMGYM_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "harbor" / "datasets"


def test_download_fetches_each_task_at_its_commit_and_works_offline_after(tmp_path, task_repo, cache):
    repo, v1, _ = task_repo
    registry = registry_file(tmp_path, repo, v1)
    dataset = download_dataset("bench@1.0", registry=registry)
    assert dataset.path == cache / "bench@1.0" and sorted(dataset.fetched) == ["hello", "other"]
    # The commit the registry names (v1), not the branch head (v2).
    assert (dataset.path / "hello" / "instruction.md").read_text().strip().endswith("(v1).")
    assert {t["commit"] for t in dataset.manifest["tasks"]} == {v1}
    assert not (dataset.path / "README.md").exists()  # only the task folders
    # Offline afterwards: the registry and the repository are gone, the cache still serves.
    registry.unlink()
    shutil.rmtree(repo)
    again = download_dataset("bench@1.0", registry=registry)
    assert again.fetched == [] and sorted(again.task_names) == ["hello", "other"]
    suite = HarborSuite(dataset="bench@1.0")
    assert list(suite.task_ids()) == ["hello", "other"] and suite.source == "bench@1.0"
    assert suite.load("hello").metadata["source"] == "bench@1.0"


def test_a_changed_cached_task_is_named_and_force_refetches(tmp_path, task_repo, cache):
    repo, v1, _ = task_repo
    registry = registry_file(tmp_path, repo, v1)
    dataset = download_dataset("bench@1.0", registry=registry)
    (dataset.path / "hello" / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    with pytest.raises(RegistryError, match=r"cached task 'hello' of bench@1.0 .* differs from what was fetched "
                                            rf"at commit {v1}: download it again with --force"):
        cached_dataset("bench@1.0")
    fresh = download_dataset("bench@1.0", registry=registry, force=True)
    assert "reward.txt" in (fresh.path / "hello" / "tests" / "test.sh").read_text()
    assert "grep -qx ok" in (fresh.path / "hello" / "tests" / "test.sh").read_text()
    assert cached_dataset("bench@1.0") is not None


def test_a_commit_the_repository_lacks_is_named(tmp_path, task_repo, cache):
    repo, _, _ = task_repo
    missing = "0" * 40
    registry = registry_file(tmp_path, repo, missing)
    with pytest.raises(RegistryError) as excinfo:
        download_dataset("bench@1.0", registry=registry)
    message = str(excinfo.value)
    assert "bench@1.0" in message and repo.as_uri() in message and missing in message
    assert not (cache / "bench@1.0" / "manifest.json").exists()


def test_a_path_missing_at_the_commit_is_named(tmp_path, task_repo, cache):
    repo, v1, _ = task_repo
    registry = registry_file(tmp_path, repo, v1, tasks=[
        {"name": "ghost", "git_url": repo.as_uri(), "git_commit_id": v1, "path": "tasks/ghost"}])
    with pytest.raises(RegistryError, match=rf"task 'ghost': no folder 'tasks/ghost' in .* at commit {v1}"):
        download_dataset("bench@1.0", registry=registry)


@pytest.mark.parametrize("entry, message", [
    ({"name": "x", "git_url": "u", "git_commit_id": "abc", "path": "t/x"},
     r"tasks\[0\] \(x\): 'git_commit_id' must be a full commit hash \(40 hex digits\), got 'abc'"),
    ({"name": "x", "git_url": "u", "path": "/abs"}, r"tasks\[0\]: 'path' '/abs' must stay inside the repository"),
    ({"name": "x", "git_url": "u", "path": "../up"}, r"'path' '../up' must stay inside the repository"),
    ({"name": "x", "git_url": "u"}, r"tasks\[0\]: 'path' must be a path in the repository, got None"),
    ({"name": "x", "path": "t/x"}, r"tasks\[0\] \(x\): no 'git_url'"),
    ({"name": "bad name", "git_url": "u", "path": "t/x"}, r"'name' 'bad name' is not a folder name"),
])
def test_a_broken_registry_entry_is_named(tmp_path, entry, message):
    path = tmp_path / "registry.json"
    path.write_text(json.dumps([{"name": "bench", "version": "1.0", "tasks": [entry]}]))
    with pytest.raises(RegistryError, match=message) as excinfo:
        read_registry(path)
    assert f"{path}: dataset bench@1.0" in str(excinfo.value)


def test_registry_level_errors_are_named(tmp_path, cache):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(RegistryError, match=f"the Harbor registry {bad} is not valid JSON"):
        read_registry(bad)
    bad.write_text(json.dumps({"name": "x"}))
    with pytest.raises(RegistryError, match="must be a JSON list of datasets, got dict"):
        read_registry(bad)
    bad.write_text(json.dumps([{"name": "bench", "version": "1.0", "tasks": []}]))
    with pytest.raises(RegistryError, match=r"no version '9.9' of 'bench' \(versions: 1.0\)"):
        download_dataset("bench@9.9", registry=bad)
    with pytest.raises(RegistryError, match=r"no dataset 'nope' in .* \(it has: bench\)"):
        download_dataset("nope@1.0", registry=bad)
    with pytest.raises(RegistryError, match="cannot read the Harbor registry /no/such/registry.json"):
        download_dataset("bench@1.0", registry="/no/such/registry.json")
    with pytest.raises(RegistryError, match="is not NAME@VERSION"):
        download_dataset("bench@", registry=bad)


def test_cli_download_then_list_and_eval_from_the_cache(tmp_path, task_repo, cache, capsys, local_backend):
    repo, v1, _ = task_repo
    registry = registry_file(tmp_path, repo, v1)
    assert main(["harbor", "download", "bench@1.0", "--registry", str(registry)]) == 0
    out = capsys.readouterr().out
    assert "bench@1.0: 2 task(s)" in out and "2 fetched, 0 from the cache" in out and v1[:12] in out
    assert main(["harbor", "download", "bench@1.0", "--registry", str(registry), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fetched"] == []
    assert main(["harbor", "download", "bench@1.0", "--registry", str(tmp_path / "none.json"), "--force"]) == 2
    assert "cannot read the Harbor registry" in capsys.readouterr().err
    assert main(["harbor", "list", "bench@1.0"]) == 0
    assert "hello" in capsys.readouterr().out
    # The documented path: eval --dataset, here with the oracle on the local backend.
    code = main(["eval", "termgym/Harbor-v0", "--dataset", "bench@1.0", "--agent", "oracle", "--backend", "local",
                 "-o", str(tmp_path / "run"), "--quiet", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["solved"] == 2 and summary["episodes"] == 2
    job = json.loads((tmp_path / "run" / "result.json").read_text())
    trial = next(t for t in job["trial_results"] if t["task_name"] == "hello")
    assert trial["task_id"] == {"git_url": repo.as_uri(), "git_commit_id": v1, "path": "tasks/hello"}
    assert trial["source"] == "bench" and job["stats"]["evals"]["oracle__bench"]["metrics"] == [{"mean": 1.0}]
