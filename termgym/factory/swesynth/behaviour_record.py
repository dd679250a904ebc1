"""Recording a task's behaviour check at generation (the factory side of :mod:`~termgym.tasks.swesynth.behaviour`).

For one task (:func:`record_behaviour`), in one real sandbox of the task's runtime with the project's
provisioned test environment:

1. the functions and methods the bug patch changes are found on the clean tree (:func:`changed_functions`);
2. in a sandbox of the clean tree, the tests the bug breaks run with the probe's
   recorder (:mod:`~termgym.tasks.swesynth.behaviour_probe`), which pickles the arguments (``self``
   included) of every call into those functions before the call runs; calls whose pickles need a
   test module are skipped; it also keeps the digest of *every* call the tests make into them;
3. perturbed variants are made (neighbouring numbers, trimmed and extended strings and lists, other
   dict keys, flipped flags, other callables, neighbouring dates and durations, project objects'
   attributes, slots, named-tuple fields and items); a candidate whose digest is one of the tests'
   calls is not *held out*; where a function's bug is then told apart only by test calls, those
   calls are perturbed further (:func:`_calls_to_perturb_further`);
   an input whose pickled arguments hold a clock (a cache timed by ``datetime.now`` or
   ``time.monotonic``: its answer moves with the replaying machine's clock, days later or on another
   machine) is not a candidate (:func:`~termgym.tasks.swesynth.behaviour.clock_reference`);
4. every input is replayed twice on the clean tree and once on the buggy tree (each in a fresh
   isolated interpreter); inputs the clean code answers differently twice are dropped;
5. a check is kept only if the buggy code answers at least one input differently (held-out ones
   are chosen first: a task is served by ``behaviour="required"`` only if one of them tells the
   bug apart, :func:`~termgym.tasks.swesynth.behaviour.servable`); the chosen
   inputs are replayed once more on each tree, in order, in a *fresh* sandbox (nothing the tests
   left behind), to prove the stored answers; inputs answered differently there are dropped;
6. for a bug in two or more functions, the stored inputs are replayed once per function with only
   that function's hunks of the bug patch (:func:`per_bug_telling`): a task is served only if each
   function's bug alone is told apart by a held-out input (a half fix is not a fix).

:func:`backfill` does that for every task of an existing suite, in parallel and resumably, and
writes the checks beside the records (``behaviour/<project>.jsonl`` of a compact suite,
``behaviour.json`` in a task folder).
"""

from __future__ import annotations

import ast
import json
import re
import shlex
import threading
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from termgym.tasks.swesynth import pyparse
from termgym.tasks.swesynth.behaviour import (
    BEHAVIOUR_VERSION,
    CALL_SECONDS,
    CANONICAL_VERSION,
    PROBE_SOURCE,
    clock_reference,
    heldout_outcomes,
    heldout_telling,
    module_name,
    needs_marking,
    outcome_digest,
    replay_spec,
    run_replay,
    state_evidence,
    task_sys_path,
)

#: Bounds that keep the bundled suite's checks small (a few KB per task).
MAX_PER_TARGET = 8  # distinct recorded calls per changed function
MAX_INPUT_BYTES = 2048  # pickled arguments of one input
MAX_LARGE_INPUT_BYTES = 8192  # a function with no call that small keeps its smallest up to this size
PERTURB_PER_CALL = 9
MAX_CANDIDATES = 90
MAX_INPUTS = 16  # stored per task
MAX_DISCRIMINATING = 10
MAX_CHECK_BYTES = 16 * 1024  # inputs (base64) and answers of one task, roughly
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class NoCheck(Exception):
    """A task for which no behaviour check can be recorded; the message says why (counted in reports)."""


def changed_lines(patch: str) -> dict[str, set[int]]:
    """Per file, the lines of the *old* side (the clean tree, for a bug patch) a patch changes.

    A hunk that only adds lines counts the old line it inserts before (or after, at the end).
    """
    out: dict[str, set[int]] = {}
    path = None
    old = 0
    removed_in_hunk = False
    insert_at: int | None = None
    for line in patch.splitlines():
        if line.startswith("--- "):
            continue
        if line.startswith("+++ "):
            name = line[4:].strip()
            path = None if name == "/dev/null" else re.sub(r"^b/", "", name)
            continue
        m = _HUNK.match(line)
        if m:
            if path and not removed_in_hunk and insert_at is not None:
                out.setdefault(path, set()).add(insert_at)
            old = int(m.group(1))
            removed_in_hunk, insert_at = False, None
            continue
        if path is None:
            continue
        if line.startswith("-"):
            out.setdefault(path, set()).add(old)
            removed_in_hunk = True
            old += 1
        elif line.startswith("+"):
            if insert_at is None:
                insert_at = max(old - 1, 1)  # the line the insertion follows
        elif line.startswith(" "):
            old += 1
    if path and not removed_in_hunk and insert_at is not None:
        out.setdefault(path, set()).add(insert_at)
    return out


