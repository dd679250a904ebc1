"""What the SWE-SYNTH behaviour check changes: generic non-fixes, alternative correct fixes, replay cost.

Over a seeded sample of the bundled suite, each task is graded through the real grader
(:meth:`~termgym.tasks.swesynth.task.SweSynthTask.grade_patch`, real sandboxes) with:

* three generic non-fixes built around every function the bug changes (the functions a fix would
  touch), leaving the bug in place: an **always-equal** return (an object whose ``__eq__`` says yes
  to everything), an **exception-swallowing** wrapper (``None`` instead of any exception) and
  **hard-coded values** (the clean return value for the exact arguments the tests use, the bug
  everywhere else). For each, the grade without the behaviour check (the required tests alone,
  ``tests_passed``) and with it (``all_passed``) come from the same run;
* an **alternative correct fix**: the clean version of each changed function rewritten in another
  style (locals renamed, or the body moved into a helper, or conditional expressions turned into
  ``if``/``else``), checked to differ from the oracle's text; it must score 1;
* the **oracle** with its behaviour check, and the replay alone once more: the replay's share of
  the grade time (the grade without the check is the grade's time minus the replay's).

A non-fix is first graded on the failing tests alone: failing one of them is a 0 under either grade,
so the whole suite runs only for the non-fixes that pass them.

::

    python -m benchmarks.behaviour_check --sample 100 --seed 0 -j 1 --out behaviour_check.json
    python -m benchmarks.behaviour_check --alt-only --sample 60     # only the alternative fixes

The generators (:func:`nonfix_patch`, :func:`alternative_fix_patch`) are also what
``tests/adversarial/test_behaviour_check.py`` grades.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

NONFIXES = ("always_equal", "swallow_exceptions", "hard_coded")
#: Non-fixes not in the default sweep (``--nonfixes`` picks them): ``probe_constant`` is the
#: hard-coded table under the tests and, in any process started as the behaviour replay
#: (``probe.py replay``), the table's most common answer for every call: code that detects the
#: replay and answers it with a constant copied from the tests.
EXTRA_NONFIXES = ("probe_constant",)

_WRAP = '''

# -- a non-fix: the functions a fix would touch, wrapped ({kind}) --
def _tg_rewrap(_qualname, _make):
    import sys as _s
    _owner = _s.modules[__name__]
    _parts = _qualname.split(".")
    for _p in _parts[:-1]:
        _owner = getattr(_owner, _p)
    _name = _parts[-1]
    _raw = _owner.__dict__[_name] if isinstance(_owner, type) else getattr(_owner, _name)
    if isinstance(_raw, property):
        _new = property(_make(_raw.fget), _raw.fset, _raw.fdel, _raw.__doc__)
    elif isinstance(_raw, staticmethod):
        _new = staticmethod(_make(_raw.__func__))
    elif isinstance(_raw, classmethod):
        _new = classmethod(_make(_raw.__func__))
    else:
        _new = _make(_raw)
    setattr(_owner, _name, _new)
'''

_MAKERS = {
    "always_equal": '''
class _TgAlwaysEqual:
    def __init__(self, inner):
        self.inner = inner
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = object.__hash__
    def __bool__(self):
        return bool(self.inner)
def _tg_make(f):
    import functools
    @functools.wraps(f)
    def _w(*a, **k):
        try:
            value = f(*a, **k)
        except Exception:
            value = None
        return _TgAlwaysEqual(value)
    return _w
''',
    "swallow_exceptions": '''
def _tg_make(f):
    import functools
    @functools.wraps(f)
    def _w(*a, **k):
        try:
            return f(*a, **k)
        except Exception:
            return None
    return _w
''',
    "hard_coded": '''
_TG_TABLE = {table!r}
def _tg_key(f, a, k):
    import hashlib, inspect, pickle
    try:
        bound = inspect.signature(f).bind(*a, **k)
        bound.apply_defaults()
        return hashlib.sha256(pickle.dumps(sorted(bound.arguments.items()), protocol=4)).hexdigest()
    except Exception:
        return None
def _tg_make(f):
    import base64, functools, pickle
    @functools.wraps(f)
    def _w(*a, **k):
        key = _tg_key(f, a, k)
        if key in _TG_TABLE:
            return pickle.loads(base64.b64decode(_TG_TABLE[key]))
        return f(*a, **k)
    return _w
''',
}


def _targets(record) -> list[tuple[str, str]]:
    from termgym.factory.swesynth.behaviour_record import changed_functions

    return changed_functions(record)


def _diff(buggy_tree: Path, edit) -> str:
    """The agent's diff after ``edit(work_tree)`` on a copy of the buggy repository."""
    work = Path(tempfile.mkdtemp(prefix="tg-nonfix-")) / "w"
    try:
        shutil.copytree(buggy_tree, work, symlinks=True)
        subprocess.run(["chmod", "-R", "u+w", str(work)], check=True)
        edit(work)
        subprocess.run(["git", "add", "-A", "-N", "."], cwd=work, check=True, capture_output=True)
        return subprocess.run(["git", "diff", "--no-ext-diff", "HEAD"], cwd=work, check=True, capture_output=True,
                              text=True).stdout
    finally:
        shutil.rmtree(work.parent, ignore_errors=True)


