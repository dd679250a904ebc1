"""The benchmarks' quick mode runs end to end and writes a report of the promised shape.

CI runs this so the benchmarks never rot. One quick run (under 3 minutes on 2 cores) is shared by
the structure checks; the selection and ``termgym bench`` checks need no run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SECTIONS = ["step", "reset", "grading", "throughput", "generation"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def docker_usable() -> bool:
    try:
        from termgym.sandbox.docker import get_client
        from termgym.sandbox.images import DEFAULT_BASE_IMAGE

        client = get_client()
        client.ping()
        client.images.get(DEFAULT_BASE_IMAGE)
        return True
    except Exception:
        return False


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    pytest.importorskip("matplotlib", reason="the benchmarks need the bench extra: pip install -e '.[bench]'")
    out = tmp_path_factory.mktemp("bench")
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    return out, proc


def test_quick_run_succeeds_and_writes_every_file(quick_run):
    out, proc = quick_run
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (out / "RESULTS.md").is_file()
    results = json.loads((out / "results.json").read_text())
    assert results["quick"] is True
    assert set(results["benchmarks"]) == set(SECTIONS)
    for name, section in results["benchmarks"].items():
        assert section["error"] is None, f"{name}: {section['error']}"
        assert section["plots"], f"{name} made no plot"
        for plot in section["plots"]:
            assert (out / plot).read_bytes()[:8] == PNG_MAGIC, f"{plot} is not a PNG"


def test_report_names_machine_date_command_and_spreads(quick_run):
    out, _ = quick_run
    text = (out / "RESULTS.md").read_text()
    results = json.loads((out / "results.json").read_text())
    machine = results["machine"]
    for key in ("cpu_model", "cores", "memory_gib", "kernel"):
        assert machine[key], key
    assert f"python -m benchmarks --quick --out {out}" in text
    assert results["date"][:4].isdigit() and results["date"] in text
    assert machine["cpu_model"] in text and f"kernel {machine['kernel']}" in text
    # every latency table carries a median and a spread
    assert text.count("| median ms | p10 ms | p90 ms | n |") >= 3
    for n, title in enumerate(["Step overhead", "Reset latency", "Grading latency", "Throughput",
                               "SWE-SYNTH task generation"], 1):
        assert f"## {n}. {title}" in text


def test_step_rows_and_goals(quick_run):
    out, _ = quick_run
    results = json.loads((out / "results.json").read_text())
    step = results["benchmarks"]["step"]["data"]
    for row in ("raw pexpect round trip", "raw subprocess.run", "termgym local persistent",
                "termgym local stateless", "mini-swe-agent LocalEnvironment"):
        assert step[row]["n"] > 0 and step[row]["median_ms"] > 0, row
        assert step[row]["p10_ms"] <= step[row]["median_ms"] <= step[row]["p90_ms"], row
    if docker_usable():
        for row in ("termgym docker persistent", "termgym docker stateless", "raw docker exec (CLI)",
                    "mini-swe-agent DockerEnvironment"):
            assert step[row]["n"] > 0, row
        assert "termgym docker + warm pool" in results["benchmarks"]["reset"]["data"]["reset"]
    goals = {g["goal"]: g for g in results["goals"]}
    over = goals["local persistent step overhead over raw pexpect"]
    assert over["verdict"] in {"met", "NOT met"} and over["target"] == "≤ 1 ms"
    assert any(name.startswith("SWE-SYNTH reset median") for name in goals)


def test_throughput_and_generation_counted_real_episodes(quick_run):
    out, _ = quick_run
    results = json.loads((out / "results.json").read_text())
    light = results["benchmarks"]["throughput"]["data"]["light"]["local"]
    assert light["4"]["episodes"] == 4 and light["4"]["passed"] == 4 and light["4"]["errors"] == []
    swesynth = results["benchmarks"]["throughput"]["data"]["swesynth"]["local"]
    assert swesynth["2"]["passed"] == 2
    stats = results["benchmarks"]["generation"]["data"]["stats"]
    assert stats["kept"] == 2 and stats["attempted"] >= 2
    per_type = results["benchmarks"]["generation"]["data"]["per_type"]
    assert sum(row["kept"] for row in per_type.values()) == stats["kept"]


def test_unknown_benchmark_is_a_clear_error():
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "--only", "nope"], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2
    assert "unknown benchmark(s) 'nope'" in proc.stderr and "step" in proc.stderr


def test_selection_keeps_run_order():
    sys.path.insert(0, str(REPO))
    from benchmarks import selected

    assert selected(["reset,step"]) == ["step", "reset"]
    assert selected(None)[0] == "step" and len(selected(None)) == len(SECTIONS)


def test_termgym_bench_outside_a_checkout_says_what_to_do(tmp_path):
    from termgym.commands.bench import NOT_A_CHECKOUT, find_benchmarks

    assert find_benchmarks([tmp_path]) is None
    # a stray top-level benchmarks package without termgym/ beside it does not count
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "__init__.py").write_text("")
    assert find_benchmarks([tmp_path]) is None
    assert "source checkout" in NOT_A_CHECKOUT
    script = ("import sys, termgym.commands.bench as b; from pathlib import Path; "
              f"b.candidate_dirs = lambda: [Path({str(tmp_path)!r})]; "
              "from termgym.cli import main; sys.exit(main(['bench', '--only', 'step']))")
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "needs a source checkout" in proc.stderr and "pip install -e '.[bench]'" in proc.stderr


def test_termgym_bench_finds_the_checkout():
    from termgym.commands.bench import find_benchmarks

    module = find_benchmarks([REPO])
    assert module is not None and Path(module.__file__).resolve() == REPO / "benchmarks" / "__init__.py"
    assert hasattr(module, "run") and list(module.BENCHMARKS) == SECTIONS


TINY_BENCHMARK = '''"""A one-line benchmark for the output-folder tests.