def functions_at(source: str, lines: set[int]) -> list[str]:
    """Qualified names of the functions holding ``lines`` (the outermost replayable one for nested
    functions; lines outside any function give nothing)."""
    tree = pyparse.parse(source)
    spans: list[tuple[int, int, str, bool]] = []  # start, end, qualname, inside a function

    def visit(node: ast.AST, prefix: str, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qual = f"{prefix}{child.name}"
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                spans.append((start, child.end_lineno or child.lineno, qual, in_function))
                visit(child, f"{qual}.<locals>.", True)
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.", in_function)
            else:
                visit(child, prefix, in_function)

    visit(tree, "", False)
    found: list[str] = []
    for line in sorted(lines):
        holders = [s for s in spans if s[0] <= line <= s[1] and not s[3]]
        if holders:
            qual = min(holders, key=lambda s: s[1] - s[0])[2]
            if qual not in found:
                found.append(qual)
    return found


def changed_functions(record) -> list[tuple[str, str]]:
    """``(repository path, qualified name)`` of every function or method the bug patch changes,
    read from the clean tree (``record.repo_dir``)."""
    return patch_functions(record.bug_patch, record.repo_dir)


def patch_functions(patch: str, repo: str | Path) -> list[tuple[str, str]]:
    """``(repository path, qualified name)`` of every function or method ``patch`` changes, read
    from the clean tree ``repo``."""
    out = []
    for path, lines in changed_lines(patch).items():
        if not path.endswith(".py"):
            continue
        source = (Path(repo) / path).read_text(encoding="utf-8")
        out += [(path, qual) for qual in functions_at(source, lines)]
    return out


def _python_path(record) -> list[str]:
    if record.project:
        from termgym.tasks.swesynth.projects import get_project
        return list(get_project(record.project).python_path)
    return []


def _packages(record, source_dirs: Sequence[str]) -> list[str]:
    """Top-level importable package names of the project (what recorded pickles may reference)."""
    names = {module_name(d if d.endswith(".py") else d.rstrip("/") + "/__init__.py", _python_path(record)).split(".")[0]
             for d in source_dirs}
    return sorted(n for n in names if n)


def imported_packages(record, source_dirs: Sequence[str]) -> list[str]:
    """Third-party top-level packages the project's own code imports (wsproto's ``h11``, jsonpath-ng's
    ``ply``): objects of theirs in a recorded call are replayable like the project's, since its test
    environment installs what its code imports. Neither the standard library, the project itself nor a
    name that reads as a test package (``test``, ``tests``, ``testing``)."""
    import sys

    if record.repo_dir is None:
        return []
    own = set(_packages(record, source_dirs))
    names: set[str] = set()
    for directory in source_dirs:
        top = Path(record.repo_dir) / directory
        for path in ([top] if top.suffix == ".py" else sorted(top.rglob("*.py"))):
            try:
                tree = pyparse.parse(path.read_text(encoding="utf-8", errors="replace"))
            except (OSError, SyntaxError, ValueError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
    # never a test module: a name like ``test``/``tests`` is where a project keeps its tests
    return sorted(n for n in names if n not in own and n not in sys.stdlib_module_names and n != "__future__"
                  and not n.startswith("test") and n != "conftest")


def _run(box, command: str, timeout: float, what: str):
    result = box.exec(command, timeout=timeout)
    if result.timed_out:
        raise NoCheck(f"{what} timed out after {timeout:.0f} s")
    return result


def _clean_spec(task):
    """A sandbox of the task's clean repository with the project's test environment (what the
    oracle's tree is, byte for byte: generation checks that the fix restores it)."""
    from termgym.sandbox.base import SandboxSpec
    from termgym.tasks.swesynth.task import SANDBOX_ENV

    record = task.record
    parts = task.test_env_parts()
    return SandboxSpec(workdir=record.workdir, image=record.image, copy_dirs={str(record.repo_dir): record.workdir},
                       env={**SANDBOX_ENV, **(parts.env if parts else {})},
                       ro_binds=dict(parts.ro_binds) if parts else {})


def _apply(box, workdir: str, patch: str, reverse: bool = False) -> None:
    box.write_file("/tmp/.tgb-rec/tree.patch", patch)
    flag = "-R " if reverse else ""
    result = box.exec(f"cd {shlex.quote(workdir)} && git apply {flag}--whitespace=nowarn /tmp/.tgb-rec/tree.patch",
                      timeout=60)
    if result.exit_code != 0:
        raise RuntimeError(f"cannot {'reverse' if reverse else 'apply'} a patch in the recording sandbox: "
                           f"{result.output.strip()[-200:]}")


def _without_state(answer: dict[str, Any]) -> dict[str, Any]:
    """A replayed answer as a check stores it: without what a state replay adds (``"s"``)."""
    return {k: v for k, v in answer.items() if k not in ("s", "s_more")}


def _stable(form_answer: dict[str, Any]) -> bool:
    form = form_answer.get("c")
    return not (isinstance(form, list) and form and form[0] in ("timeout", "unreplayable"))


def record_behaviour(record, *, backend: str = "local", cache_dir: Path | None = None,
                     test_timeout: float | None = None) -> dict[str, Any]:
    """Record ``record``'s behaviour check in a ``backend`` sandbox; raises :class:`NoCheck` (why not).

    The returned check holds the inputs (pickled arguments, base64) and the clean answers; see
    :mod:`termgym.tasks.swesynth.behaviour`.
    """
    from termgym.sandbox import FreshSandboxes
    from termgym.tasks.swesynth.selection import select_command
    from termgym.tasks.swesynth.task import SweSynthTask

    if record.repo_dir is None:
        raise NoCheck("the task has no host repository to find the changed functions in")
    targets = changed_functions(record)
    if not targets:
        raise NoCheck("the bug changes no function or method (only module- or class-level code)")
    task = SweSynthTask(record, cache_dir=cache_dir)
    python_path = _python_path(record)
    modules = {(path, qual): module_name(path, python_path) for path, qual in targets}
    sys_path = task_sys_path(task)
    wd = record.workdir
    with FreshSandboxes(backend) as new_sandbox:
        box = new_sandbox(_clean_spec(task))  # the clean tree itself: no prepared git workspace needed
        box.exec("mkdir -p /tmp/.tgb-rec", timeout=30)
        box.write_file("/tmp/.tgb-rec/tgb_recorder.py", PROBE_SOURCE.read_bytes())
        box.write_file("/tmp/.tgb-rec/probe.py", PROBE_SOURCE.read_bytes())
        box.write_file("/tmp/.tgb-rec/config.json", json.dumps({
            "targets": [list(t) for t in targets],
            "allowed_modules": [*_packages(record, task.source_dirs), *imported_packages(record, task.source_dirs)],
            "max_per_target": MAX_PER_TARGET, "max_bytes": MAX_INPUT_BYTES,
            "max_large_bytes": MAX_LARGE_INPUT_BYTES, "out": "/tmp/.tgb-rec/calls.json",
            "digests_out": "/tmp/.tgb-rec/test_calls.json", "dropped_out": "/tmp/.tgb-rec/dropped.json"}))
        parts = task.test_env_parts()
        pythonpath = ":".join(["/tmp/.tgb-rec", *(parts.python_path if parts else ())])
        tests = select_command(record.test_command, record.repo_dir, record.target_tests)
        command = (f"cd {shlex.quote(wd)} && env -u PYTHONSTARTUP -u PYTEST_ADDOPTS -u PYTEST_PLUGINS "
                   f"PYTHONPATH={shlex.quote(pythonpath)} PYTHONHASHSEED=0 PYTHONDONTWRITEBYTECODE=1 "
                   f"TG_BEHAVIOUR_CONFIG=/tmp/.tgb-rec/config.json {tests} -p tgb_recorder -p no:cacheprovider "
                   f"-p no:randomly >/tmp/.tgb-rec/pytest.log 2>&1")
        _run(box, command, test_timeout or record.test_timeout, "the clean tree's tests under the recorder")
        try:
            calls = json.loads(box.read_file("/tmp/.tgb-rec/calls.json"))
        except (FileNotFoundError, ValueError):
            log = box.exec("tail -c 600 /tmp/.tgb-rec/pytest.log", timeout=30).output
            raise NoCheck(f"the recorder wrote no calls (pytest output ends: {log.strip()[-300:]!r})") from None
        if not calls:
            raise NoCheck("no call into the changed functions had replayable arguments (picklable without "
                          f"test modules, at most {MAX_INPUT_BYTES} bytes, or {MAX_LARGE_INPUT_BYTES} for a "
                          f"function with no smaller call){_dropped_calls(box)}")
        raw_inputs = _perturbed(box, calls, sys_path, PERTURB_PER_CALL, "perturbing")
        if raw_inputs is None:
            raw_inputs = [{"target": c["target"], "args": c["args"], "origin": "test"} for c in calls]
        raw_inputs, clocked = without_clock_inputs(raw_inputs)
        if not raw_inputs:
            raise NoCheck(f"every recorded input's arguments hold a clock ({clocked[0]}): its answer would move "
                          "with the time of the replay")
        candidates = []
        for n, item in enumerate(in_turns(raw_inputs)[:MAX_CANDIDATES]):
            path, qual = item["target"]
            candidates.append({"id": f"i{n}", "module": modules[(path, qual)], "qualname": qual,
                               "args": item["args"], "origin": item.get("origin", "test")})
        test_calls = _test_call_digests(box)
        held_ids, clean1, clean2, unrepeatable, buggy = _answer_candidates(box, record, candidates, sys_path,
                                                                           test_calls)
        deeper = _calls_to_perturb_further(candidates, held_ids, clean1, clean2, unrepeatable, buggy, calls)
        if deeper:  # the telling test calls' neighbours, further out: a held-out input near the bug
            _apply(box, wd, record.bug_patch, reverse=True)
            try:
                more = _deeper_candidates(box, deeper, candidates, sys_path)
                answered = _answer_candidates(box, record, more, sys_path, test_calls) if more else None
            except NoCheck:  # the first round's candidates stand alone
                answered = None
            if answered is None:
                _apply(box, wd, record.bug_patch)
            else:
                more_held, more_clean1, more_clean2, more_unrepeatable, more_buggy = answered
                candidates = candidates + more
                held_ids |= more_held
                clean1.update(more_clean1)
                clean2.update(more_clean2)
                buggy.update(more_buggy)
                unrepeatable |= more_unrepeatable
        repeated = [c for c in candidates if clean1[c["id"]]["h"] == clean2[c["id"]]["h"] and _stable(clean1[c["id"]])]
        if not repeated:
            raise NoCheck("no recorded input is answered the same way twice by the clean code")
        stable = [c for c in repeated if _settled(c, clean1, clean2, unrepeatable)]
        if not stable:
            raise NoCheck("every input the clean code answers the same way twice reads a clock (time.monotonic, "
                          "datetime.now, ...) or draws random numbers: its answer would move with the time, the "
                          "machine or the seed of the replay")
        telling = [c for c in stable if buggy.get(c["id"], {}).get("h") != clean1[c["id"]]["h"]]
        if not telling:
            raise NoCheck("no recorded or perturbed input is answered differently by the buggy code")
        keep_ids = choose_inputs(stable, {c["id"] for c in telling}, held_ids, clean1)
        chosen = [c for c in candidates if c["id"] in keep_ids]
        box.close()
        # Prove the stored answers where nobody ran anything: the chosen inputs alone, in order, in a
        # fresh sandbox, on each tree (the tests' side effects, temporary files say, are not there).
        for _round in range(3):
            fresh = new_sandbox(_clean_spec(task))
            try:
                final = replay_spec(chosen, sys_path, state=True)
                clean_final, problem = run_replay(fresh, final)
                fresh.exec("mkdir -p /tmp/.tgb-rec", timeout=30)
                _apply(fresh, wd, record.bug_patch)
                buggy_final, _ = run_replay(fresh, final)
            finally:
                fresh.close()
            if clean_final is None:
                raise NoCheck(f"the clean tree's replay of the chosen inputs failed in a fresh sandbox: {problem}")
            unstable = [c["id"] for c in chosen if clean_final[c["id"]]["h"] != clean1[c["id"]]["h"]]
            chosen = [c for c in chosen if c["id"] not in unstable]
            if not unstable:
                break
            if not chosen:
                raise NoCheck("no chosen input is answered the same way in a fresh sandbox (they depend on "
                              "what the tests left behind or on the inputs replayed before them)")
        else:
            raise NoCheck("the chosen inputs' clean answers keep changing in fresh sandboxes")
        answers = {c["id"]: _without_state(clean_final[c["id"]]) for c in chosen}
        telling_final = [c["id"] for c in chosen
                         if (buggy_final or {}).get(c["id"], {}).get("h") != answers[c["id"]]["h"]]
        differs = len(telling_final)
        if differs == 0:
            raise NoCheck("the chosen inputs alone are answered by the buggy code like the clean code")
    check = {"version": BEHAVIOUR_VERSION, "seconds": CALL_SECONDS, "canonical": CANONICAL_VERSION,
             "targets": [{"path": p, "qualname": q, "module": modules[(p, q)]} for p, q in targets],
             "recorded_calls": len(calls), "candidates": len(candidates), "discriminating": differs,
             # the inputs the buggy code answers differently; perturbed ones among them are what a
             # hard-coded answer to the tests' own calls cannot match
             "telling": telling_final,
             # the inputs no test makes (digest of their arguments unlike every call the tests make)
             "heldout": [c["id"] for c in chosen if c["id"] in held_ids],
             "inputs": chosen, "answers": answers}
    if (heldout_outcomes(check) or 0) < 2:  # one outcome: what the calls leave may still tell, leaf by leaf
        check["state"] = state_evidence(clean_final, buggy_final or {}, check["heldout"])
    if len(targets) >= 2:  # each function's bug alone, replayed: what serving a multi-function bug needs
        try:
            check["per_bug"] = per_bug_telling(record, check, backend=backend)
        except RuntimeError:  # left unmeasured: `termgym swesynth behaviour --per-bug` tries again
            pass
    return check


def _perturbed(box, calls: list[dict[str, Any]], sys_path: list[str], per_call: int,
               what: str) -> list[dict[str, Any]] | None:
    """``calls`` and up to ``per_call`` perturbed variants of each, made by the probe in ``box``
    (:func:`~termgym.tasks.swesynth.behaviour_probe.perturb`); None when it wrote nothing readable."""
    box.write_file("/tmp/.tgb-rec/perturb.json", json.dumps({"calls": calls, "sys_path": sys_path,
                                                              "per_call": per_call}))
    box.exec("rm -f /tmp/.tgb-rec/inputs.json", timeout=30)
    _run(box, "cd /tmp/.tgb-rec && env -i PATH=/usr/local/bin:/usr/bin:/bin PYTHONHASHSEED=0 LANG=C.UTF-8 "
              "python3 -s -B probe.py perturb perturb.json inputs.json >/dev/null 2>&1", 120, what)
    try:
        return json.loads(box.read_file("/tmp/.tgb-rec/inputs.json"))
    except (FileNotFoundError, ValueError):
        return None


def _settled(c: dict[str, Any], clean1: dict, clean2: dict, unrepeatable: set[str]) -> bool:
    """Whether the clean code answered candidate ``c`` alike twice, with a form (no timeout, nothing
    unreplayable), and without reading a clock or drawing chance."""
    one, two = clean1.get(c["id"]), clean2.get(c["id"])
    return bool(one and two) and one["h"] == two["h"] and _stable(one) and c["id"] not in unrepeatable


def _answer_candidates(box, record, candidates: list[dict[str, Any]], sys_path: list[str], test_calls: set[str]):
    """``(held-out ids, clean answers, clean answers again, unrepeatable ids, buggy answers)`` of
    ``candidates`` in ``box``, which holds the clean tree and is left holding the buggy one."""
    spec = replay_spec(candidates, sys_path)
    held_ids = _held_out(box, spec, test_calls, candidates)
    clean1, p1 = run_replay(box, spec)
    clean2, p2 = run_replay(box, spec)
    if clean1 is None or clean2 is None:
        raise NoCheck(f"the clean tree's replay failed: {p1 or p2}")
    # A third replay watches for clock reads and random draws (slower, so apart from the two
    # that give the answers): two replays in a row can agree by chance or within one second.
    watched, p_watch = run_replay(box, replay_spec(candidates, sys_path, watch=True))
    if watched is None:
        raise NoCheck(f"the clean tree's replay watching for clock reads and random draws failed: {p_watch}")
    unrepeatable = {i for i, answer in watched.items() if _unrepeatable(answer)}
    _apply(box, record.workdir, record.bug_patch)  # the buggy tree
    buggy, _problem = run_replay(box, spec)
    return held_ids, clean1, clean2, unrepeatable, buggy or {}


#: The deeper round: variants per telling test call, and new candidates in all.
DEEP_PER_CALL = 40
DEEP_CANDIDATES = 120


def _calls_to_perturb_further(candidates: list[dict[str, Any]], held: set[str], clean1: dict, clean2: dict,
                              unrepeatable: set[str], buggy: dict, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The recorded test calls to perturb further out (:data:`DEEP_PER_CALL` variants each): those
    that tell the bug apart where no held-out input does what serving needs. A bug shows on inputs
    near the ones that show it, and the first round gives each call only
    :data:`PERTURB_PER_CALL` variants. Wanted when a changed function has a telling test call but
    no held-out telling input, or when the held-out inputs' clean outcomes are all one (then every
    telling test call). Empty when nothing is missing."""
    def tells(c: dict[str, Any]) -> bool:
        return buggy.get(c["id"], {}).get("h") != clean1[c["id"]]["h"]

    kept = [c for c in candidates if _settled(c, clean1, clean2, unrepeatable)]
    covered = {(c["module"], c["qualname"]) for c in kept if c["id"] in held and tells(c)}
    outcomes = {outcome_digest(clean1[c["id"]]) or clean1[c["id"]]["h"] for c in kept if c["id"] in held}
    wanted = []
    for c in kept:
        origin = str(c.get("origin", ""))
        if c["id"] in held or not origin.startswith("test:") or not tells(c):
            continue
        if len(outcomes) >= 2 and (c["module"], c["qualname"]) in covered:
            continue
        index = int(origin.split(":", 1)[1])
        if 0 <= index < len(calls):
            wanted.append(calls[index])
    return wanted


def _deeper_candidates(box, calls: list[dict[str, Any]], candidates: list[dict[str, Any]],
                       sys_path: list[str]) -> list[dict[str, Any]]:
    """Up to :data:`DEEP_CANDIDATES` new candidates: :data:`DEEP_PER_CALL` variants of each of
    ``calls`` (taken in turn), none already a candidate; ids go on from ``candidates``'."""
    made = _perturbed(box, calls, sys_path, DEEP_PER_CALL, "perturbing further")
    if made is None:
        return []
    made, _clocked = without_clock_inputs([m for m in made if not str(m.get("origin", "")).startswith("test")])
    have = {(c["qualname"], c["args"]) for c in candidates}
    module_of = {c["qualname"]: c["module"] for c in candidates}
    out: list[dict[str, Any]] = []
    for item in in_turns(made):
        _path, qual = item["target"]
        if (qual, item["args"]) in have or qual not in module_of:
            continue
        have.add((qual, item["args"]))
        out.append({"id": f"i{len(candidates) + len(out)}", "module": module_of[qual], "qualname": qual,
                    "args": item["args"], "origin": "deeper-" + str(item.get("origin", ""))})
        if len(out) >= DEEP_CANDIDATES:
            break
    return out


def in_turns(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``items`` (inputs with a ``"target"``) taken one changed function at a time in turn, each
    function's in their order: the first :data:`MAX_CANDIDATES` then hold inputs of every function,
    not only of the one the tests call first (a bug in two functions is served only when each has
    an input of its own)."""
    queues: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for item in items:
        queues.setdefault(tuple(item["target"]), []).append(item)
    return interleaved(queues.values())


def interleaved(queues: Collection[Sequence[Any]]) -> list[Any]:
    """The first item of each queue, then the second of each, and so on (a queue that runs out is
    passed over): a run cut short, or a list cut at a length, still has some of every queue."""
    queues = list(queues)
    return [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]


def choose_inputs(stable: list[dict[str, Any]], telling: set[str], held: set[str],
                  answers: dict[str, dict[str, Any]]) -> set[str]:
    """The ids of the inputs a check stores, out of ``stable`` (candidates the clean code answers
    alike twice, in recorded order), within :data:`MAX_INPUTS` and about :data:`MAX_CHECK_BYTES`.

    What decides a grade comes first, in this order:

    1. one held-out telling input of each changed function in turn (``module``, ``qualname``), an
       answer unlike those taken so far first: a bug in two functions is served only when each has
       its own (:func:`~termgym.tasks.swesynth.behaviour.uncovered_targets`), and the first input of a
       function is taken even over the byte budget;
    2. while the held-out inputs taken answer alike, a held-out input that answers otherwise
       (telling first): a check whose held-out answers are all one value is not served, as one
       constant would match them all;
    3. the other telling inputs, held-out ones first, up to :data:`MAX_DISCRIMINATING` telling in all;
    4. the inputs that do not tell, held-out ones with an answer not seen yet first.
    """
    def outcome(c: dict[str, Any]) -> str | None:
        answer = answers[c["id"]]
        return outcome_digest(answer) or answer.get("h")

    keep: list[str] = []
    seen_held: set[str | None] = set()
    budget = [MAX_CHECK_BYTES]

    def take(c: dict[str, Any], *, over_budget: bool = False) -> bool:
        cost = len(c["args"]) + len(json.dumps(answers[c["id"]])) + 80
        if c["id"] in keep or len(keep) >= MAX_INPUTS or (keep and cost > budget[0] and not over_budget):
            return False
        keep.append(c["id"])
        budget[0] -= cost
        if c["id"] in held:
            seen_held.add(outcome(c))
        return True

    def new_first(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(items, key=lambda c: outcome(c) in seen_held)  # stable: recorded order otherwise

    held_telling = [c for c in stable if c["id"] in telling and c["id"] in held]
    by_target: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for c in held_telling:
        by_target.setdefault((c["module"], c["qualname"]), []).append(c)
    for queue in by_target.values():  # 1
        for c in new_first(queue):
            if take(c, over_budget=True):
                break
    if len(seen_held) == 1:  # 2
        for c in new_first(held_telling + [c for c in stable if c["id"] in held and c["id"] not in telling]):
            if outcome(c) not in seen_held and take(c):
                break
    rest_telling = ([c for c in held_telling if c["id"] not in keep]
                    + [c for c in stable if c["id"] in telling and c["id"] not in held])
    for c in rest_telling:  # 3
        if sum(i in telling for i in keep) >= MAX_DISCRIMINATING:
            break
        take(c)
    quiet = [c for c in stable if c["id"] not in telling]
    for c in [*new_first([c for c in quiet if c["id"] in held]), *(c for c in quiet if c["id"] not in held)]:  # 4
        take(c)
    return set(keep)


def _dropped_calls(box) -> str:
    """``: 12 calls: self (tinydb.table.Table) does not pickle: ...; ...``: why the recorder kept no
    call, most frequent reason first (empty when the recorder left no account)."""
    try:
        dropped = json.loads(box.read_file("/tmp/.tgb-rec/dropped.json"))
    except (FileNotFoundError, ValueError):
        return ""
    if not dropped:
        return "; the tests made no call into them"
    top = sorted(dropped.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    return ": " + "; ".join(f"{n} call{'s' if n != 1 else ''}: {why}" for why, n in top)


def without_clock_inputs(items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """``items`` (inputs with base64 ``"args"``) less those whose arguments hold a clock, and the
    clocks found (:func:`~termgym.tasks.swesynth.behaviour.clock_reference`): such an input's clean
    answer holds only until the recorded time passes, or only on the machine that recorded it."""
    kept, clocks = [], []
    for item in items:
        clock = clock_reference(item["args"])
        if clock is None:
            kept.append(item)
        else:
            clocks.append(clock)
    return kept, clocks


def clock_or_chance_inputs(record, check: dict[str, Any], *, backend: str = "local") -> list[str]:
    """The ids of a stored check's inputs whose answer hangs on a clock or on chance: their
    arguments hold a clock (:func:`~termgym.tasks.swesynth.behaviour.clock_reference`), or the clean
    tree, replaying them in a fresh sandbox under a watch, reads one (a ``time.monotonic()`` inside
    the function compared with a start time recorded in the arguments) or draws from the shared
    random generator (``random.shuffle``). Raises :class:`NoCheck` when that replay fails."""
    watched, problem = _replay_clean(record, check, backend=backend, watch=True)
    if watched is None:
        raise NoCheck(f"the clean tree's replay watching for clock reads and random draws failed: {problem}")
    return [item["id"] for item in check["inputs"]
            if clock_reference(item["args"]) or _unrepeatable(watched.get(item["id"], {}))]


def _unrepeatable(answer: dict[str, Any]) -> bool:
    """Whether a watched replay's answer read a clock or drew chance (:func:`replay_spec`'s ``watch``)."""
    return bool(answer.get("clock") or answer.get("chance"))


def drop_clock_inputs(check: dict[str, Any], ids: Sequence[str] | None = None) -> tuple[dict[str, Any] | None, list[str]]:
    """A stored check without the inputs ``ids`` (by default those whose arguments hold a clock;
    :func:`clock_or_chance_inputs` also names those that read one or draw chance), and the ids
    dropped.

    The inputs left keep their ids and answers (``telling``, ``heldout`` and ``discriminating``
    follow). ``None`` when no input that tells the bug apart is left: the check decides nothing
    then. A pruned check must still be shown to reproduce in a fresh sandbox (:func:`reproduces`):
    its answers were proven with the dropped inputs replayed before them."""
    if ids is None:
        dropped = [item["id"] for item in check["inputs"] if clock_reference(item["args"])]
    else:
        named = set(ids)
        dropped = [item["id"] for item in check["inputs"] if item["id"] in named]
    if not dropped:
        return check, []
    gone = set(dropped)
    inputs = [item for item in check["inputs"] if item["id"] not in gone]
    telling = [i for i in check.get("telling") or () if i not in gone]
    if not inputs or not telling:
        return None, dropped
    pruned = {**check, "inputs": inputs, "answers": {i["id"]: check["answers"][i["id"]] for i in inputs},
              "telling": telling, "discriminating": len(telling)}
    if "heldout" in check:
        pruned["heldout"] = [i for i in check["heldout"] if i not in gone]
    return pruned, dropped


def _test_call_digests(box) -> set[str]:
    """Digests of every call the tests made into the changed functions (the recorder's second file)."""
    try:
        return set(json.loads(box.read_file("/tmp/.tgb-rec/test_calls.json")))
    except (FileNotFoundError, ValueError):
        raise NoCheck("the recorder wrote no digests of the tests' calls") from None


def _held_out(box, spec: dict[str, Any], test_calls: set[str], inputs: list[dict[str, Any]]) -> set[str]:
    """The ids of ``inputs`` that no test call matches (computed on the clean tree in ``box``)."""
    box.write_file("/tmp/.tgb-rec/digest-in.json", json.dumps(spec))
    _run(box, "cd /tmp/.tgb-rec && env -i PATH=/usr/local/bin:/usr/bin:/bin PYTHONHASHSEED=0 LANG=C.UTF-8 "
              "python3 -s -B probe.py digests digest-in.json digests.json >/dev/null 2>&1", 120, "digesting inputs")
    try:
        made = json.loads(box.read_file("/tmp/.tgb-rec/digests.json"))
    except (FileNotFoundError, ValueError):
        raise NoCheck("the inputs' digests could not be computed on the clean tree") from None
    if len(made) != len(inputs):
        raise NoCheck("the inputs' digests do not match the inputs")
    return {item["id"] for item, digest in zip(inputs, made)
            if digest not in test_calls and not str(item.get("origin", "")).startswith("test")}


def _same_in_both_forms(check: dict[str, Any]) -> bool:
    """Whether a check's stored answers can stand without a replay: every answer's outcome is known
    (``"r"`` or its form stored), and, for form 1, every form is stored and names no local
    function (the one thing form 2 writes differently)."""
    answers = check["answers"].values()
    if int(check.get("canonical", 1)) == CANONICAL_VERSION:
        return all("r" in a or "c" in a for a in answers)
    return all("c" in a for a in answers) and not any("<locals>" in json.dumps(a["c"]) for a in answers)


def _with_outcome(answer: dict[str, Any]) -> dict[str, Any]:
    """A stored answer with its outcome digest ``"r"`` (computed from its form when not stored)."""
    from termgym.tasks.swesynth.behaviour_probe import outcome_of

    if "r" in answer or "c" not in answer:
        return answer
    outcome = outcome_of(answer["c"])
    return {**answer, "r": outcome} if outcome else answer


def mark_heldout(record, check: dict[str, Any], *, backend: str = "local",
                 test_timeout: float | None = None) -> dict[str, Any]:
    """An existing check, answered again in the current canonical form and with its held-out inputs
    marked (``"heldout"``; ``"telling"`` recomputed), without recording new inputs.

    In a fresh sandbox of the clean tree: stored answers that may read differently in the current
    form (a local function's name in them, or only a digest stored) are replayed on the clean tree
    (twice when one changed: an answer that does not repeat is dropped), and the buggy tree's
    answers too unless the stored ``telling`` still stands; then the tests the bug breaks run under
    the recorder, which keeps the digest of every call they make into the changed functions, and
    the stored inputs' digests are compared with them.
    Raises :class:`NoCheck` when nothing stable or telling is left.
    """
    from termgym.sandbox import FreshSandboxes
    from termgym.tasks.swesynth.selection import select_command
    from termgym.tasks.swesynth.task import SweSynthTask

    task = SweSynthTask(record)
    sys_path = task_sys_path(task)
    inputs = list(check["inputs"])
    wd = record.workdir
    targets = [(t["path"], t["qualname"]) for t in check.get("targets", [])] or changed_functions(record)
    with FreshSandboxes(backend) as new_sandbox:
        box = new_sandbox(_clean_spec(task))
        try:
            spec = replay_spec(inputs, sys_path)
            if _same_in_both_forms(check):
                clean1, p1 = {c["id"]: _with_outcome(check["answers"][c["id"]]) for c in inputs}, ""
            else:
                clean1, p1 = run_replay(box, spec)
            if clean1 is None:
                raise RuntimeError(f"the clean tree's replay failed: {p1}")
            # An answer the same as the stored one was proven stable when it was recorded; one that
            # changed with the canonical form is replayed once more and kept only if it repeats.
            unchanged = all(clean1[c["id"]]["h"] == check["answers"][c["id"]]["h"] for c in inputs)
            if unchanged:
                clean2, p2 = clean1, ""
            else:
                clean2, p2 = run_replay(box, spec)
            if clean2 is None:
                raise RuntimeError(f"the clean tree's replay failed: {p2}")
            box.exec("mkdir -p /tmp/.tgb-rec", timeout=30)
            buggy = None
            if not (unchanged and isinstance(check.get("telling"), list)):
                # the buggy tree's answers, unless the stored ones still stand (same clean answers, and
                # which inputs tell the bug apart was recorded in a fresh sandbox)
                _apply(box, wd, record.bug_patch)
                buggy, _ = run_replay(box, spec)
                _apply(box, wd, record.bug_patch, reverse=True)
            kept = [c for c in inputs if clean1[c["id"]]["h"] == clean2[c["id"]]["h"] and _stable(clean1[c["id"]])]
            if buggy is None:
                telling = [c["id"] for c in kept if c["id"] in set(check["telling"])]
            else:
                telling = [c["id"] for c in kept if buggy.get(c["id"], {}).get("h") != clean1[c["id"]]["h"]]
            origin = {c["id"]: str(c.get("origin", "test")) for c in kept}
            held_ids: set[str] = set()
            if "heldout" in check and int(check.get("canonical", 1)) == CANONICAL_VERSION:
                held_ids = set(check["heldout"])  # marked already (only the outcomes were missing)
            # only the tests' own calls tell: nothing can be held out, no need to run the tests
            elif any(not origin[i].startswith("test") for i in telling):
                box.write_file("/tmp/.tgb-rec/tgb_recorder.py", PROBE_SOURCE.read_bytes())
                box.write_file("/tmp/.tgb-rec/probe.py", PROBE_SOURCE.read_bytes())
                box.write_file("/tmp/.tgb-rec/config.json", json.dumps({
                    "targets": [list(t) for t in targets], "allowed_modules": _packages(record, task.source_dirs),
                    "max_per_target": 0, "max_bytes": MAX_INPUT_BYTES,
                    "max_large_bytes": MAX_LARGE_INPUT_BYTES, "out": "/tmp/.tgb-rec/calls.json",
                    "digests_out": "/tmp/.tgb-rec/test_calls.json"}))
                parts = task.test_env_parts()
                pythonpath = ":".join(["/tmp/.tgb-rec", *(parts.python_path if parts else ())])
                tests = select_command(record.test_command, record.repo_dir, record.target_tests)
                _run(box, f"cd {shlex.quote(wd)} && env -u PYTHONSTARTUP -u PYTEST_ADDOPTS -u PYTEST_PLUGINS "
                          f"PYTHONPATH={shlex.quote(pythonpath)} PYTHONHASHSEED=0 PYTHONDONTWRITEBYTECODE=1 "
                          f"TG_BEHAVIOUR_CONFIG=/tmp/.tgb-rec/config.json {tests} -p tgb_recorder -p no:cacheprovider "
                          f"-p no:randomly >/tmp/.tgb-rec/pytest.log 2>&1",
                     test_timeout or record.test_timeout, "the clean tree's tests under the recorder")
                held_ids = _held_out(box, spec, _test_call_digests(box), inputs)
        except NoCheck as exc:  # a run that did not finish says nothing about the check: try again later
            raise RuntimeError(str(exc)) from None
        finally:
            box.close()
    return _marked(check, kept, clean1, telling, held_ids)


def _marked(check: dict[str, Any], kept: list[dict[str, Any]], answers: dict[str, dict], telling: list[str],
            held_ids: set[str]) -> dict[str, Any]:
    """The check :func:`mark_heldout` returns: stable inputs, their answers, ``telling`` and the
    ``heldout`` inputs (those verified against the tests' calls; none when no test ran)."""
    if not kept:
        raise NoCheck("no stored input is answered the same way twice by the clean code")
    if not telling:
        raise NoCheck("no stored input is answered differently by the buggy code")
    marked = {**check, "canonical": CANONICAL_VERSION, "inputs": kept,
              "answers": {c["id"]: answers[c["id"]] for c in kept}, "discriminating": len(telling),
              "telling": telling, "heldout": [c["id"] for c in kept if c["id"] in held_ids]}
    if any(answers[c["id"]]["h"] != check["answers"].get(c["id"], {}).get("h") for c in kept):
        marked.pop("per_bug", None)  # measured against answers that changed: measure again (--per-bug)
    return marked


def bug_hunks_by_target(record, targets: Sequence[dict[str, Any]]) -> dict[str, str] | None:
    """The bug patch split by changed function: ``target name -> patch of that function's hunks``
    (:func:`~termgym.tasks.swesynth.behaviour.target_name`), read on the clean tree
    (``record.repo_dir``; the bug patch's old side). ``None`` when the bugs are not in different
    places: a hunk whose changed lines fall in two functions, or in none of ``targets``, or a target
    with no hunk of its own. Applied alone, one entry is that function's bug alone; reversed on
    the buggy tree, the fix of that function alone."""
    from termgym.tasks.swesynth.behaviour import target_name

    names = {(t["path"], t["qualname"]): target_name(t) for t in targets}
    out: dict[str, list[str]] = {name: [] for name in names.values()}
    header: list[str] = []
    hunk: list[str] | None = None
    path = None
    hunks: list[tuple[str | None, str]] = []
    for line in [*record.bug_patch.splitlines(), "diff --end"]:
        starts_hunk = bool(_HUNK.match(line))
        if starts_hunk or line.startswith("diff "):
            if hunk is not None:
                hunks.append((path, "\n".join([*header, *hunk]) + "\n"))
            hunk = [line] if starts_hunk else None
            if not starts_hunk:
                header = [line]
        elif hunk is not None:
            hunk.append(line)
        else:
            header.append(line)
            if line.startswith("+++ "):
                path = re.sub(r"^b/", "", line[4:].strip())
    sources: dict[str, str] = {}
    for path, patch in hunks:
        if path is None or not path.endswith(".py"):
            return None
        if path not in sources:
            sources[path] = (Path(record.repo_dir) / path).read_text(encoding="utf-8")
        owners = functions_at(sources[path], changed_lines(patch).get(path, set()))
        if len(owners) != 1 or (path, owners[0]) not in names:
            return None
        out[names[(path, owners[0])]].append(patch)
    if not all(out.values()):
        return None
    return {name: "".join(patches) for name, patches in out.items()}


def per_bug_telling(record, check: dict[str, Any], *, backend: str = "local") -> dict[str, Any]:
    """What a check's ``"per_bug"`` holds, measured: ``{"telling": {function: [input ids]}}``, for
    each function the bug patch changes the inputs that tell *that function's bug alone* apart
    (answered differently from the stored clean answer on the clean tree plus only that function's
    hunks: the tree of an agent that fixed every other function), or ``{"unsplittable": why}`` when
    the bug patch cannot be split by function (:func:`bug_hunks_by_target`).

    One sandbox of the clean tree: the stored inputs are replayed on it first (the clean answers
    must come back, else the measurement says nothing), then once per function with its hunks
    applied and reversed again, each call under the grade's time limit. A call that runs out of
    time is not counted as telling: on a loaded machine that is the machine, and counting it would
    credit a function with an input that does not show its bug. Raises ``RuntimeError`` when a
    replay fails (nothing is measured: try again)."""
    from termgym.sandbox import FreshSandboxes
    from termgym.tasks.swesynth.behaviour import GRADE_CALL_SECONDS, compare_answers
    from termgym.tasks.swesynth.task import SweSynthTask

    split = bug_hunks_by_target(record, check.get("targets") or [])
    if split is None:
        return {"unsplittable": "a hunk of the bug patch changes lines of two functions, or of none"}
    task = SweSynthTask(record)
    spec = replay_spec(check["inputs"], task_sys_path(task),
                       max(GRADE_CALL_SECONDS, float(check.get("seconds", CALL_SECONDS))),
                       canonical=int(check.get("canonical", 1)))
    expected = {item["id"]: check["answers"][item["id"]] for item in check["inputs"]}
    telling: dict[str, list[str]] = {}
    with FreshSandboxes(backend) as new_sandbox:
        box = new_sandbox(_clean_spec(task))
        try:
            box.exec("mkdir -p /tmp/.tgb-rec", timeout=30)
            clean, problem = run_replay(box, spec)
            if clean is None or compare_answers(expected, clean):
                raise RuntimeError(f"the clean tree does not give the stored answers ({problem or 'answers differ'})")
            for name, patch in split.items():
                _apply(box, record.workdir, patch)
                got, problem = run_replay(box, spec)
                _apply(box, record.workdir, patch, reverse=True)
                if got is None:
                    raise RuntimeError(f"the replay with the bug of {name} alone failed: {problem}")
                telling[name] = [m["input"] for m in compare_answers(expected, got) if m["got"] != ["timeout"]]
        finally:
            box.close()
    return {"telling": telling}


def needs_state(check: dict[str, Any] | None) -> bool:
    """Whether ``termgym swesynth behaviour --state`` has work on a check: it would be served but
    for its held-out inputs' one outcome (a constructor's None, a mutator's), and what its calls
    leave on their arguments is not measured yet."""
    return (bool(check) and not needs_marking(check) and bool(heldout_telling(check))
            and (heldout_outcomes(check) or 0) < 2 and "state" not in check)


def state_of(record, check: dict[str, Any], *, backend: str = "local") -> dict[str, Any]:
    """What a check's ``"state"`` holds (:func:`~termgym.tasks.swesynth.behaviour.state_evidence`),
    measured the way :func:`record_behaviour` proves its answers: the stored inputs, in order, in a
    fresh sandbox of the clean tree, then of the buggy tree (the bug patch applied in the same
    sandbox), each replay reporting what every call did to its arguments. Raises ``RuntimeError``
    when a replay fails or the clean tree does not give the stored answers (nothing is measured)."""
    from termgym.sandbox import FreshSandboxes
    from termgym.tasks.swesynth.behaviour import compare_answers
    from termgym.tasks.swesynth.task import SweSynthTask

    task = SweSynthTask(record)
    spec = replay_spec(check["inputs"], task_sys_path(task), float(check.get("seconds", CALL_SECONDS)),
                       canonical=int(check.get("canonical", 1)), state=True)
    expected = {item["id"]: check["answers"][item["id"]] for item in check["inputs"]}
    with FreshSandboxes(backend) as new_sandbox:
        box = new_sandbox(_clean_spec(task))
        try:
            clean, problem = run_replay(box, spec)
            if clean is None or compare_answers(expected, clean):
                raise RuntimeError(f"the clean tree does not give the stored answers ({problem or 'answers differ'})")
            box.exec("mkdir -p /tmp/.tgb-rec", timeout=30)
            _apply(box, record.workdir, record.bug_patch)
            buggy, problem = run_replay(box, spec)
            if buggy is None:
                raise RuntimeError(f"the buggy tree's replay failed: {problem}")
        finally:
            box.close()
    return state_evidence(clean, buggy, check.get("heldout") or [])


def reproduces(record, check: dict[str, Any], *, backend: str = "local") -> bool:
    """Whether a stored check's clean answers come back in a fresh sandbox of the clean tree."""
    from termgym.tasks.swesynth.behaviour import compare_answers

    got, _ = _replay_clean(record, check, backend=backend)
    return got is not None and not compare_answers({i["id"]: check["answers"][i["id"]] for i in check["inputs"]}, got)


def _replay_clean(record, check: dict[str, Any], *, backend: str, watch: bool = False) -> tuple[dict | None, str]:
    """A stored check's inputs replayed, in the check's canonical form, in a fresh sandbox of the
    clean tree (``watch``: noting clock reads and random draws); :func:`run_replay`'s result."""
    from termgym.sandbox import FreshSandboxes
    from termgym.tasks.swesynth.task import SweSynthTask

    task = SweSynthTask(record)
    spec = replay_spec(check["inputs"], task_sys_path(task), canonical=int(check.get("canonical", 1)), watch=watch)
    with FreshSandboxes(backend) as new_sandbox:
        return run_replay(new_sandbox(_clean_spec(task)), spec)


# -- the backfill -------------------------------------------------------------------------------------

def sidecar_path(suite_dir: Path, repo: str) -> Path:
    """Where a compact suite keeps project ``repo``'s behaviour checks."""
    return suite_dir / "behaviour" / f"{repo}.jsonl"


def read_sidecar(path: Path) -> dict[str, dict[str, Any]]:
    """``task_id -> line`` of a behaviour sidecar (``{"task_id", "behaviour" | "reason"}``); the last line wins."""
    out: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return out
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{path}:{n}: not valid JSON ({exc})") from None
        if not isinstance(data, dict) or not isinstance(data.get("task_id"), str):
            raise ValueError(f"{path}:{n}: a behaviour line needs a 'task_id'")
        out[data["task_id"]] = data
    return out


def compact_sidecar(path: Path) -> int:
    """Rewrite a behaviour sidecar with one line per task (its last), in first-seen order; returns
    the number of lines dropped. Run when no backfill is appending to it."""
    if not path.is_file():
        return 0
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    latest = read_sidecar(path)
    order = list(dict.fromkeys(json.loads(line)["task_id"] for line in lines))
    text = "".join(json.dumps(latest[tid], separators=(",", ":"), sort_keys=True) + "\n" for tid in order)
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return len(lines) - len(order)


def backfill(suite_dir: str | Path, *, jobs: int = 1, repos: Sequence[str] | None = None,
             limit: int | None = None, backend: str = "local", redo: bool = False, retry: bool = False,
             verify: bool = False, heldout: bool = False, retry_unserved: bool = False,
             clock: bool = False, per_bug: bool = False, reason: str | None = None, state: bool = False,
             progress: Callable[[str, str], None] | None = None) -> dict[str, Any]:
    """Record behaviour checks for the tasks of an existing suite that have none yet (resumable).

    A compact suite gets ``behaviour/<repo>.jsonl`` (one line per task, appended as each finishes);
    a suite of task folders gets ``behaviour.json`` per folder. Returns counts: ``checked``,
    ``no_check`` by reason, ``skipped`` (already done), ``seconds``. ``retry`` records again the
    tasks whose earlier line has no check (after the recorder improved), with ``reason`` only those
    whose recorded reason contains that text (``"does not pickle"``); ``redo`` every task.
    ``heldout`` answers every stored check that has no ``"heldout"`` marks again and marks them
    (:func:`mark_heldout`; a task whose marking fails keeps its check and is tried on the next run);
    ``retry_unserved`` records again the tasks whose marked check is not served
    (:func:`~termgym.tasks.swesynth.behaviour.servable`), with ``reason`` only those whose
    :func:`~termgym.tasks.swesynth.behaviour.unservable_reason` contains it. ``clock`` repairs the
    checks holding inputs whose answer hangs on a clock or on chance (recorded before the recorder
    refused them): every check is replayed on the clean tree under a watch
    (:func:`clock_or_chance_inputs`); the check without those inputs (:func:`drop_clock_inputs`) is
    kept when it still tells the bug apart and reproduces in a fresh sandbox, else the task is
    recorded again (``clock_pruned`` and ``rerecorded`` count which, ``clock_free`` the checks with
    no such input). ``per_bug`` measures, for the checks of bugs in two or more functions that lack
    it, which inputs tell each function's bug alone apart (:func:`per_bug_telling`; with ``redo``,
    every such check again); a check is served only when each function has a held-out one
    (:func:`~termgym.tasks.swesynth.behaviour.uncovered_targets`). ``state`` measures, for the
    checks whose held-out inputs hold one outcome and lack it, what the calls leave on their
    arguments (:func:`state_of`; with ``redo``, every such check again): a leaf no cheap forgery
    gives serves the check (``state_served`` counts those).
    """
    from termgym.tasks.swesynth.behaviour import needs_per_bug, servable, unservable_reason
    from termgym.tasks.swesynth.suite import SweSynthSuite

    suite_dir = Path(suite_dir)
    suite = SweSynthSuite(suite_dir, repos=list(repos) if repos else None, behaviour="any")  # every task, served or not
    compact = suite._raw != {}
    ids = list(suite.task_ids("all"))
    done: set[str] = set()

    def settled(line: dict[str, Any]) -> bool:  # a recorded line this run leaves as it is
        return not retry or bool(line.get("behaviour")) or bool(reason and reason not in line.get("reason", ""))

    if not redo:
        if compact:
            for repo in suite.projects():
                done |= {tid for tid, line in read_sidecar(sidecar_path(suite_dir, repo)).items() if settled(line)}
        else:
            for tid in ids:
                path = suite._folders[tid] / "behaviour.json"
                if path.is_file() and settled(json.loads(path.read_text())):
                    done.add(tid)
    # Round-robin over projects, so a run cut short leaves every project partly covered.
    by_repo: dict[str, list[str]] = {}
    for tid in ids:
        if tid not in done:
            by_repo.setdefault(suite._facts(tid)[1], []).append(tid)
    todo = interleaved(by_repo.values())
    if verify:
        todo = [tid for tid in ids if tid in done and suite.record(tid).behaviour]
    if heldout or retry_unserved:
        checks = {tid: suite.record(tid).behaviour for tid in ids}
        todo = [tid for tid in ids if checks[tid] and (
            (heldout and needs_marking(checks[tid]))
            or (retry_unserved and not needs_marking(checks[tid]) and not servable(checks[tid])
                and (not reason or reason in unservable_reason(checks[tid], name_functions=False))))]
        by_repo = {}
        for tid in todo:
            by_repo.setdefault(suite._facts(tid)[1], []).append(tid)
        todo = interleaved(by_repo.values())
    if clock:  # every check: a watched clean replay shows which inputs read a clock or draw chance
        todo = [tid for tid in ids if suite.behaviour_check_of(tid)]
    if per_bug:  # the checks of bugs in two or more functions not measured one function at a time yet
        todo = [tid for tid in ids if needs_per_bug(suite.behaviour_check_of(tid)) or (
            redo and len((suite.behaviour_check_of(tid) or {}).get("targets") or ()) >= 2)]
    if state:  # one held-out outcome: what the calls leave on their arguments, not measured yet
        todo = [tid for tid in ids if needs_state(check := suite.behaviour_check_of(tid)) or (
            redo and check and "state" in check)]
    if limit is not None:
        todo = todo[:limit]
    lock = threading.Lock()
    stats: dict[str, Any] = {"checked": 0, "no_check": {}, "skipped": len(ids) - len(todo) if limit is None
                             else len(done), "errors": 0, "reverified": 0, "servable": 0,
                             "clock_pruned": 0, "rerecorded": 0, "clock_free": 0, "state_served": 0}
    start = time.monotonic()

    def failed(tid: str, what: str, exc: Exception) -> None:
        """Count an error and say what failed; the task's stored check stays as it was."""
        with lock:
            stats["errors"] += 1
            if progress:
                progress(tid, f"{what} failed: {type(exc).__name__}: {exc}"[:300])

    def one(tid: str) -> None:
        record = suite.record(tid)
        if heldout and needs_marking(record.behaviour):
            try:
                line: dict[str, Any] = {"task_id": tid, "behaviour": mark_heldout(record, record.behaviour,
                                                                                  backend=backend)}
            except NoCheck as exc:
                line = {"task_id": tid, "behaviour": None, "reason": str(exc)}
            except Exception as exc:  # the check stays as it was, unmarked: the next run tries again
                failed(tid, "marking", exc)
                return
            if retry_unserved and line["behaviour"] and not servable(line["behaviour"]):
                try:  # recorded again with today's perturbations; kept only if a held-out input decides
                    again = record_behaviour(record, backend=backend)
                except Exception:  # NoCheck or a failure: the marked check stays
                    again = None
                if again is not None and servable(again):
                    line = {"task_id": tid, "behaviour": again}
        elif per_bug:
            try:
                line = {"task_id": tid, "behaviour": {**record.behaviour,
                                                      "per_bug": per_bug_telling(record, record.behaviour,
                                                                                 backend=backend)}}
            except Exception as exc:  # the check stays unmeasured; the next run tries again
                failed(tid, "replaying each bug alone", exc)
                return
        elif state:
            try:
                measured = state_of(record, record.behaviour, backend=backend)
            except Exception as exc:  # the check stays unmeasured; the next run tries again
                failed(tid, "replaying for state", exc)
                return
            line = {"task_id": tid, "behaviour": {**record.behaviour, "state": measured}}
            if servable(line["behaviour"]):
                with lock:
                    stats["state_served"] += 1
        elif clock:
            try:
                found = clock_or_chance_inputs(record, record.behaviour, backend=backend)
            except Exception as exc:  # the check stays as it was; the next run tries again
                failed(tid, "watching the clean replay", exc)
                return
            if not found:
                with lock:
                    stats["clock_free"] += 1
                return
            pruned, _dropped = drop_clock_inputs(record.behaviour, found)
            if pruned is not None and reproduces(record, pruned, backend=backend):
                line = {"task_id": tid, "behaviour": pruned}
                counter = "clock_pruned"
            else:
                try:
                    line = {"task_id": tid, "behaviour": record_behaviour(record, backend=backend)}
                except NoCheck as exc:
                    line = {"task_id": tid, "behaviour": None, "reason": str(exc)}
                except Exception as exc:  # the old check stays; the next run tries again
                    failed(tid, "recording again", exc)
                    return
                counter = "rerecorded"
            with lock:
                stats[counter] += 1
        elif verify:
            if reproduces(record, record.behaviour, backend=backend):
                with lock:
                    stats["checked"] += 1
                return
            with lock:
                stats["reverified"] += 1
        else:
            try:
                line = {"task_id": tid, "behaviour": record_behaviour(record, backend=backend)}
            except NoCheck as exc:
                line = {"task_id": tid, "behaviour": None, "reason": str(exc)}
            except Exception as exc:  # recorded so the run goes on; the reason says what broke
                line = {"task_id": tid, "behaviour": None,
                        "reason": f"recording failed: {type(exc).__name__}: {exc}"[:500]}
            if retry_unserved and line["behaviour"] is None:
                with lock:  # the older check stays (it still serves behaviour="any"); the reason is counted
                    key = _reason_key(line["reason"])
                    stats["no_check"][key] = stats["no_check"].get(key, 0) + 1
                    if progress:
                        progress(tid, f"older check kept: {line['reason']}")
                return
        with lock:
            if compact:
                path = sidecar_path(suite_dir, record.repo)
                path.parent.mkdir(parents=True, exist_ok=True)
                with open(path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(line, separators=(",", ":"), sort_keys=True) + "\n")
            else:
                (suite._folders[tid] / "behaviour.json").write_text(json.dumps(line, separators=(",", ":"), sort_keys=True) + "\n",
                                                                    encoding="utf-8")
            if line["behaviour"] is not None:
                stats["checked"] += 1
                stats["servable"] += servable(line["behaviour"])
            else:
                key = _reason_key(line["reason"])
                stats["no_check"][key] = stats["no_check"].get(key, 0) + 1
            if progress:
                progress(tid, line["reason"] if line["behaviour"] is None else "check" if servable(line["behaviour"])
                         else f"check, not served: {unservable_reason(line['behaviour'])}")

    if jobs > 1:  # parses in the threads, the standard library's too, take one lock (gh-106905: four v2
        pyparse.serialise_every_parse()  # recordings had failed with "AST constructor recursion depth mismatch")
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for future in as_completed([pool.submit(one, tid) for tid in todo]):
            future.result()
    if compact:  # each task's superseded lines go (appending kept the run resumable)
        for repo in suite.projects():
            compact_sidecar(sidecar_path(suite_dir, repo))
    stats["seconds"] = round(time.monotonic() - start, 1)
    return stats


def _reason_key(reason: str) -> str:
    """A reason without its task-specific tail (for counting)."""
    return re.split(r"[:(]", reason, maxsplit=1)[0].strip()
