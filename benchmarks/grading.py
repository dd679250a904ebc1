"""Benchmark 3: SWE-SYNTH grading latency, against simply running the repository's tests.

For each task and backend an episode plays the oracle fix; then, in the agent's sandbox, the
repository's test command runs once (the anchor: what "just run the tests" costs there), then the
same tests under the grader's plugin (``run_graded_tests`` in the agent's sandbox: the audit hook
and signed event stream every grade pays, whatever the backend), and the submitting ``step`` is
timed. That step is what grading costs an RL loop: reading the agent's diff with git, starting a
fresh sandbox with the buggy repository, applying the diff, running the tests under the plugin,
verifying the events, and closing both sandboxes. The ratio grade / tests is the overhead of
grading safely instead of trusting the agent's workspace; grade / plugin run is what is left once
the plugin's own cost is counted as the tests' (the sandbox work: start, copy, files, close).

Docker runs as an RL loop does: its sandboxes come from the process-wide warm pool, which fills
for a task family from its second sandbox on; one untimed episode per task and backend comes first.
Goal (issue 28): Docker grading ≤ 1.3× the tests alone.
"""

from __future__ import annotations

import shlex
import time

from benchmarks.common import MS_COLUMNS, Context, Goal, Samples, Section, Table, fmt_ms, ms_cells
from benchmarks.plots import grouped_bars

NAME = "grading"
TITLE = "Grading latency (SWE-SYNTH)"


def grade_once(env, task_id: str) -> tuple[float, float, float, dict]:
    """Play the oracle fix, time the tests alone and under the grader's plugin, then the grading step;
    return (tests, plugin run, grade, grade dict)."""
    from termgym.env import oracle_actions
    from termgym.tasks.swesynth.grading import run_graded_tests

    env.reset(options={"task_id": task_id})
    actions = oracle_actions(env)
    for action in actions[:-1]:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            raise RuntimeError(f"task {task_id}: the episode ended before the oracle submitted")
    record = env.task.record
    command = f"cd {shlex.quote(record.workdir)} && PYTHONDONTWRITEBYTECODE=1 {record.test_command}"
    started = time.perf_counter()
    result = env.sandbox.exec(command, timeout=record.test_timeout)
    tests = time.perf_counter() - started
    if result.exit_code != 0:
        raise RuntimeError(f"task {task_id}: the tests fail after the oracle fix:\n{result.output[-800:]}")
    task = env.task
    parts = task.test_env_parts()
    paths = {"python_path": parts.python_path, "trusted_dirs": parts.trusted_dirs} if parts else {}
    started = time.perf_counter()
    run = run_graded_tests(env.sandbox, record.test_command, task.workdir, task.source_dirs, record.test_timeout,
                           **paths)
    plugin = time.perf_counter() - started
    if not run.ran:
        raise RuntimeError(f"task {task_id}: the tests did not run under the grader's plugin: {run.log_tail[-800:]}")
    started = time.perf_counter()
    _, reward, terminated, _, info = env.step(actions[-1])
    grade = time.perf_counter() - started
    if not terminated or "grade" not in info:
        raise RuntimeError(f"task {task_id}: submitting did not end the episode with a grade")
    if not info["grade"].get("passed"):
        raise RuntimeError(f"task {task_id}: the oracle fix was graded as failing: {info['grade']}")
    return tests, plugin, grade, info["grade"]


