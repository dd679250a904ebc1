"""The behaviour check: a SWE-SYNTH grade decided by comparing behaviour with the clean code, outside
the graded process.

Tests run inside the interpreter that runs the agent's code, so what that process reports about
itself (test outcomes, however they are signed) can be forged by the code under test. The behaviour
check does not ask the graded process for a verdict; it asks it for *answers*:

* **Recorded at generation** (:mod:`termgym.factory.swesynth.behaviour_record`): calls into the
  functions the bug changes, taken from the clean tree's tests, plus perturbed variants the agent
  never sees, each with the clean code's answer in canonical structural form (return value,
  arguments and ``self`` after the call, exception type; :func:`~termgym.tasks.swesynth.behaviour_probe.canonical`).
  Only inputs the clean code answers the same way twice are kept, and a task gets a check only
  when the buggy code answers at least one of them differently.
* **Replayed at grading** (:func:`behaviour_check`): the test run's sandbox (never the agent's),
  its processes killed and its tree restored, holds the patched tree and *only the inputs*; an isolated ``python3`` (empty environment,
  no user site, its own ``sys.path``) imports the package and replays them, each call under a time
  limit, and prints one line of JSON. The host reads at most :data:`MAX_OUTPUT` bytes of it,
  validates its shape and compares every answer with the stored clean one here, in termgym's
  process. The clean answers never enter any sandbox.

A suite serves a task by default only if its check decides alone: an input that tells the bug
apart is *held out* (no call the tests make has its arguments), the held-out inputs have two or
more different clean outcomes, and, for a bug in two or more functions, each function's bug
*alone* (replayed with only its hunks of the bug patch) is told apart by a held-out input
(:func:`servable`, :func:`uncovered_targets`). The last rule is per bug: a check whose held-out
telling inputs show only one of two broken functions is passed by a patch that fixes that one,
leaves the other broken and forges the tests' reports (docs/security.md, "Half fixes").

A patch passes only if the required tests pass **and** every answer matches. A replay that crashes,
hangs or prints something else is a 0 with the reason in the details; it is an infrastructure error
only if the oracle's tree, replayed in a sandbox nobody touched, does not reproduce the clean
answers either.

Storage: a record's ``behaviour`` (``{"version", "targets", "inputs", "answers", ...}``) lives beside
the record: ``behaviour/<project>.jsonl`` in a compact suite, ``behaviour.json`` in a task folder.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

PROBE_SOURCE = Path(__file__).with_name("behaviour_probe.py")
BEHAVIOUR_VERSION = 1
#: The canonical form new checks are answered in (``behaviour_probe.CANON_VERSION``); a check
#: without ``"canonical"`` was answered in form 1.
CANONICAL_VERSION = 2
#: The most bytes of replay output the host reads (the rest is a failure of the replay, not read).
MAX_OUTPUT = 2 * 1024 * 1024
#: Each replayed call's time limit at recording, in seconds: slower calls are not kept.
CALL_SECONDS = 2.0
#: Each replayed call's time limit at grading: five times the recording's, so a loaded machine does
#: not turn an honest call into a timeout (the whole replay gets this per input plus a margin).
GRADE_CALL_SECONDS = 10.0
MARKER = "TGBEHAVIOUR "
#: Git options for restoring a graded tree: no hooks, no file-system monitor.
_PLAIN_GIT = "-c core.hooksPath=/dev/null -c core.fsmonitor=false"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_STATE_DIGEST = re.compile(r"^(?:[0-9a-f]{12}|-)$")


class BehaviourDataError(ValueError):
    """A stored behaviour check is malformed (the message names the task and the field)."""


def module_name(path: str, python_path: list[str] | tuple[str, ...] = ()) -> str:
    """The importable module name of a repository-relative ``*.py`` path (``src/`` layouts included)."""
    p = PurePosixPath(path)
    for root in sorted((r.strip("/") for r in python_path if r.strip("/")), key=len, reverse=True):
        if p.is_relative_to(root):
            p = p.relative_to(root)
            break
    parts = list(p.with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def canonical_answer(form: Any) -> dict[str, Any]:
    """``{"h": sha256, "c": form when small}`` of a canonical form, computed the probe's way."""
    from termgym.tasks.swesynth import behaviour_probe

    return behaviour_probe.answer_of(form)