def hard_coded_table(task) -> dict[str, str]:
    """``argument digest -> pickled clean return value`` for every call the failing tests make into the
    changed functions, computed by running those tests on the clean tree on the host under the
    behaviour recorder: what an agent that copied the expected values out of the tests would hard-code."""
    from termgym.factory.swesynth.behaviour_record import _packages, _python_path
    from termgym.tasks.swesynth.behaviour import PROBE_SOURCE, module_name
    from termgym.tasks.swesynth.projects import host_pythonpath
    from termgym.tasks.swesynth.selection import select_command
    from termgym.tasks.swesynth.tree import copy_tree

    record = task.record
    if record.repo_dir is None:
        return {}
    script = textwrap.dedent('''
        import base64, hashlib, inspect, json, pickle, sys
        sys.path[:0] = sys.argv[2].split(":")
        from tgb_recorder import _resolve
        table = {}
        for item in json.load(open(sys.argv[1])):
            try:
                f = _resolve(item["module"], item["qualname"])
                args = pickle.loads(base64.b64decode(item["args"]))
                bound = inspect.signature(f).bind(*args["pos"], *args["var"], **args["kw"], **args["varkw"])
                bound.apply_defaults()
                key = hashlib.sha256(pickle.dumps(sorted(bound.arguments.items()), protocol=4)).hexdigest()
                value = f(*args["pos"], *args["var"], **args["kw"], **args["varkw"])
                table[key] = base64.b64encode(pickle.dumps(value, protocol=4)).decode()
            except Exception:
                pass
        print(json.dumps(table))
    ''')
    targets = _targets(record)
    with tempfile.TemporaryDirectory(prefix="tg-hardcode-") as tmp:
        clean = Path(tmp) / "clean"
        copy_tree(record.repo_dir, clean)
        (Path(tmp) / "tgb_recorder.py").write_bytes(PROBE_SOURCE.read_bytes())
        (Path(tmp) / "config.json").write_text(json.dumps({
            "targets": [list(t) for t in targets], "allowed_modules": _packages(record, task.source_dirs),
            "max_per_target": 200, "max_bytes": 1 << 20, "out": str(Path(tmp) / "calls.json")}))
        paths = host_pythonpath(record.project, clean) if record.project else str(clean)
        env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHONHASHSEED": "0",
               "PYTHONPATH": f"{tmp}:{paths}", "TG_BEHAVIOUR_CONFIG": str(Path(tmp) / "config.json")}
        tests = select_command(record.test_command, clean, record.target_tests).replace("python3 ", f"{sys.executable} ", 1)
        subprocess.run(f"{tests} -p tgb_recorder -p no:cacheprovider -q", shell=True, cwd=clean, env=env,
                       capture_output=True, timeout=600)
        try:
            calls = json.loads((Path(tmp) / "calls.json").read_text())
        except (OSError, ValueError):
            return {}
        python_path = _python_path(record)
        items = [{"module": module_name(c["target"][0], python_path), "qualname": c["target"][1], "args": c["args"]}
                 for c in calls]
        (Path(tmp) / "inputs.json").write_text(json.dumps(items))
        proc = subprocess.run([sys.executable, "-c", script, str(Path(tmp) / "inputs.json"), f"{tmp}:{paths}:{clean}"],
                              capture_output=True, text=True, timeout=120, cwd=tmp, env={**env, "PYTHONPATH": ""})
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {}