def run(ctx: Context) -> Section:
    section = Section(NAME, TITLE, __doc__.split("\n\n", 1)[1].strip())
    from termgym.env import TerminalEnv

    suite = ctx.swesynth_suite()
    task_ids = ctx.swesynth_task_ids(1 if ctx.quick else 4)
    reps = 1 if ctx.quick else 2
    backends = ["local"]
    docker_ok, why = ctx.docker()
    if docker_ok:
        backends.append("docker")
    else:
        section.notes.append(f"Docker rows skipped: {why}")
    section.notes.append(f"Tasks from {ctx.suite_origin}; {reps} repetition(s) per task and backend.")
    per_task = Table("Per task (medians over repetitions)", ["backend", "task", "tests", "tests alone ms",
                                                            "under the plugin ms", "grading step ms",
                                                            "grade / tests", "grade / plugin run"])
    totals: dict[str, tuple[Samples, Samples, Samples]] = {b: (Samples(), Samples(), Samples()) for b in backends}
    ratios: dict[str, list[float]] = {b: [] for b in backends}
    floor_ratios: dict[str, list[float]] = {b: [] for b in backends}
    data: dict[str, dict] = {}
    for backend in backends:
        env = TerminalEnv(suite, backend=backend)
        try:
            for task_id in task_ids:
                tests_s, plugin_s, grade_s = Samples(), Samples(), Samples()
                ctx.log(f"  {backend}: {task_id}")
                grade_once(env, task_id)  # untimed: caches, and the warm pool's first fill
                for _ in range(reps):
                    tests, plugin, grade, details = grade_once(env, task_id)
                    for samples, value in ((tests_s, tests), (plugin_s, plugin), (grade_s, grade)):
                        samples.add(value)
                    for samples, value in zip(totals[backend], (tests, plugin, grade)):
                        samples.add(value)
                ratio = grade_s.median / tests_s.median
                floor = grade_s.median / plugin_s.median
                ratios[backend].append(ratio)
                floor_ratios[backend].append(floor)
                per_task.add(backend, task_id, details.get("all_result", "?"), fmt_ms(tests_s.median),
                             fmt_ms(plugin_s.median), fmt_ms(grade_s.median), f"{ratio:.2f}×", f"{floor:.2f}×")
                data.setdefault(backend, {})[task_id] = {
                    "tests": tests_s.summary_ms(), "plugin_run": plugin_s.summary_ms(), "grade": grade_s.summary_ms(),
                    "ratio": round(ratio, 3), "ratio_to_plugin_run": round(floor, 3)}
        finally:
            env.close()
    summary = Table("All tasks together", ["backend", "what", *MS_COLUMNS])
    for backend, (tests_s, plugin_s, grade_s) in totals.items():
        summary.add(backend, "tests alone", *ms_cells(tests_s))
        summary.add(backend, "tests under the grader's plugin", *ms_cells(plugin_s))
        summary.add(backend, "grading step", *ms_cells(grade_s))
    ratio_table = Table("Grade / tests ratio (median over tasks, min–max)",
                        ["backend", "grade / tests alone", "grade / tests under the plugin"])
    medians: dict[str, tuple[float, float]] = {}
    for backend in backends:
        cells = []
        for values in (sorted(ratios[backend]), sorted(floor_ratios[backend])):
            cells.append(f"{values[len(values) // 2]:.2f}× ({values[0]:.2f}–{values[-1]:.2f}×)")
        medians[backend] = (sorted(ratios[backend])[len(ratios[backend]) // 2],
                            sorted(floor_ratios[backend])[len(floor_ratios[backend]) // 2])
        ratio_table.add(backend, *cells)
    if "docker" in medians:
        docker_ratio, docker_floor = medians["docker"]
        section.goals.append(Goal("grading docker / tests alone (median over tasks)", docker_ratio, "≤ 1.3×",
                                  docker_ratio <= 1.3))
        section.notes.append(f"Grading step docker / local (medians over all tasks): "
                             f"{totals['docker'][2].median / totals['local'][2].median:.2f}×.")
        section.notes.append(f"Docker grade / tests under the grader's plugin: {docker_floor:.2f}× (local "
                             f"{medians['local'][1]:.2f}×); the plugin's own cost is "
                             f"{totals['docker'][1].median / totals['docker'][0].median:.2f}× the tests alone on "
                             f"Docker and {totals['local'][1].median / totals['local'][0].median:.2f}× on local.")
    section.tables += [summary, ratio_table, per_task]
    section.data = {"per_task": data,
                    "summary": {b: {"tests": t.summary_ms(), "plugin_run": p.summary_ms(), "grade": g.summary_ms()}
                                for b, (t, p, g) in totals.items()}}
    path = ctx.out_dir / "grading.png"
    grouped_bars(path, "SWE-SYNTH: grading step vs running the tests (median ms)", backends,
                 {"tests alone": [totals[b][0].median * 1000 for b in backends],
                  "tests under the plugin": [totals[b][1].median * 1000 for b in backends],
                  "grading step": [totals[b][2].median * 1000 for b in backends]}, "milliseconds")
    section.plots.append(path.name)
    return section