#: Callables that read a clock: an input whose pickled arguments hold one (a cache's timer, a
#: default factory) is answered by the clock at replay time, not by the code alone.
CLOCK_CALLABLES = frozenset(
    [f"time.{name}" for name in ("time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns",
                                 "process_time", "process_time_ns", "thread_time", "thread_time_ns",
                                 "clock_gettime", "clock_gettime_ns", "localtime", "gmtime", "ctime", "asctime")]
    + [f"datetime.{cls}.{name}" for cls in ("datetime", "date") for name in ("now", "utcnow", "today")])
_STRING_OPS = frozenset({"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "STRING", "BINSTRING",
                         "SHORT_BINSTRING"})


def clock_reference(args_b64: str) -> str | None:
    """The clock an input's pickled arguments refer to (``"datetime.datetime.now"``), or None.

    Such an input is not a fact about the code: its answer moves with the clock of the machine
    that replays it (a ``TTLCache`` timed by ``datetime.now`` expires its entries while being
    unpickled once the recorded expiry has passed; one timed by ``time.monotonic`` depends on how
    long that machine has been up), so a check holding one turns into an infrastructure error on
    the clean code days later, or on another machine. The pickle is read without running it
    (:mod:`pickletools`): a global that is a clock reader, or ``getattr(datetime, "now")`` as a
    class method is pickled. Bytes that are not a pickle give None (the replay reports those).
    """
    import base64
    import binascii
    import pickletools

    try:
        data = base64.b64decode(args_b64, validate=True)
        ops = list(pickletools.genops(data))
    except (ValueError, binascii.Error, EOFError):
        return None
    memo: dict[int, Any] = {}
    pushed: list[Any] = []  # what each opcode put on the stack, as far as it matters here
    for op, arg, _pos in ops:
        name = op.name
        if name in _STRING_OPS:
            pushed.append(arg if isinstance(arg, str) else None)
        elif name == "MEMOIZE":
            memo[len(memo)] = pushed[-1] if pushed else None
        elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
            memo[int(arg)] = pushed[-1] if pushed else None
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            pushed.append(memo.get(int(arg)))
        elif name in ("GLOBAL", "STACK_GLOBAL"):
            if name == "GLOBAL":
                module, _, qual = str(arg).partition(" ")
            else:
                module, qual = (pushed[-2], pushed[-1]) if len(pushed) >= 2 else (None, None)
                del pushed[-2:]
            ref = ("global", f"{module}.{qual}") if isinstance(module, str) and isinstance(qual, str) else None
            if ref and ref[1] in CLOCK_CALLABLES:
                return ref[1]
            pushed.append(ref)
        else:
            pushed.append(None)
        # getattr(datetime.datetime, "now"): the class, then the method's name, right after it
        if len(pushed) >= 2 and isinstance(pushed[-2], tuple) and isinstance(pushed[-1], str):
            method = f"{pushed[-2][1]}.{pushed[-1]}"
            if method in CLOCK_CALLABLES:
                return method
    return None


def validate_check(check: Any, where: str) -> dict[str, Any]:
    """A stored behaviour check, shape-checked; raises :class:`BehaviourDataError` naming what is wrong."""
    if not isinstance(check, dict):
        raise BehaviourDataError(f"{where}: 'behaviour' must be an object, got {type(check).__name__}")
    if check.get("version") != BEHAVIOUR_VERSION:
        raise BehaviourDataError(f"{where}: 'behaviour.version' must be {BEHAVIOUR_VERSION}, got {check.get('version')!r}")
    if check.get("canonical", 1) not in (1, CANONICAL_VERSION):
        raise BehaviourDataError(f"{where}: 'behaviour.canonical' must be 1 or {CANONICAL_VERSION}, "
                                 f"got {check.get('canonical')!r}")
    for key in ("telling", "heldout"):
        if key in check and not (isinstance(check[key], list) and all(isinstance(i, str) for i in check[key])):
            raise BehaviourDataError(f"{where}: 'behaviour.{key}' must be a list of input ids")
    per_bug = check.get("per_bug")
    if per_bug is not None and not (isinstance(per_bug, dict) and (
            isinstance(per_bug.get("unsplittable"), str)
            or (isinstance(per_bug.get("telling"), dict)
                and all(isinstance(ids, list) and all(isinstance(i, str) for i in ids)
                        for ids in per_bug["telling"].values())))):
        raise BehaviourDataError(f"{where}: 'behaviour.per_bug' must be {{\"telling\": {{function: [input ids]}}}} "
                                 "or {\"unsplittable\": why}")
    inputs, answers = check.get("inputs"), check.get("answers")
    if not isinstance(inputs, list) or not inputs:
        raise BehaviourDataError(f"{where}: 'behaviour.inputs' must be a non-empty list")
    if not isinstance(answers, dict):
        raise BehaviourDataError(f"{where}: 'behaviour.answers' must be an object")
    for n, item in enumerate(inputs):
        if not (isinstance(item, dict) and isinstance(item.get("id"), str) and isinstance(item.get("module"), str)
                and isinstance(item.get("qualname"), str) and isinstance(item.get("args"), str)):
            raise BehaviourDataError(f"{where}: 'behaviour.inputs[{n}]' needs string 'id', 'module', 'qualname', 'args'")
        answer = answers.get(item["id"])
        if not isinstance(answer, dict) or not isinstance(answer.get("h"), str) or not _HEX64.match(answer["h"]):
            raise BehaviourDataError(f"{where}: 'behaviour.answers' has no valid answer for input {item['id']!r}")
    return check