_MAKERS["probe_constant"] = _MAKERS["hard_coded"] + '''
def _tg_in_replay():
    import sys
    return sys.argv[1:2] == ["replay"] and sys.argv[0].endswith(".py")
def _tg_constant():
    import collections
    counts = collections.Counter(_TG_TABLE.values())
    return counts.most_common(1)[0][0] if counts else None
_tg_table_make = _tg_make
def _tg_make(f):
    import base64, functools, pickle
    inner = _tg_table_make(f)
    @functools.wraps(f)
    def _w(*a, **k):
        constant = _tg_constant()
        if _tg_in_replay() and constant is not None:
            return pickle.loads(base64.b64decode(constant))
        return inner(*a, **k)
    return _w
'''


def nonfix_patch(task, buggy_tree: Path, kind: str) -> str:
    """A generic non-fix of ``kind`` (:data:`NONFIXES`, :data:`EXTRA_NONFIXES`): the bug stays, the
    changed functions are wrapped."""
    if kind not in _MAKERS:
        raise ValueError(f"unknown non-fix {kind!r}; known: {', '.join(NONFIXES + EXTRA_NONFIXES)}")
    maker = _MAKERS[kind]
    if kind in ("hard_coded", "probe_constant"):
        maker = maker.format(table=hard_coded_table(task))
    by_file: dict[str, list[str]] = {}
    for path, qual in _targets(task.record):
        by_file.setdefault(path, []).append(qual)

    def edit(work: Path) -> None:
        for path, quals in by_file.items():
            target = work / path
            code = _WRAP.format(kind=kind) + maker + "".join(f"_tg_rewrap({q!r}, _tg_make)\n" for q in quals)
            target.write_text(target.read_text() + code)

    return _diff(buggy_tree, edit)


# -- alternative correct fixes ----------------------------------------------------------------------

class _RenameLocals(ast.NodeTransformer):
    def __init__(self, names: set[str]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id in self.names:
            node.id = f"{node.id}_alt"
        return node


def _local_names(fn: ast.FunctionDef) -> set[str]:
    args = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
    args |= {a.arg for a in (fn.args.vararg, fn.args.kwarg) if a}
    declared: set[str] = set()
    stored: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared |= set(node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)) and node is not fn:
            return set()  # nested scopes: renaming could cross them; use another rewrite
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stored.add(node.id)
    return stored - args - declared


def _uses(fn: ast.AST, kinds: tuple[type, ...]) -> bool:
    return any(isinstance(n, kinds) for n in ast.walk(fn))


class _IfExpToIf(ast.NodeTransformer):
    """``return a if c else b`` → ``if c: return a`` / ``return b``."""

    changed = False

    def visit_Return(self, node: ast.Return):
        if isinstance(node.value, ast.IfExp):
            self.changed = True
            e = node.value
            return ast.If(test=e.test, body=[ast.Return(value=e.body)], orelse=[ast.Return(value=e.orelse)])
        return node


def rewrite_function(source: str, qualname: str) -> tuple[int, int, str] | None:
    """``(first line, last line, new text)`` of ``qualname`` in ``source`` rewritten in another style
    (same behaviour), or ``None`` when no rewrite applies."""
    tree = ast.parse(source)
    node: ast.AST = tree
    for part in qualname.split("."):
        node = next((n for n in ast.iter_child_nodes(node) if isinstance(n, (ast.ClassDef, ast.FunctionDef,
                                                                              ast.AsyncFunctionDef))
                     and n.name == part), None)
        if node is None:
            return None
    fn = node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    start = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
    end = fn.end_lineno or fn.lineno
    names = _local_names(fn)
    if names:
        _RenameLocals(names).visit(fn)
    else:
        flip = _IfExpToIf()
        flip.visit(fn)
        if not flip.changed:
            args = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs,
                                    *(a for a in (fn.args.vararg, fn.args.kwarg) if a)]}
            if _uses(fn, (ast.Yield, ast.YieldFrom, ast.Await, ast.Nonlocal, ast.Global)) or any(
                    isinstance(n, ast.Name) and (n.id in ("super", "__class__", "locals", "vars")
                                                 or (n.id in args and isinstance(n.ctx, (ast.Store, ast.Del))))
                    for n in ast.walk(fn)):
                return None  # a closure would change what these mean (an assigned argument turns local)
            # The body moves into a helper the function calls (a closure over the same arguments).
            body = fn.body
            doc = []
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                doc, body = [body[0]], body[1:]
            if not body:
                return None
            helper = ast.FunctionDef(name="_alt_body", args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[],
                                                                           kw_defaults=[], defaults=[]),
                                     body=body, decorator_list=[], returns=None)
            call = ast.Return(value=ast.Call(func=ast.Name(id="_alt_body", ctx=ast.Load()), args=[], keywords=[]))
            fn.body = [*doc, helper, call]
    ast.fix_missing_locations(fn)
    text = ast.unparse(fn)
    indent = " " * fn.col_offset
    return start, end, textwrap.indent(text, indent) + "\n"