It measures nothing worth keeping."""
from benchmarks.common import Section

TITLE = "Tiny"


def run(ctx):
    return Section("tiny", TITLE, "nothing", data={"out_dir": str(ctx.out_dir)})
'''


@pytest.fixture
def tiny_benchmarks(tmp_path, monkeypatch):
    """The real entry point with one trivial benchmark registered, run from ``tmp_path``."""
    sys.path.insert(0, str(REPO))
    import benchmarks

    (tmp_path / "tiny_bench.py").write_text(TINY_BENCHMARK)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(benchmarks, "BENCHMARKS", {"tiny": "tiny_bench"})
    monkeypatch.setattr(benchmarks, "RUN_ORDER", ["tiny"])
    monkeypatch.chdir(tmp_path)
    return benchmarks


def _committed_results() -> dict[str, bytes]:
    return {name: (REPO / "benchmarks" / name).read_bytes() for name in ("RESULTS.md", "results.json")}


def test_a_run_writes_a_new_run_folder_and_leaves_committed_results_alone(tiny_benchmarks, tmp_path):
    before = _committed_results()
    assert tiny_benchmarks.main([]) == 0
    runs = sorted((tmp_path / "runs" / "bench").iterdir())
    assert runs and all((run / "RESULTS.md").is_file() and (run / "results.json").is_file() for run in runs)
    assert json.loads((runs[-1] / "results.json").read_text())["benchmarks"]["tiny"]["data"]["out_dir"] == str(runs[-1])
    assert _committed_results() == before


def test_update_results_writes_the_committed_folder(tiny_benchmarks, tmp_path, monkeypatch):
    committed = tmp_path / "committed"
    monkeypatch.setattr(tiny_benchmarks, "COMMITTED_RESULTS", committed)
    assert tiny_benchmarks.main(["--update-results"]) == 0
    assert (committed / "RESULTS.md").is_file()
    assert "--update-results" in (committed / "RESULTS.md").read_text()
    assert not (tmp_path / "runs").exists()


def test_out_and_update_results_together_is_an_error():
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "--out", "x", "--update-results"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "not allowed with argument" in proc.stderr


def test_a_throughput_level_gets_the_time_its_episodes_need_at_the_rate_below():
    from benchmarks.throughput import MAX_BUDGET, level_budget

    assert level_budget(180.0, 8, None) == 180.0  # the first level: the base budget
    assert level_budget(180.0, 64, 2.0) == 180.0  # 64 episodes at 2/s fit the base budget
    assert level_budget(180.0, 256, 1.0) == min(MAX_BUDGET, 384.0)
    assert level_budget(180.0, 256, 1.6) == 240.0
    assert level_budget(180.0, 256, 0.0) == 180.0  # nothing passed below: the level is not stretched
