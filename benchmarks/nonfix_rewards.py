"""What non-fixes earn under every process-reward table, against the oracle, on bundled SWE-SYNTH tasks.

Not a timing benchmark: returns are exact. For each sampled task, scripted agents play one episode
each through ``gym.make("termgym/SweSynth-v0", path="v1")`` (the suite its figures were measured on) in real bubblewrap sandboxes, graded by the
repository's tests; every reward table watches the same episode (the wrappers are stacked, each
one's reward tapped), with its reconciliation on (as shipped) and off (``failed_cap=None``):

* ``oracle`` — the reference fix;
* ``nop`` — submit at once;
* ``farm`` — the issue's write/revert farm: ``ls tests``, six write/revert cycles of the buggy file,
  ten distinct ``ls``, submit;
* ``swallow`` — the buggy function wrapped so that any exception it raises becomes ``None``;
* ``always_equal`` — the buggy function returns an object equal to everything;
* ``random_edit`` — one random operator or constant flipped in the buggy function.

The non-fixes run the tests once before submitting (as an agent checking its work would). The
ratio reported is a non-fix's return over the oracle's on the same task and table. A non-fix whose
grade *passes* (the repository's tests cannot tell it from a fix) is listed apart: that is a hole
in the grade, not in the reward table::

    python -m benchmarks.nonfix_rewards                   # 8 tasks from 7 projects
    python -m benchmarks.nonfix_rewards --per-project 2 -o nonfix.json
    python -m benchmarks.nonfix_rewards --offset 1 -o more.json     # the next task of each project
"""

from __future__ import annotations

import argparse
import ast
import base64
import json
import random
import re
import statistics
import sys
import time
from pathlib import Path

SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
#: The suite the sample comes from (its task ids and the docs' figures are the v1 suite's).
SUITE = "v1"
PROJECTS = ("isodate", "voluptuous", "tinydb", "parse", "marshmallow", "tomlkit", "tabulate")
SCRIPTS = ("nop", "farm", "swallow", "always_equal", "random_edit")
TABLES = {
    "progress": "progress",
    "seed000": "seed000",
    "progress (reconciliation off)": {"failed_cap": None},
    "seed000 (reconciliation off)": {"base": "seed000", "failed_cap": None},
}

_HELPERS = '''
def _tg_swallow(fn):
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception:
            return None
    return wrapper


class _TgAlwaysEqual:
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __hash__(self):
        return 0


def _tg_always_equal(fn):
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return _TgAlwaysEqual()
    return wrapper
'''
_FLIPS = [("==", "!="), ("!=", "=="), ("<=", "<"), (">=", ">"), (" < ", " <= "), (" > ", " >= "), (" + ", " - "),
          (" - ", " + "), (" and ", " or "), (" or ", " and "), ("True", "False"), ("False", "True"),
          (" is not ", " is "), (" not in ", " in ")]


def cmd(command: str) -> str:
    return f"THOUGHT: next step.\n\n```bash\n{command}\n```"


def buggy_lines(fix_patch: str) -> tuple[str, list[int]]:
    """The file the fix touches and the buggy-side line numbers it removes or changes around."""
    path = re.search(r"^\+\+\+ b/(\S+)", fix_patch, re.M).group(1)
    lines, old = [], 0
    in_file = False
    for line in fix_patch.splitlines():
        if line.startswith("+++ "):
            in_file = line[6:] == path
        elif in_file and line.startswith("@@"):
            old = int(re.match(r"@@ -(\d+)", line).group(1))
        elif in_file and line.startswith("-") and not line.startswith("---"):
            lines.append(old)
            old += 1
        elif in_file and line.startswith("+") and not line.startswith("+++"):
            lines.append(max(old - 1, 1))
        elif in_file and line.startswith(" "):
            old += 1
    return path, lines