def alternative_fix_patch(task, buggy_tree: Path) -> str | None:
    """A correct fix written differently from the oracle (each changed function rewritten), or ``None``."""
    record = task.record
    rewrites: dict[str, list[tuple[int, int, str]]] = {}
    for path, qual in _targets(record):
        clean = (Path(record.repo_dir) / path).read_text(encoding="utf-8")
        found = rewrite_function(clean, qual)
        if found is None:
            return None
        rewrites.setdefault(path, []).append(found)
    if not rewrites:
        return None

    def edit(work: Path) -> None:
        for path, items in rewrites.items():
            lines = (Path(record.repo_dir) / path).read_text(encoding="utf-8").splitlines(keepends=True)
            for start, end, text in sorted(items, reverse=True):
                lines[start - 1:end] = [text]
            (work / path).write_text("".join(lines), encoding="utf-8")

    patch = _diff(buggy_tree, edit)
    if not patch.strip() or _normalised(patch) == _normalised(record.fix_patch):
        return None
    return patch


def _normalised(patch: str) -> str:
    return "\n".join(line for line in patch.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---")))


# -- the measurement --------------------------------------------------------------------------------

def measure_task(suite, task_id: str, backend: str, parts: tuple[str, ...], served_only: bool = False,
                 nonfixes: tuple[str, ...] = NONFIXES) -> dict:
    """Grade one task's non-fixes, alternative fix and oracle (with and without its check).

    A stored check not marked yet is marked first, and one that is not servable recorded again,
    both in memory (what ``termgym swesynth behaviour --heldout`` / ``--retry-unserved`` write);
    with ``served_only`` a task whose check is still not servable is counted, not graded."""
    from termgym.factory.swesynth.behaviour_record import NoCheck, mark_heldout, record_behaviour
    from termgym.sandbox import FreshSandboxes
    from termgym.tasks.swesynth.behaviour import behaviour_check, servable, unservable_reason
    from termgym.tasks.swesynth.selection import select_command
    from termgym.tasks.swesynth.task import SweSynthTask, prepare_workspace

    task = suite.load(task_id)
    entry: dict = {"task_id": task_id, "repo": task.record.repo, "has_check": bool(task.record.behaviour)}
    if not task.record.behaviour:  # not backfilled yet: record it now (kept in memory only)
        try:
            task.record.behaviour = record_behaviour(task.record, backend=backend)
            entry.update(has_check=True, recorded_now=True)
        except NoCheck as exc:
            entry["no_check"] = str(exc)
    elif "heldout" not in task.record.behaviour:  # not marked yet: what `--heldout` does, in memory
        try:
            task.record.behaviour = mark_heldout(task.record, task.record.behaviour, backend=backend)
            entry["marked_now"] = True
        except NoCheck as exc:
            task.record.behaviour, entry["no_check"] = {}, str(exc)
    if served_only and task.record.behaviour and not servable(task.record.behaviour) and "recorded_now" not in entry:
        try:  # what `--retry-unserved` does, in memory
            again = record_behaviour(task.record, backend=backend)
            entry["rerecorded_now"] = True
            if servable(again):
                task.record.behaviour = again
        except NoCheck:
            pass
    entry["served"] = servable(task.record.behaviour)
    if not entry["served"]:
        entry["not_served"] = unservable_reason(task.record.behaviour)
        if served_only:
            return entry
    tree = prepare_workspace(task.record, task.cache_dir)

    targets_only = SweSynthTask(replace(task.record, all_tests=list(task.record.target_tests), behaviour={},
                                        test_command=select_command(task.record.test_command, task.record.repo_dir,
                                                                    task.record.target_tests)),
                                cache_dir=task.cache_dir)

    def grade(patch: str, screen: bool = True) -> dict:
        """The real grade; ``screen`` first runs only the failing tests (a patch that fails one of
        them scores 0 under either grade, so the whole suite need not run)."""
        with FreshSandboxes(backend) as new_sandbox:
            started = time.monotonic()
            if screen:
                quick = targets_only.grade_patch(patch, new_sandbox)
                if not quick["all_passed"] and not quick.get("infra_error"):
                    return {**quick, "all_passed": False, "tests_passed": False, "screened_out": True,
                            "seconds": time.monotonic() - started}
            details = task.grade_patch(patch, new_sandbox)
            details["seconds"] = time.monotonic() - started
        return details

    try:
        if "nonfix" in parts:
            for kind in nonfixes:
                patch = nonfix_patch(task, tree, kind)
                d = grade(patch)
                entry[kind] = {"old": bool(d.get("tests_passed", d["all_passed"]) and not d.get("tamper")),
                               "new": bool(d["all_passed"]), "infra": d.get("infra_error"),
                               "behaviour": d.get("behaviour")}
        if "alt" in parts:
            patch = alternative_fix_patch(task, tree)
            if patch is None:
                entry["alternative"] = {"made": False}
            else:
                d = grade(patch, screen=False)
                entry["alternative"] = {"made": True, "passed": bool(d["all_passed"]), "behaviour": d.get("behaviour"),
                                        "all_result": d.get("all_result"), "infra": d.get("infra_error"),
                                        "mismatches": d.get("behaviour_mismatches")}
        if "time" in parts and task.record.behaviour:
            with_check = grade(task.record.fix_patch, screen=False)
            with FreshSandboxes(backend) as new_sandbox:
                started = time.monotonic()
                replay = behaviour_check(task, task.record.fix_patch, new_sandbox)
                replay_seconds = time.monotonic() - started
            entry["time"] = {"with": round(with_check["seconds"], 2),
                             "without": round(with_check["seconds"] - replay_seconds, 2),
                             "replay": round(replay_seconds, 2), "oracle_passed": bool(with_check["all_passed"]),
                             "replay_passed": bool(replay.get("behaviour_passed"))}
    except Exception as exc:  # one broken task is reported, not fatal
        entry["error"] = f"{type(exc).__name__}: {exc}"[:400]
    return entry


def summarise(entries: list[dict]) -> dict:
    """Hit rates (old grade vs new), the alternative fixes' pass share and the replay's time share."""
    out: dict = {"tasks": len(entries), "with_check": sum(e["has_check"] for e in entries),
                 "errors": sum("error" in e for e in entries),
                 "not_served": {}}
    for e in entries:
        if e.get("not_served"):
            out["not_served"][e["not_served"]] = out["not_served"].get(e["not_served"], 0) + 1
    out["served"] = sum(bool(e.get("served")) for e in entries)
    for kind in NONFIXES + EXTRA_NONFIXES:
        graded = [e[kind] for e in entries if kind in e]
        if graded:
            out[kind] = {"graded": len(graded), "old_hits": sum(g["old"] for g in graded),
                         "new_hits": sum(g["new"] for g in graded), "infra": sum(bool(g["infra"]) for g in graded),
                         # what a policy trained on the default suite meets: the served tasks only
                         "served_new_hits": sum(e[kind]["new"] for e in entries if kind in e and e.get("served"))}
    alts = [e["alternative"] for e in entries if e.get("alternative", {}).get("made")]
    if alts:
        out["alternative"] = {"made": len(alts), "passed": sum(a["passed"] for a in alts),
                              "infra": sum(bool(a["infra"]) for a in alts)}
    times = [e["time"] for e in entries if "time" in e]
    if times:
        extra = sorted(t["with"] - t["without"] for t in times)
        ratio = sorted(t["with"] / t["without"] for t in times if t["without"] > 0)
        out["replay_seconds"] = {"median": round(statistics.median(extra), 2),
                                 "p90": round(extra[int(0.9 * (len(extra) - 1))], 2), "n": len(extra)}
        out["grade_time_ratio"] = {"median": round(statistics.median(ratio), 3),
                                   "p90": round(ratio[int(0.9 * (len(ratio) - 1))], 3)}
    return out


def suite_counts(suite_dir: Path) -> dict:
    """How many tasks of a compact suite carry a check, why the others do not, how many checks have a
    *perturbed* input that tells the bug apart (what hard-coding the tests' calls cannot match), and
    the bytes the checks take."""
    from termgym.factory.swesynth.behaviour_record import _reason_key, read_sidecar
    from termgym.tasks.swesynth.behaviour import servable, unservable_reason
    from termgym.tasks.swesynth.suite import SweSynthSuite

    suite = SweSynthSuite(suite_dir, behaviour="any")
    out: dict = {"tasks": 0, "recorded": 0, "with_check": 0, "perturbed_telling": 0, "servable": 0,
                 "canonical_2": 0, "no_check": {}, "not_served": {}, "bytes": 0, "per_project": {}}
    for repo, count in sorted(suite.projects().items()):
        path = suite_dir / "behaviour" / f"{repo}.jsonl"
        lines = read_sidecar(path)
        out["bytes"] += path.stat().st_size if path.is_file() else 0
        checked = [line["behaviour"] for line in lines.values() if line.get("behaviour")]
        out["tasks"] += count
        out["recorded"] += len(lines)
        out["with_check"] += len(checked)
        origin = {}
        for check in checked:
            origin = {item["id"]: item.get("origin", "") for item in check["inputs"]}
            out["perturbed_telling"] += any(origin.get(i, "").startswith("perturbed") for i in check.get("telling", []))
            out["servable"] += servable(check)
            out["canonical_2"] += check.get("canonical", 1) == 2
            if not servable(check):
                why = unservable_reason(check, name_functions=False)
                out["not_served"][why] = out["not_served"].get(why, 0) + 1
        for line in lines.values():
            if not line.get("behaviour"):
                key = _reason_key(line.get("reason", "?"))
                out["no_check"][key] = out["no_check"].get(key, 0) + 1
        out["per_project"][repo] = {"tasks": count, "recorded": len(lines), "with_check": len(checked),
                                    "served": sum(servable(c) for c in checked)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default="projects", help="suite directory or name (default: projects)")
    parser.add_argument("--sample", type=int, default=100, help="tasks drawn (seeded) from the suite")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only-checked", action="store_true", help="draw only among tasks that carry a check")
    parser.add_argument("--served", action="store_true",
                        help="draw only among the tasks the suite serves by default (behaviour='required')")
    parser.add_argument("--served-only", action="store_true",
                        help="grade only the drawn tasks whose check is servable (after marking or recording "
                             "it again); count the others")
    parser.add_argument("--parts", default="nonfix,alt,time", help="comma list of nonfix, alt, time")
    parser.add_argument("--nonfixes", default=",".join(NONFIXES),
                        help=f"comma list of non-fixes to grade ({', '.join(NONFIXES + EXTRA_NONFIXES)})")
    parser.add_argument("--backend", default="local")
    parser.add_argument("-j", "--jobs", type=int, default=1)
    parser.add_argument("--out", default="behaviour_check.json")
    parser.add_argument("--counts", action="store_true", help="only count the suite's stored checks and exit")
    args = parser.parse_args(argv)
    if args.counts:
        from termgym.tasks.swesynth.suite import NAMED_SUITES
        print(json.dumps(suite_counts(NAMED_SUITES.get(args.suite) or Path(args.suite)), indent=1))
        return 0

    from termgym.tasks.swesynth.suite import NAMED_SUITES, SweSynthSuite

    suite = SweSynthSuite(NAMED_SUITES.get(args.suite) or Path(args.suite), behaviour="any")
    ids = sorted(suite.task_ids("all"))
    if args.served:
        ids = sorted(SweSynthSuite(args.suite if args.suite in NAMED_SUITES else Path(args.suite),
                                   behaviour="required").task_ids("all"))
    if args.only_checked:
        ids = [t for t in ids if suite.record(t).behaviour]
    sample = random.Random(args.seed).sample(ids, min(args.sample, len(ids)))
    parts = tuple(p.strip() for p in args.parts.split(",") if p.strip())
    entries: list[dict] = []
    out = Path(args.out)
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        nonfixes = tuple(k.strip() for k in args.nonfixes.split(",") if k.strip())
        unknown = [k for k in nonfixes if k not in NONFIXES + EXTRA_NONFIXES]
        if unknown:
            parser.error(f"unknown non-fix {unknown[0]!r}; known: {', '.join(NONFIXES + EXTRA_NONFIXES)}")
        for entry in pool.map(lambda tid: measure_task(suite, tid, args.backend, parts, args.served_only, nonfixes),
                              sample):
            entries.append(entry)
            print(json.dumps(entry)[:300], flush=True)
            out.write_text(json.dumps({"summary": summarise(entries), "tasks": entries}, indent=1) + "\n")
    summary = summarise(entries)
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["NONFIXES", "alternative_fix_patch", "hard_coded_table", "measure_task", "nonfix_patch",
           "rewrite_function", "summarise"]