def replay_spec(inputs: list[dict[str, Any]], sys_path: list[str], seconds: float = CALL_SECONDS,
                canonical: int = CANONICAL_VERSION, watch: bool = False, state: bool = False) -> dict[str, Any]:
    """The file the replay sandbox gets: inputs, the import path and which canonical form to answer
    in (the check's), never an answer. ``watch`` (recording only, never a grade): each answer also
    says whether unpickling the input or the call read a clock (``"clock": true``) or drew from the
    shared random generator or the OS's (``"chance": true``), which a check must not depend on:
    ``time_limited`` comparing ``time.monotonic()`` with a recorded start answers by how long the
    replaying machine has been up, ``_sample_unweighted`` by the seed the OS gave the process.
    ``state`` (recording only): each answer also says what the call did to its arguments, leaf by
    leaf (``"s"``, :func:`~termgym.tasks.swesynth.behaviour_probe.state_change`), what
    :func:`state_evidence` reads."""
    spec = {"inputs": [{k: item[k] for k in ("id", "module", "qualname", "args")} for item in inputs],
            "sys_path": list(sys_path), "seconds": seconds, "canonical": canonical}
    if watch:
        spec["watch"] = True
    if state:
        spec["state"] = True
    return spec


def heldout_telling(check: dict[str, Any] | None) -> list[str]:
    """The ids of a check's inputs that tell the bug apart *and* are held out: not a call the
    task's tests make (what an agent reading the tests could hard-code the answer to). Empty for a
    check recorded before held-out inputs were marked (``"heldout"`` missing)."""
    if not check:
        return []
    held = set(check.get("heldout") or ())
    return [i for i in check.get("telling") or () if i in held]


def outcome_digest(answer: dict[str, Any]) -> str | None:
    """What a call returned or raised, without the arguments after it (``answer`` as stored): its
    ``"r"``, or the one its stored form gives; ``None`` when neither is stored (an answer recorded
    before outcomes were, too large for its form to be kept)."""
    from termgym.tasks.swesynth import behaviour_probe

    if isinstance(answer.get("r"), str):
        return answer["r"]
    if "c" in answer:
        return behaviour_probe.outcome_of(answer["c"]) or answer.get("h")
    return None


def heldout_outcomes(check: dict[str, Any] | None) -> int | None:
    """How many different outcomes (return value or exception type) the clean code gives on the
    check's held-out inputs; ``None`` when one of them has no known outcome."""
    if not check:
        return 0
    answers = check.get("answers") or {}
    outcomes = [outcome_digest(answers[i]) for i in check.get("heldout") or () if i in answers]
    return None if None in outcomes else len(set(outcomes))


#: State paths a check keeps as its witness (:func:`state_evidence`).
MAX_STATE_PATHS = 2


def _state_triple(clean: dict[str, Any], buggy: dict[str, Any] | None, path: str) -> list[str] | None:
    """``[clean after, buggy after, at entry]`` of one leaf on one input (12-hex digests, ``"-"``
    for a leaf that does not exist, ``"?"`` for unknown), or None where neither tree's call changed
    it (all three equal, the value unknown)."""
    if clean.get("s_more") or (buggy is not None and buggy.get("s_more")):
        return ["?", "?", "?"]  # more leaves changed than were reported: this one may be among them
    ours, theirs = clean["s"], (buggy or {}).get("s")
    if path not in ours and (theirs is None or path not in theirs):
        return None if theirs is not None else ["?", "?", "?"]
    entry = ours[path][1] if path in ours else theirs[path][1]
    after = ours[path][0] if path in ours else entry
    if theirs is None:
        return [after, "?", entry]
    return [after, theirs[path][0] if path in theirs else entry, entry]


