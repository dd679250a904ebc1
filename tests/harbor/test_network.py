"""Internet at test time: found from a task's files before the run, reported per task, and a run
with the network off refuses such a task with the reason instead of scoring it 0."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import termgym  # noqa: F401 - registers the ids
from termgym.cli import main
from termgym.sandbox.base import BackendUnavailable
from termgym.tasks.harbor import load_task
from termgym.tasks.harbor.network import scan_text

# The shape of Terminal-Bench 2's test.sh: fetch uv, let uvx fetch pytest.
UV_TEST = """\
#!/bin/bash
# curl is used below
curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh
source $HOME/.local/bin/env
uvx -p 3.13 -w pytest==8.4.1 pytest /tests/test_outputs.py -rA && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
"""


def test_scanning_names_the_lines_that_need_the_network():
    needs = scan_text(UV_TEST, "verifier", "tests/test.sh")
    assert [(n.line, n.why) for n in needs] == [(3, "downloads uv"), (5, "uv fetches packages")]
    assert [n.why for n in scan_text("pip install -q requests\npip install --no-index x\n", "verifier", "t")] == [
        "pip installs packages"]
    assert scan_text("curl -s http://localhost:8000/health\npython3 -m pytest /tests\n", "verifier", "t") == []


def test_harbor_list_says_which_tasks_need_the_internet(make_task, tasks_root, capsys):
    make_task("needs-uv", test_sh=UV_TEST)
    make_task("offline")
    make_task("builds-online", dockerfile="FROM termgym/base:bookworm\nRUN apt-get install -y jq\n")
    assert main(["harbor", "list", str(tasks_root)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    uv = next(i for i, line in enumerate(lines) if line.startswith("needs-uv"))
    assert "net: verifier" in lines[uv] and "needs the internet: verifier downloads uv (tests/test.sh:3)" in lines[uv + 1]
    assert "offline ok" in next(line for line in lines if line.startswith("offline"))
    assert "net: build" in next(line for line in lines if line.startswith("builds-online"))
    assert "1 need the internet to grade" in out
    assert main(["harbor", "list", str(tasks_root), "--json"]) == 0
    rows = {r["task_id"]: r for r in json.loads(capsys.readouterr().out)["tasks"]}
    assert rows["needs-uv"]["needs_network"][0]["file"] == "tests/test.sh" and rows["offline"]["needs_network"] == []


def test_with_the_network_off_a_task_that_needs_it_is_refused_with_the_reason(make_task, tasks_root, local_backend):
    make_task("needs-uv", test_sh=UV_TEST)
    make_task("offline")
    env = gym.make("termgym/Harbor-v0", tasks_dir=str(tasks_root), backend=local_backend, network="off")
    try:
        with pytest.raises(BackendUnavailable) as excinfo:
            env.reset(options={"task_id": "needs-uv"})
        message = str(excinfo.value)
        assert "'needs-uv' needs the internet, which this run turned off" in message
        assert "downloads uv (tests/test.sh:3" in message and "not be comparable" in message
        env.reset(options={"task_id": "offline"})  # a task that does not need it runs
    finally:
        env.close()
    # With the task's own policy (allow_internet defaults to true) the task is not refused.
    assert load_task(tasks_root / "needs-uv").sandbox_spec().network is True


def test_eval_no_network_reports_the_refusal_per_task(make_task, tasks_root, tmp_path, local_backend, capsys):
    make_task("needs-uv", test_sh=UV_TEST)
    make_task("offline")
    code = main(["eval", "termgym/Harbor-v0", "--env-arg", f"tasks_dir={tasks_root}", "--backend", local_backend,
                 "--agent", "oracle", "--no-network", "-o", str(tmp_path / "run"), "--quiet", "--infra-retries", "0",
                 "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 3 and summary["solved"] == 1 and summary["infra_errors"] == 1
    episode = json.loads((tmp_path / "run" / "episodes" / "needs-uv__a0.json").read_text())
    assert "needs the internet" in episode["error"]["message"]


def test_eval_preflight_counts_the_tasks_that_need_the_internet(make_task, tasks_root):
    from termgym.commands.eval import harbor_preflight

    make_task("needs-uv", test_sh=UV_TEST)
    make_task("offline")
    text = harbor_preflight({"tasks_dir": str(tasks_root)})
    assert text.startswith("preflight: 1 of 2 task(s) need the internet to grade (e.g. needs-uv: its verifier "
                           "downloads uv (tests/test.sh:3")
    assert "run with the network their task.toml allows" in text
    assert "refused (--no-network)" in harbor_preflight({"tasks_dir": str(tasks_root), "network": "off"})
    (tasks_root / "needs-uv" / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    assert harbor_preflight({"tasks_dir": str(tasks_root)}) == "preflight: none of the 2 task(s) needs the internet to grade"
