"""Ten PyPI projects nobody bundled, added, generated from and played at load above the core count.

The proof of issue 43 as a newcomer would run it, every step through termgym's command line:

1. ``termgym swesynth add-project NAME==VERSION --root ROOT --domain ... --description ...`` with no
   other flag (what a project needs beyond that is in :data:`PROJECTS`, with the reason);
2. ``termgym swesynth generate --project NAME --projects-dir ROOT --n N --seed S --out SUITE``;
3. with ``cores + 1`` busy-loop processes loading the host, ``termgym eval termgym/SweSynth-v0
   --env-arg path=SUITE`` with the oracle and with the do-nothing agent (``nop``), each episode
   through ``gym.make``: once as served by default (``behaviour="required"``: the tasks whose
   behaviour check tells the bug apart), once every generated task (``--env-arg behaviour=any``).

Not a CI test (20-40 minutes on a 2-core box). Every command's output goes to ``OUT/logs``, the
summary to ``OUT/summary.json`` (with how many tasks each project has served by default); the exit
status is 0 only when every project was added and gave tasks, and every task scored 1 with the
oracle and 0 doing nothing in both evals, without an infrastructure error::

    python -m benchmarks.added_projects --out /tmp/added               # all ten, 3 tasks each
    python -m benchmarks.added_projects --out /tmp/added --only roman --n 2
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from termgym.factory.swesynth.flaky import cores, cpu_load


@dataclass(frozen=True)
class Candidate:
    requirement: str
    style: str  # the suite style its maintainers run: "unittest" or "pytest"
    domain: str
    description: str
    flags: tuple[str, ...] = ()  # beyond the name and version, each with its reason in `why`
    why: str = ""


#: Not bundled, not named in issue 43, permissive licences, tests in the sdist. Half of them are
#: unittest suites, kept where pytest's defaults do not look (``src/tests.py``, a top-level ``test.py``,
#: ``tests/Test*.py`` named by ``test_suite``, a test module inside the package). Tried and not among
#: them (docs/swesynth.md says why): termcolor 2.5.0 (its tests expect colour where ``TERM`` is not
#: ``dumb``, and every sandbox sets ``TERM=dumb``), natsort 8.4.0 (its locale tests need
#: ``en_US.UTF-8``, which the runtime does not generate), iso8601 2.1.0 and pytimeparse 1.1.8 (added,
#: but generation found no bug it could report), decorator 5.1.1.
PROJECTS: tuple[Candidate, ...] = (
    Candidate("roman==4.2", "unittest", "numerals", "Roman numeral conversion."),
    Candidate("pyotp==2.9.0", "unittest", "authentication", "One-time passwords (HOTP and TOTP)."),
    Candidate("parsedatetime==2.6", "unittest", "dates", "Natural-language date and time parsing."),
    Candidate("shortuuid==1.0.13", "unittest", "identifiers", "Short, URL-safe UUIDs."),
    Candidate("simpleeval==1.0.3", "unittest", "expressions", "A safe evaluator of Python expressions.",
              ("--deselect-failing",), "test_load_file writes testfile.txt into the working tree, which is "
              "read-only under the grader (PermissionError); add-project names it and proposes leaving it out"),
    Candidate("jsonlines==4.0.0", "pytest", "data formats", "Reading and writing JSON Lines files."),
    Candidate("prettytable==3.12.0", "pytest", "text tables", "ASCII tables from rows of data."),
    Candidate("emoji==2.14.0", "pytest", "text", "Emoji codes, names and analysis in strings."),
    Candidate("inflect==7.3.1", "pytest", "English words", "Plurals, singulars, ordinals and indefinite articles."),
    Candidate("linkify-it-py==2.0.3", "pytest", "text", "Finding links in plain text."),
)


@dataclass
class Outcome:
    name: str
    requirement: str
    style: str
    command: list[str]
    why: str = ""  # why the command has flags beyond the name and version
    added: bool = False
    add_seconds: float = 0.0
    add_log: list[str] = field(default_factory=list)  # the lines worth quoting
    generated: int = 0
    generate_seconds: float = 0.0
    oracle: dict[str, float] = field(default_factory=dict)  # the tasks gym.make serves by default
    nop: dict[str, float] = field(default_factory=dict)
    oracle_any: dict[str, float] = field(default_factory=dict)  # every generated task (behaviour="any")
    nop_any: dict[str, float] = field(default_factory=dict)

    @property
    def behaved(self) -> bool:
        """Added, some task generated, and every task (served by default or not): oracle 1, doing nothing 0."""
        return (self.added and self.generated > 0 and self.oracle.keys() == self.nop.keys()
                and len(self.oracle_any) == len(self.nop_any) == self.generated
                and all(r == 1.0 for r in [*self.oracle.values(), *self.oracle_any.values()])
                and all(r == 0.0 for r in [*self.nop.values(), *self.nop_any.values()]))


def _run(cmd: list[str], log: Path, env: dict[str, str] | None = None, timeout: float = 3600) -> tuple[int, str, float]:
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    seconds = time.monotonic() - started
    text = f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}\n[exit {proc.returncode} after {seconds:.1f}s]\n"
    with log.open("a", encoding="utf-8") as f:
        f.write(text)
    return proc.returncode, proc.stdout + proc.stderr, seconds


_QUOTED = re.compile(r": (added |clean suite|left out|python_files|declared runtime|setup\.cfg|pyproject|tox\.ini|"
                     r"pytest\.ini|no flaky|probe: run|test lock)|^added |^\S+ \S+: \S+, source ")


def _project_name(requirement: str) -> str:
    return requirement.split("==")[0]


def add(candidate: Candidate, root: Path, logs: Path) -> Outcome:
    cmd = ["termgym", "swesynth", "add-project", candidate.requirement, "--root", str(root),
           "--domain", candidate.domain, "--description", candidate.description, *candidate.flags]
    out = Outcome(name=_project_name(candidate.requirement), requirement=candidate.requirement,
                  style=candidate.style, command=cmd, why=candidate.why)
    log = logs / f"{out.name}.add.log"
    if folder_name(root, candidate.requirement) and log.is_file():  # added by an earlier run: resume
        text = log.read_text(encoding="utf-8")
        out.added, out.add_seconds = True, float(re.findall(r"\[exit 0 after ([\d.]+)s\]", text)[-1])
    else:
        code, text, out.add_seconds = _run(cmd, log)
        out.added = code == 0
    out.add_log = [line for line in text.splitlines() if _QUOTED.search(line)]
    return out


def folder_name(root: Path, requirement: str) -> str | None:
    """The project folder add-project wrote (its name is the sdist's, e.g. ``pytimeparse``)."""
    wanted = re.sub(r"[-_.]+", "_", _project_name(requirement)).lower()
    for folder in root.iterdir() if root.is_dir() else ():
        if re.sub(r"[-_.]+", "_", folder.name).lower() == wanted:
            return folder.name
    return None


def generate(out: Outcome, project: str, root: Path, suite: Path, logs: Path, *, n: int, seed: int) -> None:
    done = _count_tasks(suite, project)
    log = logs / f"{out.name}.generate.log"
    if done and log.is_file():  # generated by an earlier run: resume
        out.generated = done
        out.generate_seconds = float(re.findall(r"\[exit \d+ after ([\d.]+)s\]", log.read_text())[-1])
        return
    before = _count_tasks(suite)
    cmd = ["termgym", "swesynth", "generate", "--project", project, "--projects-dir", str(root), "--n", str(n),
           "--seed", str(seed), "--out", str(suite), "--storage", "compact"]
    _, _, out.generate_seconds = _run(cmd, log)
    out.generated = _count_tasks(suite) - before


def _count_tasks(suite: Path, project: str = "") -> int:
    """Tasks in the suite (of ``project``, when given: ids start with its name)."""
    index = suite / "suite.json"
    if not index.is_file():
        return 0
    data = json.loads(index.read_text())
    return sum(1 for ids in (data.get("splits") or {}).values() for t in ids if t.startswith(f"{project}-" if project else ""))


def play(agent: str, suite: Path, root: Path, out_dir: Path, logs: Path, *, concurrency: int,
         behaviour: str = "") -> dict:
    """One ``termgym eval`` of ``agent`` on the suite: the default (the tasks whose behaviour check tells
    the bug apart), or every task with ``behaviour="any"`` (graded by the tests alone where a task has no check)."""
    env = {**os.environ, "TERMGYM_SWESYNTH_PROJECTS": str(root)}
    cmd = ["termgym", "eval", "termgym/SweSynth-v0", "-a", agent, "--env-arg", f"path={suite}", "--split", "all",
           "-n", str(concurrency), "-o", str(out_dir), "--max-steps", "10", "--progress", "off", "--json"]
    cmd += ["--env-arg", f"behaviour={behaviour}"] if behaviour else []
    _, text, _ = _run(cmd, logs / f"eval.{agent}{'.' + behaviour if behaviour else ''}.log", env=env)
    summary = json.loads((out_dir / "summary.json").read_text())
    return {"per_task": {t["task_id"]: t["mean_score"] for t in summary["per_task"]},
            "infra_errors": sum(t["infra_errors"] for t in summary["per_task"]),
            "tests_alone": "UnsafeGradingWarning" in text}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="work folder: projects/, suite/, logs/, summary.json")
    ap.add_argument("--only", action="append", default=[], help="a project name (repeatable; default all ten)")
    ap.add_argument("--n", type=int, default=3, help="tasks to generate per project")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--busy", type=int, default=cores() + 1, help="busy-loop processes during the evals")
    ap.add_argument("--concurrency", type=int, default=2, help="episodes at once in each eval")
    args = ap.parse_args(argv)
    root, suite, logs = args.out / "projects", args.out / "suite", args.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    chosen = [c for c in PROJECTS if not args.only or _project_name(c.requirement) in args.only]
    outcomes: list[Outcome] = []
    for candidate in chosen:
        outcome = add(candidate, root, logs)
        print(f"{outcome.name}: add-project {'ok' if outcome.added else 'FAILED'} in {outcome.add_seconds:.0f}s",
              flush=True)
        project = folder_name(root, candidate.requirement) if outcome.added else None
        if project:
            generate(outcome, project, root, suite, logs, n=args.n, seed=args.seed)
            print(f"{outcome.name}: generated {outcome.generated} task(s) in {outcome.generate_seconds:.0f}s",
                  flush=True)
        outcomes.append(outcome)
    load: dict[str, object] = {"busy": args.busy, "cores": cores()}
    episodes: dict[str, dict] = {}  # agent[-any] -> {"per_task": {task: mean score}, "infra_errors", "tests_alone"}
    if _count_tasks(suite):
        samples: list[float] = []
        stop = threading.Event()

        def sample() -> None:  # the 1-minute load average every 10 s while the evals run
            while not stop.wait(10):
                samples.append(os.getloadavg()[0])

        sampler = threading.Thread(target=sample, daemon=True)
        with cpu_load(args.busy, seconds=7200):
            time.sleep(5)
            sampler.start()
            load["loadavg_start"] = os.getloadavg()[0]
            for agent in ("oracle", "nop"):
                episodes[agent] = play(agent, suite, root, args.out / f"eval-{agent}", logs,
                                       concurrency=args.concurrency)
                episodes[f"{agent}-any"] = play(agent, suite, root, args.out / f"eval-{agent}-any", logs,
                                                concurrency=args.concurrency, behaviour="any")
            load["loadavg_end"] = os.getloadavg()[0]
            stop.set()
        if samples:
            load["loadavg_1min"] = {"min": round(min(samples), 2), "median": round(sorted(samples)[len(samples) // 2], 2),
                                    "max": round(max(samples), 2), "samples": len(samples)}
    for outcome in outcomes:
        prefix = (folder_name(root, outcome.requirement) or outcome.name) + "-"
        for agent, scores in (("oracle", outcome.oracle), ("nop", outcome.nop), ("oracle-any", outcome.oracle_any),
                              ("nop-any", outcome.nop_any)):
            scores.update({t: r for t, r in episodes.get(agent, {}).get("per_task", {}).items() if t.startswith(prefix)})
    ok = bool(outcomes) and all(o.behaved for o in outcomes) and not any(e["infra_errors"] for e in episodes.values())
    ok = ok and not episodes["oracle"]["tests_alone"] and not episodes["nop"]["tests_alone"]
    summary = {"machine": f"{cores()} cores", "n": args.n, "seed": args.seed, "load": load, "ok": ok,
               "evals": {a: {k: v for k, v in e.items() if k != "per_task"} for a, e in episodes.items()},
               "projects": [o.__dict__ for o in outcomes]}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    for o in outcomes:
        print(f"{o.name:14} {o.style:8} added={o.added} generated={o.generated} served={len(o.oracle)} "
              f"oracle={sorted(o.oracle.values())} nop={sorted(o.nop.values())} "
              f"(every task: oracle={sorted(o.oracle_any.values())} nop={sorted(o.nop_any.values())})")
    print(f"load: {load}; all behaved: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