def _state_tells(triples: list[list[str] | None]) -> tuple[int, int] | None:
    """``(distinct clean values, inputs where the buggy value differs)`` of one leaf over the
    held-out inputs when no cheap forgery gives its clean values, else None: the clean values take
    two or more values (one constant cannot), the buggy code's differ from them on some input
    (running the buggy body cannot), and so do the values at entry (leaving it alone cannot)."""
    known = [t for t in triples if t is not None and t[0] != "?"]
    distinct = len({t[0] for t in known})
    buggy_differs = sum(1 for t in known if t[1] != "?" and t[1] != t[0])
    entry_differs = any(t[2] != "?" and t[2] != t[0] for t in known)
    if distinct >= 2 and buggy_differs and entry_differs:
        return distinct, buggy_differs
    return None


def state_evidence(clean: dict[str, dict[str, Any]], buggy: dict[str, dict[str, Any]],
                   heldout: Sequence[str]) -> dict[str, Any]:
    """What a check's ``"state"`` holds, from a state replay of its held-out inputs on each tree
    (answers with ``"s"``, :func:`replay_spec`'s ``state``): up to :data:`MAX_STATE_PATHS` leaves of
    the arguments after the call (``self`` included: ``[0][0].size`` is the first positional
    argument's attribute ``size``) whose clean values no cheap forgery gives, and per held-out input
    each leaf's ``[clean, buggy, entry]`` (:func:`state_witness` checks them again). ``{"paths":
    [], "answers": {}}`` where no leaf qualifies (measured, nothing found).

    Why per leaf: a constructor returns None on every input, so its outcomes are one and a
    constant return would match them; what it leaves on ``self`` can still tell the bug apart
    where one constant, the buggy body or doing nothing cannot give the clean value of one leaf
    on every held-out input. A leaf filled the same way by both trees (a cache) or set to one
    value everywhere (a flag) is not a witness: an agent can run the buggy body and set the flag."""
    ids = [i for i in heldout if i in clean and isinstance(clean[i].get("s"), dict)]
    paths = sorted({p for i in ids for answer in (clean[i], buggy.get(i) or {})
                    if isinstance(answer.get("s"), dict) for p in answer["s"]})
    scored = []
    for path in paths:
        triples = [_state_triple(clean[i], buggy.get(i) if isinstance(buggy.get(i, {}).get("s"), dict) else None,
                                 path) for i in ids]
        tells = _state_tells(triples)
        if tells:
            scored.append((tells, path, triples))
    scored.sort(key=lambda item: (-item[0][0], -item[0][1], item[1]))
    kept = scored[:MAX_STATE_PATHS]
    return {"paths": [path for _, path, _ in kept],
            "answers": {i: [triples[n] for _, _, triples in kept] for n, i in enumerate(ids)} if kept else {}}


def state_witness(check: dict[str, Any] | None) -> list[str]:
    """The leaves of a check's ``"state"`` that, checked again over its held-out inputs as stored,
    no cheap forgery gives (:func:`state_evidence`); empty when there is none (or no ``"state"``)."""
    state = (check or {}).get("state")
    if not isinstance(state, dict) or not isinstance(state.get("paths"), list):
        return []
    answers = state.get("answers") if isinstance(state.get("answers"), dict) else {}
    held = [i for i in check.get("heldout") or () if i in answers]
    witness = []
    for k, path in enumerate(state["paths"]):
        triples = []
        for i in held:
            row = answers[i]
            triple = row[k] if isinstance(row, list) and k < len(row) else ["?", "?", "?"]
            well_formed = isinstance(triple, list) and len(triple) == 3 and all(isinstance(x, str) for x in triple)
            triples.append(triple if triple is None or well_formed else ["?"] * 3)
        if _state_tells(triples):
            witness.append(path)
    return witness


def target_name(target: dict[str, Any]) -> str:
    """A changed function as a reader finds it: ``module.qualname`` (``"addict.addict.Dict.__ror__"``)."""
    return f"{target.get('module')}.{target.get('qualname')}"


def needs_per_bug(check: dict[str, Any] | None) -> bool:
    """Whether ``termgym swesynth behaviour --per-bug`` still has work on a check: its bug changes two
    or more functions and which inputs tell each one's bug apart alone is not measured yet."""
    return bool(check) and len(check.get("targets") or ()) >= 2 and "per_bug" not in check