def buggy_function(source: str, lines: list[int]) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The innermost function around the first fixed line (a fix may touch several)."""
    best = None
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and lines and \
                node.lineno <= lines[0] <= node.end_lineno:
            if best is None or node.lineno >= best.lineno:
                best = node
    return best


def wrapped_source(source: str, function: ast.FunctionDef | ast.AsyncFunctionDef, decorator: str) -> str:
    """``source`` with ``decorator`` as the innermost decorator of ``function`` and the helpers defined."""
    lines = source.splitlines(keepends=True)
    def_line = function.lineno - 1
    indent = re.match(r"\s*", lines[def_line]).group(0)
    lines.insert(def_line, f"{indent}@{decorator}\n")
    tree = ast.parse(source)
    after = 0
    for node in tree.body:
        docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and node is tree.body[0]
        if docstring or (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            after = node.end_lineno
    lines.insert(after, _HELPERS + "\n")
    return "".join(lines)


def random_edit(source: str, function: ast.FunctionDef | ast.AsyncFunctionDef, seed: str) -> str | None:
    rng = random.Random(seed)
    lines = source.splitlines(keepends=True)
    body = list(range(function.body[0].lineno - 1, function.end_lineno))
    choices = [(i, a, b) for i in body for a, b in _FLIPS if a in lines[i] and not lines[i].lstrip().startswith("#")]
    choices += [(i, d, str((int(d) + 1) % 10)) for i in body for d in re.findall(r"(?<![\w.])\d(?![\w.])", lines[i])]
    if not choices:
        return None
    i, a, b = rng.choice(choices)
    lines[i] = lines[i].replace(a, b, 1)
    return "".join(lines)


def write_file(path: str, text: str) -> str:
    data = base64.b64encode(text.encode()).decode()
    return cmd(f"printf %s {data} | base64 -d > {path} && echo written {path}")


def script_actions(env, name: str, tree: Path) -> list[str] | None:
    """The messages of one script on the current task (None where it does not apply)."""
    from termgym.env import oracle_actions

    task = env.unwrapped.task
    if name == "oracle":
        return oracle_actions(env.unwrapped)
    submit = cmd(f"echo {SUBMIT}")
    if name == "nop":
        return [submit]
    path, lines = buggy_lines(task.record.fix_patch)
    if name == "farm":
        edits = []
        for i in range(6):
            edits += [cmd(f"echo '# tweak' >> {path} && echo edit {i}"),
                      cmd(f"git checkout -- {path} && echo reverted {i}")]
        ls = [cmd(c) for c in ("ls", "ls -la", "ls -l tests", "ls -R | head", "ls -1", "ls -a", "ls -lh", "ls -t",
                               "ls -S", "ls -r")]
        return [cmd("ls tests"), *edits, *ls, submit]
    source = (tree / path).read_text()
    function = buggy_function(source, lines)
    if function is None:
        return None
    if name == "swallow":
        changed = wrapped_source(source, function, "_tg_swallow")
    elif name == "always_equal":
        changed = wrapped_source(source, function, "_tg_always_equal")
    else:
        changed = random_edit(source, function, task.task_id)
        if changed is None:
            return None
    test_command = task.metadata["test_command"]
    return [cmd("ls tests"), write_file(path, changed), cmd(f"{test_command} -q -x 2>&1 | tail -3"), submit]


def tapped_env(cache_dir: str, path: str | None = None):
    """The SWE-SYNTH env (suite ``path``, default the bundled one) under every table of
    :data:`TABLES`, stacked, each one's reward tapped."""
    import gymnasium as gym

    import termgym  # noqa: F401
    from termgym.wrappers.rewards import ProcessReward

    class Tap(gym.Wrapper):
        """Keeps the return and the settlement of the ProcessReward right below it."""

        def __init__(self, env, name: str) -> None:
            super().__init__(env)
            self.name, self.total, self.settled = name, 0.0, None

        def reset(self, **kwargs):
            self.total, self.settled = 0.0, None
            return self.env.reset(**kwargs)

        def step(self, action):
            obs, reward, terminated, truncated, info = self.env.step(action)
            self.total += float(reward)
            if "process_reward" in info:
                self.settled = dict(info["process_reward"])
            return obs, reward, terminated, truncated, info

    options = {"cache_dir": cache_dir, **({"path": path} if path else {})}
    env = gym.make("termgym/SweSynth-v0", max_steps=40, suite_options=options)
    taps = []
    for name, table in TABLES.items():
        env = Tap(ProcessReward(env, table, allow_farmable=True), name)
        taps.append(env)
    return env, taps


def play(env, taps, task_id: str, script: str, tree: Path) -> dict | None:
    env.reset(options={"task_id": task_id})
    actions = script_actions(env, script, tree)
    if actions is None:
        return None
    info = {}
    for action in actions:
        _, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    grade = info.get("grade", {})
    return {"grade": {k: grade.get(k) for k in ("score", "all_result", "target_result", "infra_error", "error")},
            "returns": {tap.name: round(tap.total, 6) for tap in taps}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-project", type=int, default=1, help="tasks per project (isodate gets one more)")
    parser.add_argument("--offset", type=int, default=0, help="skip this many tasks of each project first "
                        "(continue an earlier run on other tasks)")
    parser.add_argument("--cache-dir", default=None, help="prepared-workspace cache (default: termgym's)")
    parser.add_argument("-o", "--output", default=None, help="write every episode as JSON here")
    args = parser.parse_args(argv)

    from termgym.tasks.swesynth import default_suite
    from termgym.tasks.swesynth.task import cache_root, prepare_workspace

    cache_dir = args.cache_dir or str(cache_root())
    suite = default_suite(SUITE, cache_dir=cache_dir)
    ids = suite.task_ids()
    sample = []
    for project in PROJECTS:
        mine = [t for t in ids if t.rsplit("-", 1)[0] == project]
        first = args.offset + (project == "isodate" and args.offset > 0)
        sample += mine[first: first + args.per_project + (project == "isodate")]
    env, taps = tapped_env(cache_dir, SUITE)
    episodes = []
    started = time.monotonic()
    try:
        for task_id in sample:
            tree = prepare_workspace(suite.load(task_id).record, Path(cache_dir))
            for script in ("oracle", *SCRIPTS):
                result = play(env, taps, task_id, script, tree)
                if result is not None:
                    episodes.append({"task_id": task_id, "script": script, **result})
                    print(f"{task_id:28} {script:13} grade {result['grade']['score']} "
                          f"{result['grade']['all_result']:>9} target {result['grade']['target_result']:>5} "
                          + " ".join(f"{v:6.3f}" for v in result["returns"].values()), flush=True)
    finally:
        env.close()
    report = summarise(episodes)
    print(f"\n{len(sample)} tasks, {len(episodes)} episodes, {time.monotonic() - started:.0f} s\n")
    print(report)
    if args.output:
        Path(args.output).write_text(json.dumps({"episodes": episodes, "report": report}, indent=1))
    bad = [e for e in episodes if e["script"] != "oracle" and e["grade"]["score"] != 1.0
           and any(e["returns"][t] >= 0.5 * oracle_return(episodes, e["task_id"], t)
                   for t in ("progress", "seed000"))]
    return 1 if bad else 0


def oracle_return(episodes: list[dict], task_id: str, table: str) -> float:
    return next(e["returns"][table] for e in episodes if e["task_id"] == task_id and e["script"] == "oracle")


def summarise(episodes: list[dict]) -> str:
    """A markdown table: per reward table and non-fix, the return / oracle return ratio over the tasks."""
    rows = ["| table | non-fix | tasks | grade failed | max ratio | median ratio | grade passed (excluded) |",
            "|---|---|---|---|---|---|---|"]
    for table in TABLES:
        for script in SCRIPTS:
            mine = [e for e in episodes if e["script"] == script]
            failed = [e for e in mine if e["grade"]["score"] != 1.0]
            ratios = [e["returns"][table] / oracle_return(episodes, e["task_id"], table) for e in failed]
            passed = [e["task_id"] for e in mine if e["grade"]["score"] == 1.0]
            rows.append(f"| {table} | {script} | {len(mine)} | {len(failed)} | "
                        f"{max(ratios):.3f} | {statistics.median(ratios):.3f} | {', '.join(passed) or '-'} |"
                        if ratios else f"| {table} | {script} | {len(mine)} | 0 | - | - | {', '.join(passed)} |")
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