def uncovered_targets(check: dict[str, Any] | None) -> list[str]:
    """The functions the bug patch changes (the check's ``targets``, by :func:`target_name`) whose
    bug alone no held-out input tells apart; ``[]`` when each has one of its own.

    Measured, not guessed from names: for a bug in two or more functions the check carries
    ``"per_bug": {"telling": {function: [input ids]}}``, the inputs answered differently from the
    clean answers on the clean tree plus *that function's* hunks of the bug patch alone (the tree
    of an agent that fixed every other function; recorded by
    :func:`termgym.factory.swesynth.behaviour_record.per_bug_telling`). A function is covered when
    one of its inputs is held out. Without the measurement (``"per_bug"`` missing, or
    ``{"unsplittable": why}`` when a hunk of the bug patch spans two functions) every function
    counts as uncovered. A bug in one function is that function's: its held-out telling inputs
    are its own.

    Without this rule a check whose held-out telling inputs reach only one of two broken functions
    is passed by a patch that fixes that one, leaves the other broken and forges the tests'
    reports: the replay calls only fixed code and matches (docs/security.md, "Half fixes")."""
    targets = (check or {}).get("targets") or []
    if len(targets) < 2:
        return []
    names = [target_name(t) for t in targets]
    telling = ((check or {}).get("per_bug") or {}).get("telling")
    if not isinstance(telling, dict):
        return names
    held = set(check.get("heldout") or ())
    return [name for name in names if not held & set(telling.get(name) or ())]


def target_coverage(check: dict[str, Any] | None) -> tuple[int, int]:
    """``(changed functions whose bug alone a held-out input tells apart, changed functions)`` of a
    check whose bug changes two or more functions (:func:`uncovered_targets`); ``(0, 0)`` for any
    other. Summed over a suite, the share of bugs the check can tell apart one by one."""
    targets = (check or {}).get("targets") or []
    if len(targets) < 2:
        return 0, 0
    return len(targets) - len(uncovered_targets(check)), len(targets)


def servable(check: dict[str, Any] | None) -> bool:
    """Whether a check can decide a grade on its own (what ``behaviour="required"`` suites serve):
    it tells the bug apart on an input the agent never sees, the clean code answers its held-out
    inputs in at least two different ways, so no one constant (a value copied from the tests, or
    printed by code that detects the replay) matches them all, and, for a bug in two or more
    functions, each function's bug alone is told apart by a held-out input (:func:`uncovered_targets`),
    so fixing some of the broken functions does not pass it."""
    return (bool(heldout_telling(check)) and ((heldout_outcomes(check) or 0) >= 2 or bool(state_witness(check)))
            and not uncovered_targets(check))


def needs_marking(check: dict[str, Any] | None) -> bool:
    """Whether ``termgym swesynth behaviour --heldout`` still has work on a check: its held-out
    inputs are not marked, or one of them has no known outcome."""
    return bool(check) and ("heldout" not in check or heldout_outcomes(check) is None)


#: :func:`unservable_reason` of a check failing the per-bug rule, without the functions' names (what
#: suites and the card count by).
UNCOVERED_REASON = "a changed function's bug alone is told apart by no held-out input"


def unservable_reason(check: dict[str, Any] | None, *, name_functions: bool = True) -> str:
    """Why :func:`servable` says no (for counts and error messages). A check failing the per-bug
    rule names its uncovered functions unless ``name_functions`` is false (what counts per reason
    use: :data:`UNCOVERED_REASON` alone)."""
    if not check:
        return "no behaviour check"
    if "heldout" not in check:
        return "the check's held-out inputs are not marked yet (`termgym swesynth behaviour --heldout`)"
    if not check.get("telling"):
        return "no stored input is answered differently by the buggy code"
    if not heldout_telling(check):
        return "only calls the tests make tell the bug apart (no held-out input does)"
    if heldout_outcomes(check) is None:
        return "the held-out answers' outcomes are not recorded yet (`termgym swesynth behaviour --heldout`)"
    if (heldout_outcomes(check) or 0) < 2 and not state_witness(check):
        return "the clean code answers every held-out input alike (one constant would match them all)"
    if needs_per_bug(check):
        return "each changed function's bug alone is not replayed yet (`termgym swesynth behaviour --per-bug`)"
    unsplittable = (check.get("per_bug") or {}).get("unsplittable")
    if unsplittable:
        return "its bug patch cannot be split by changed function, so no input is shown to tell each bug apart" + (
            f" ({unsplittable})" if name_functions else "")
    uncovered = uncovered_targets(check)
    if uncovered and name_functions:
        return f"{UNCOVERED_REASON} (no held-out input tells apart the bug of {', '.join(uncovered)} alone)"
    return UNCOVERED_REASON


def task_sys_path(task) -> list[str]:
    """``sys.path`` for a replay of ``task``: the tree's import roots (its ``python_path`` directories,
    then the workdir), then the project's read-only test environment."""
    wd = task.workdir.rstrip("/")
    parts = task.test_env_parts()
    paths = list(parts.python_path) if parts else []
    inside = [p for p in paths if p == wd or p.startswith(wd + "/")]
    return [*inside, wd, *(p for p in paths if p not in inside)]


#: What the replay's command prints when the tree could not be made ready (:func:`run_replay`'s ``prepare``).
PREPARE_FAILED = "TGBEHAVIOUR-PREPARE-FAILED"


def run_replay(sandbox, spec: dict[str, Any], timeout: float | None = None, *,
               files: dict[str, str] | None = None, prepare: str = "") -> tuple[dict[str, dict] | None, str]:
    """Replay ``spec`` in ``sandbox`` (which already holds the tree); returns ``(answers by id, problem)``.

    The probe runs in ``/tmp`` under ``env -i`` (no ``PYTHONPATH``, no startup file; a fixed hash
    seed so set iteration is the same as at recording) with ``-s -B``. Whatever it prints is
    untrusted: :func:`parse_replay_output` reads it defensively. ``problem`` is ``""`` on success.

    ``files`` (sandbox path -> text) are written with the probe and ``prepare`` (a shell command)
    runs first in the same round trip: how a tree is readied for the replay (a patch applied, a
    graded tree restored); when it fails the replay does not run and ``problem`` says so.
    """
    token = secrets.token_hex(8)
    folder = f"/tmp/.tgb-{token}"
    sandbox.write_file(f"{folder}/probe.py", PROBE_SOURCE.read_bytes(), mode=0o444)
    sandbox.write_file(f"{folder}/inputs.json", json.dumps(spec), mode=0o444)
    for path, text in (files or {}).items():
        sandbox.write_file(path, text)
    seconds = float(spec.get("seconds", CALL_SECONDS))
    limit = timeout if timeout is not None else 30.0 + seconds * len(spec["inputs"])
    command = (f"cd {shlex.quote(folder)} && env -i PATH=/usr/local/bin:/usr/bin:/bin PYTHONHASHSEED=0 "
               f"LANG=C.UTF-8 python3 -s -B probe.py replay inputs.json 2>/dev/null")
    if prepare:
        command = f"{{ {prepare} ; }} 2>&1 || {{ echo {PREPARE_FAILED}; (exit 97); }} && {command}"
    result = sandbox.exec(command, timeout=limit)
    if result.timed_out:
        return None, f"the replay did not finish within {limit:.0f} s"
    if prepare and PREPARE_FAILED in result.output.splitlines():
        before = result.output.split(PREPARE_FAILED, 1)[0].strip()[-200:]
        return None, f"the tree could not be made ready for the replay (the patch does not apply?): {before}"
    answers, problem = parse_replay_output(result.output, [item["id"] for item in spec["inputs"]])
    if answers is None and result.exit_code != 0:
        problem = f"the replay exited with {result.exit_code}: {problem}"
    return answers, problem


def parse_replay_output(output: str, ids: list[str]) -> tuple[dict[str, dict] | None, str]:
    """The answers in a replay's output, or ``(None, why not)``: one ``TGBEHAVIOUR`` line of JSON
    whose results name exactly ``ids``, in order, each with a 64-hex digest (and maybe a form)."""
    if len(output) > MAX_OUTPUT:
        return None, f"the replay printed more than {MAX_OUTPUT} bytes"
    lines = [line for line in output.splitlines() if line.startswith(MARKER)]
    if len(lines) != 1:
        tail = output.strip()[-200:]
        return None, f"the replay printed {len(lines)} result lines instead of 1" + (f" (output ends: {tail!r})" if tail else "")
    try:
        data = json.loads(lines[0][len(MARKER):])
    except (ValueError, RecursionError) as exc:
        return None, f"the replay's result line is not JSON ({str(exc)[:80]})"
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list) or len(results) != len(ids):
        return None, f"the replay reported {len(results) if isinstance(results, list) else 'no'} results for {len(ids)} inputs"
    answers: dict[str, dict] = {}
    for want, got in zip(ids, results):
        if not isinstance(got, dict) or got.get("id") != want:
            return None, f"the replay's results are out of order at input {want!r}"
        digest = got.get("h")
        if not isinstance(digest, str) or not _HEX64.match(digest):
            return None, f"the replay's result for {want!r} has no valid digest"
        answer: dict[str, Any] = {"h": digest}
        outcome = got.get("r")
        if outcome is not None:
            if not isinstance(outcome, str) or not _HEX64.match(outcome):
                return None, f"the replay's result for {want!r} has an invalid outcome digest"
            answer["r"] = outcome
        if "c" in got:
            # A form that travels must be the one its digest names: recomputed here, on the host.
            if canonical_answer(got["c"]).get("h") != digest:
                return None, f"the replay's result for {want!r} does not match its own digest"
            answer["c"] = got["c"]
        for kind in ("clock", "chance"):  # the call read a clock or drew chance (a watched replay)
            if got.get(kind) is True:
                answer[kind] = True
        if "s" in got:  # what the call did to its arguments, leaf by leaf (a replay asked for state)
            change = got["s"]
            if not (isinstance(change, dict) and all(
                    isinstance(path, str) and isinstance(pair, list) and len(pair) == 2
                    and all(isinstance(h, str) and _STATE_DIGEST.match(h) for h in pair)
                    for path, pair in change.items())):
                return None, f"the replay's result for {want!r} has an invalid state change"
            answer["s"] = change
            if got.get("s_more") is True:
                answer["s_more"] = True
        answers[want] = answer
    return answers, ""


def compare_answers(expected: dict[str, dict], got: dict[str, dict]) -> list[dict[str, Any]]:
    """The inputs whose replayed answer differs from the clean one (by canonical digest)."""
    mismatches = []
    for input_id, want in expected.items():
        have = got.get(input_id)
        if have is None or have.get("h") != want.get("h"):
            mismatches.append({"input": input_id, "expected": want.get("c", want.get("h")),
                               "got": None if have is None else have.get("c", have.get("h"))})
    return mismatches


def _short(value: Any, limit: int = 240) -> Any:
    text = json.dumps(value, sort_keys=True)
    return value if len(text) <= limit else text[:limit] + "..."


def apply_patch_step(workdir: str, patch: str) -> tuple[str, dict[str, str]]:
    """How a replay's tree gets ``patch``: ``(shell command, files to write first)`` — the patch in
    a new file under ``/tmp``, applied in ``workdir`` and removed; ``("", {})`` for an empty patch."""
    if not patch.strip():
        return "", {}
    path = f"/tmp/.termgym-behaviour-{secrets.token_hex(8)}.patch"
    return f"cd {shlex.quote(workdir)} && git apply --whitespace=nowarn {path} && rm -f {path}", {path: patch}


def restore_graded_tree(sandbox, workdir: str, patch: str) -> tuple[str, dict[str, str]]:
    """How the tree of a graded sandbox is made again what a fresh one holds: ``(shell command, files
    to write first)``, ``("", {})`` where the test run could not change it.

    A local sandbox's tree was locked on the host for the test run (``run_graded_tests``); anywhere
    else (a container's root can write everything) the workdir goes back to the buggy commit
    (``reset --hard``, untracked files removed) and ``patch`` is applied again from a new file.
    """
    if getattr(sandbox, "root", None) is not None:
        return "", {}
    command = f"cd {shlex.quote(workdir)} && git {_PLAIN_GIT} reset -q --hard && git {_PLAIN_GIT} clean -fdq"
    apply, files = apply_patch_step(workdir, patch)
    return (f"{command} && {apply}" if apply else command), files


def behaviour_check(task, patch: str, new_sandbox: Callable, graded_sandbox=None) -> dict[str, Any]:
    """Replay ``task``'s recorded inputs on ``patch`` and compare with the clean answers.

    The replay runs in ``graded_sandbox`` when given (the sandbox whose graded test run just
    passed, holding the buggy tree with ``patch`` applied), else in a fresh sandbox. Reusing the
    graded sandbox spares a sandbox per grade and is as sound as a fresh one: every process the
    test run left is killed first (``stop_commands``; the grader's shell that ran the tests stays,
    which spares starting another), a tree the test run could write (a container's root may) is
    reset to the buggy commit and ``patch`` applied again, and the probe and its inputs go into a
    new random folder only now. Whatever the test run could still have left behind (a changed
    interpreter, a shell it reached into) is the agent's code acting on the replay, which the
    agent's code imported by the probe can do anyway: the answers are the graded code's either way, and the
    comparison with clean answers that never enter a sandbox happens here, on the host. The replay
    of the oracle's tree that tells an infrastructure error from the agent's 0 always gets a fresh
    sandbox nobody touched.

    Returns grade details: ``behaviour`` (``"k/n"`` matching, or ``"none"`` when the task carries no
    check), ``behaviour_passed``, ``behaviour_mismatches`` (the first few) and ``behaviour_failure``
    (why the replay could not be read), or ``infra_error`` when the oracle's tree does not reproduce
    the clean answers in a sandbox nobody else touched.
    """
    check = task.record.behaviour
    if not check:
        return {"behaviour": "none", "behaviour_passed": True}
    check = validate_check(check, f"task {task.record.task_id}")
    sys_path = task_sys_path(task)
    spec = replay_spec(check["inputs"], sys_path, max(GRADE_CALL_SECONDS, float(check.get("seconds", CALL_SECONDS))),
                       canonical=int(check.get("canonical", 1)))
    expected = {item["id"]: check["answers"][item["id"]] for item in check["inputs"]}

    def replay_on(tree_patch: str) -> tuple[dict | None, str]:
        box = new_sandbox(task.sandbox_spec())
        prepare, files = apply_patch_step(task.workdir, tree_patch)
        try:
            return run_replay(box, spec, files=files, prepare=prepare)
        finally:
            box.close()

    def replay_in_graded() -> tuple[dict | None, str]:
        graded_sandbox.stop_commands()  # nothing the test run started survives into the replay
        prepare, files = restore_graded_tree(graded_sandbox, task.workdir, patch)
        return run_replay(graded_sandbox, spec, files=files, prepare=prepare)

    answers, problem = replay_in_graded() if graded_sandbox is not None else replay_on(patch)
    mismatches = compare_answers(expected, answers) if answers is not None else []
    n = len(expected)
    if answers is not None and not mismatches:
        return {"behaviour": f"{n}/{n}", "behaviour_passed": True}
    # Before blaming the agent: the oracle's tree, in a sandbox nobody touched, must give the clean answers.
    clean, clean_problem = replay_on(task.record.fix_patch)
    if clean is None or compare_answers(expected, clean):
        why = clean_problem or f"{len(compare_answers(expected, clean or {}))} answers differ"
        return {"behaviour": f"0/{n}", "behaviour_passed": False,
                "infra_error": f"the clean code does not reproduce its recorded behaviour in this sandbox ({why})"}
    details: dict[str, Any] = {"behaviour_passed": False}
    if answers is None:
        details.update(behaviour=f"0/{n}", behaviour_failure=f"the behaviour replay failed: {problem}")
    else:
        details.update(behaviour=f"{n - len(mismatches)}/{n}",
                       behaviour_failure=f"{len(mismatches)} of {n} replayed calls differ from the clean code",
                       behaviour_mismatches=[{**m, "expected": _short(m["expected"]), "got": _short(m["got"])}
                                             for m in mismatches[:3]])
    return details


def apply_behaviour_check(task, patch: str, new_sandbox: Callable, details: dict[str, Any],
                          graded_sandbox=None) -> dict[str, Any]:
    """Add the behaviour check to ``details`` of a test run (what :meth:`SweSynthTask.grade_patch` calls).

    The replay runs only when the required tests all passed and the run was trusted; a mismatch
    turns ``all_passed`` off. ``graded_sandbox``: the test run's sandbox, reused for the replay
    (see :func:`behaviour_check`).
    """
    if not details.get("all_passed") or details.get("tamper") or details.get("infra_error"):
        details.setdefault("behaviour", "not run (the required tests did not all pass)"
                           if task.record.behaviour else "none")
        return details
    details["tests_passed"] = True  # what the grade was before the behaviour check (benchmarks compare)
    result = behaviour_check(task, patch, new_sandbox, graded_sandbox)
    details.update(result)
    if not result.get("behaviour_passed"):
        details["all_passed"] = False
    return details


def digest_of(data: bytes) -> str:
    """sha256 hex of ``data``."""
    return hashlib.sha256(data).hexdigest()
