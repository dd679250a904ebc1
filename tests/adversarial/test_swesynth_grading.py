"""SWE-SYNTH grading attacked as a hostile agent would, on the real bundled task, in real sandboxes.

Every attack here leaves the bug in place and tries to get a passing grade anyway; each must score 0.
Two kinds:

* code-under-test attacks: the graded diff adds code to the package (``ledgerly/__init__.py``,
  imported by every test) that goes after the grader from inside the test process
  (:func:`graded_with`, one grading sandbox each);
* agent-sandbox attacks: shell commands in the agent's own sandbox before it submits (config files,
  conftests, symlinks, ``.pyc`` files, git settings, background writers, killing the shell), played
  through :class:`~termgym.env.TerminalEnv`.

The threat model and what each test proves: ``docs/security.md``.
"""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from termgym.env import TerminalEnv, oracle_actions
from termgym.sandbox import FreshSandboxes
from termgym.tasks.swesynth import default_suite

TASK = "ledgerly-03e7642999"  # the task conftest.py loads: Account.normal_side says "Credit", not "credit"
SUBMIT = "THOUGHT: done\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"


def _bash(command: str) -> str:
    return f"THOUGHT: next step\n```bash\n{command}\n```"


def make_patch(buggy_tree: Path, tmp_path: Path, edits: dict[str, str], append: bool = True) -> str:
    """The agent's diff after appending (or writing) ``edits`` to files of the buggy repository."""
    work = tmp_path / "work"
    shutil.copytree(buggy_tree, work, symlinks=True)
    for path, text in edits.items():
        target = work / path
        target.parent.mkdir(parents=True, exist_ok=True)
        old = target.read_text() if append and target.exists() else ""
        target.write_text(old + textwrap.dedent(text))
    subprocess.run(["git", "add", "-A", "-N", "."], cwd=work, check=True)
    return subprocess.run(["git", "diff", "--no-ext-diff", "HEAD"], cwd=work, check=True, capture_output=True,
                          text=True).stdout


def graded_with(task, buggy_tree: Path, tmp_path: Path, code: str, path: str = "ledgerly/__init__.py") -> dict:
    """Grade the buggy repository plus ``code`` appended to ``path``, as the env's grader would."""
    patch = make_patch(buggy_tree, tmp_path, {path: code})
    assert patch.strip(), "the attack changed nothing"
    with FreshSandboxes("local") as new_sandbox:
        return task.grade_patch(patch, new_sandbox)


def assert_decided_outside(details: dict) -> None:
    """An in-process forgery may make pytest report a pass; the behaviour check, decided on the host
    against the clean code's answers, must still fail the grade (no infrastructure error).

    A forgery that wins only part of its race (a runner patched after some tests ran) leaves a
    failure pytest reports itself: that alone is the 0, and the replay is not needed then."""
    assert not details["all_passed"], details
    assert not details.get("infra_error"), details
    if details["target_result"] != "0/3":
        passed, total = map(int, details["all_result"].split("/"))
        reported_by_pytest = passed < total and not details.get("tests_passed")
        assert details.get("behaviour_failure") or details.get("tamper") or reported_by_pytest, details


def assert_forgery_fails(details: dict) -> None:
    assert not details["all_passed"], details
    assert details["target_result"] == "0/3", details
    assert not details.get("infra_error"), details  # an attack is the agent's 0, never an outage


# -- the honest baseline on the same task --------------------------------------------------------


def test_oracle_still_scores_one_and_doing_nothing_zero(cache):
    env = TerminalEnv(default_suite("toy", cache_dir=cache))
    try:
        env.reset(options={"task_id": TASK})
        for action in oracle_actions(env):
            *_, info = env.step(action)
        grade = info["grade"]
        assert grade["score"] == 1.0 and grade["all_result"] == "233/233" and not grade.get("tamper"), grade
        env.reset(options={"task_id": TASK})
        *_, info = env.step(SUBMIT)
        grade = info["grade"]
        assert grade["score"] == 0.0 and grade["all_result"] == "230/233" and not grade.get("infra_error"), grade
    finally:
        env.close()


# -- code under test going after the grader --------------------------------------------------------

ATTACKS = {
    # The attack that scored 1.0 before: rewrite the junit report named on the command line at exit.
    "atexit_rewrites_junit_xml": """
        import atexit as _atexit, re as _re, sys as _sys
        def _forge():
            for arg in _sys.argv:
                if arg.startswith("--junitxml="):
                    path = arg.split("=", 1)[1]
                    text = open(path).read()
                    open(path, "w").write(_re.sub(r"<failure.*?</failure>", "", text, flags=_re.S))
        _atexit.register(_forge)
    """,
    # The other attack that scored 1.0: every report says "passed".
    "monkeypatch_testreport_from_item_and_call": """
        import _pytest.reports as _reports
        _orig = _reports.TestReport.from_item_and_call.__func__
        def _passed(cls, item, call):
            report = _orig(cls, item, call)
            report.outcome, report.longrepr = "passed", None
            return report
        _reports.TestReport.from_item_and_call = classmethod(_passed)
    """,
    "function_runtest_is_a_no_op": """
        import _pytest.python as _python
        _python.Function.runtest = lambda self: None
    """,
    "runner_module_function_replaced": """
        import _pytest.runner as _runner
        _runner.call_runtest_hook = lambda item, when, **kw: _runner.CallInfo.from_call(lambda: None, when=when)
    """,
    "pluggy_multicall_replaced": """
        import pluggy._callers as _callers
        _real = _callers._multicall
        def _quiet(*args, **kwargs):
            try:
                return _real(*args, **kwargs)
            except Exception:
                return None
        _callers._multicall = _quiet
    """,
    "sys_modules_swaps_the_runner": """
        import sys as _sys, types as _types
        _fake = _types.ModuleType("_pytest.runner")
        _fake.__dict__.update(_sys.modules["_pytest.runner"].__dict__)
        _sys.modules["_pytest.runner"] = _fake
    """,
    "builtins_patched": """
        import builtins as _builtins
        _repr = _builtins.repr
        _builtins.repr = lambda obj: _repr(obj)  # harmless on its face: the guard flags any replacement
    """,
    "os_exit_zero_at_import": """
        import os as _os
        _os._exit(0)
    """,
    "os_exit_zero_at_interpreter_exit": """
        import atexit as _atexit, os as _os
        _atexit.register(lambda: _os._exit(0))
    """,
    "kills_its_own_test_process": """
        import os as _os, signal as _signal
        _os.kill(_os.getpid(), _signal.SIGKILL)
    """,
    "kills_the_shell_that_runs_the_tests": """
        import os as _os, signal as _signal
        _os.kill(_os.getppid(), _signal.SIGKILL)
    """,
    "walks_frames_to_the_test_item": """
        # Armed at the first call of the buggy property: climb to pytest's frames and make every
        # remaining test a no-op (scores 233/233 against a grader without the guard).
        import sys as _sys
        def _arm():
            frame = _sys._getframe()
            while frame is not None:
                item = frame.f_locals.get("item")
                if item is not None and hasattr(item, "session"):
                    for other in item.session.items:
                        other.runtest = lambda: None
                    return
                frame = frame.f_back

        from .accounts import Account as _Account
        _orig_side = _Account.normal_side
        _Account.normal_side = property(lambda self: (_arm(), _orig_side.fget(self))[1])
    """,
    "traceback_frames_to_the_runner": """
        def _arm():
            try:
                raise ValueError
            except ValueError as exc:
                frame = exc.__traceback__.tb_frame
            while frame is not None:
                item = frame.f_locals.get("item")
                if item is not None and hasattr(item, "session"):
                    for other in item.session.items:
                        other.runtest = lambda: None
                    return
                frame = frame.f_back

        from .accounts import Account as _Account
        _orig_side = _Account.normal_side
        _Account.normal_side = property(lambda self: (_arm(), _orig_side.fget(self))[1])
    """,
    "inspect_currentframe": """
        import inspect as _inspect
        _frame = _inspect.currentframe().f_back
    """,
    "gc_finds_the_test_items": """
        import gc as _gc
        def _arm():
            for obj in _gc.get_objects():
                if type(obj).__name__ == "Function" and hasattr(obj, "runtest"):
                    obj.runtest = lambda: None

        from .accounts import Account as _Account
        _orig_side = _Account.normal_side
        _Account.normal_side = property(lambda self: (_arm(), _orig_side.fget(self))[1])
    """,
    "settrace_rewrites_locals": """
        import sys as _sys
        _sys.settrace(lambda frame, event, arg: None)
    """,
    "ctypes_reaches_memory": """
        import ctypes as _ctypes
        _ctypes.pythonapi.Py_IncRef
    """,
    "swaps_the_test_function_code": """
        import sys as _sys
        def _swap():
            for name, module in list(_sys.modules.items()):
                fn = getattr(module, "test_normal_side", None)
                if fn is not None:
                    fn.__code__ = (lambda code, side: None).__code__
        from .accounts import Account as _Account
        _orig_side = _Account.normal_side
        _Account.normal_side = property(lambda self: (_swap(), _orig_side.fget(self))[1])
    """,
    "replaces_the_test_modules_globals": """
        import sys as _sys
        class _AlwaysRight:
            def __init__(self, *a, **k):
                pass
            normal_side = property(lambda self: _Any())
        class _Any:
            def __eq__(self, other):
                return True
        def _poison():
            for name, module in list(_sys.modules.items()):
                if getattr(module, "__file__", "") and "/tests/" in module.__file__ and hasattr(module, "Account"):
                    module.Account = _AlwaysRight
        from .accounts import Account as _Account
        _orig_side = _Account.normal_side
        _Account.normal_side = property(lambda self: (_poison(), _orig_side.fget(self))[1])
    """,
    "fake_test_module_planted_in_sys_modules": """
        import sys as _sys, types as _types
        _fake = _types.ModuleType("test_accounts")
        _fake.__file__ = "/app/tests/test_accounts.py"
        exec(compile("def test_normal_side():\\n    pass\\n", "/app/tests/test_accounts.py", "exec"), _fake.__dict__)
        _sys.modules["test_accounts"] = _fake
    """,
    "rewrites_the_tests_at_import": """
        import glob as _glob
        for _path in _glob.glob("/app/tests/test_*.py"):
            try:
                open(_path, "w").write("def test_nothing():\\n    pass\\n")
            except OSError:
                pass
    """,
    "writes_pyc_files_that_shadow_sources": """
        import os as _os, py_compile as _pyc
        try:
            _os.makedirs("/app/ledgerly/__pycache__", exist_ok=True)
            open("/tmp/fixed_accounts.py", "w").write(open("/app/ledgerly/accounts.py").read().replace('"Credit"', '"credit"'))
            _pyc.compile("/tmp/fixed_accounts.py", cfile="/app/ledgerly/__pycache__/accounts.cpython-311.pyc")
        except OSError:
            pass
    """,
    "writes_a_conftest_at_run_time": """
        try:
            open("/app/tests/conftest.py", "w").write("import pytest\\n@pytest.hookimpl(hookwrapper=True)\\n"
                                                     "def pytest_runtest_makereport(item, call):\\n    call.excinfo = None\\n    yield\\n")
        except OSError:
            pass
    """,
    "forges_event_lines_on_every_descriptor": """
        import os as _os
        _line = b'[2,"phase",{"id":"tests/test_accounts.py::test_normal_side[2000-credit]","when":"call","outcome":"passed"}]\\t' + b"0" * 64 + b"\\n"
        for _fd in range(3, 64):
            try:
                _os.write(_fd, _line)
            except OSError:
                pass
    """,
    "appends_to_the_grader_event_file": """
        import os as _os
        for _name in _os.listdir("/tmp"):
            if _name.startswith(".tg-"):
                try:
                    with open(f"/tmp/{_name}/events", "a") as _fh:
                        _fh.write("forged\\n")
                except Exception:
                    pass
    """,
    "reads_process_memory_for_the_key": """
        try:
            open("/proc/self/mem", "rb").close()
        except Exception:
            pass
        try:
            open("/proc/self/environ", "rb").read()
        except Exception:
            pass
    """,
    "installs_a_signal_handler": """
        import signal as _signal
        _signal.signal(_signal.SIGALRM, lambda signum, frame: None)
    """,
    "adds_its_own_audit_hook": """
        import sys as _sys
        _seen = []
        _sys.addaudithook(lambda event, args: _seen.append(args))
    """,
    "compiles_code_under_a_tool_chain_file_name": """
        _ns = {}
        exec(compile("import sys\\ndef grab():\\n    return sys._getframe(1)\\n",
                     "/usr/lib/python3/dist-packages/_pytest/runner.py", "exec"), _ns)
    """,
    "child_process_reads_the_key_from_memory": """
        # A child process (no audit hook there) reads the test process's memory for the HMAC key,
        # the test process silences the plugin's descriptor, and at exit the child writes a chain
        # of passing events that continues the genuine one.
        import atexit as _atexit, os as _os, subprocess as _sp, sys as _sys
        _CHILD = @CHILD@
        _state = {}
        def _arm():
            if _state:
                return
            _state["armed"] = True
            found = _sp.run([_sys.executable, "-c", _CHILD, str(_os.getpid()), "find"], capture_output=True, text=True)
            parts = found.stdout.split()
            if len(parts) == 2:
                _os.dup2(_os.open("/dev/null", _os.O_WRONLY), int(parts[1]))
                _atexit.register(lambda: _sp.run([_sys.executable, "-c", _CHILD, str(_os.getpid()), "forge"]))
        from .accounts import Account as _Account
        _orig_side = _Account.normal_side
        _Account.normal_side = property(lambda self: (_arm(), _orig_side.fget(self))[1])
    """,
    "c_callables_in_a_thread_collect_gc_objects": """
        # No project frame is on the thread's stack when gc.get_objects runs: only threading's and C
        # callables; the objects land in a list the project reads at its first call.
        import gc as _gc, itertools as _it, threading as _th
        def _arm():
            store = []
            thread = _th.Thread(target=store.extend, args=(_it.starmap(_gc.get_objects, [()]),))
            thread.start()
            thread.join()
            for obj in (store[0] if store else []):
                if type(obj).__name__ == "Function" and hasattr(obj, "runtest"):
                    obj.runtest = lambda: None
        from .accounts import Account as _Account
        _orig_side = _Account.normal_side
        _Account.normal_side = property(lambda self: (_arm(), _orig_side.fget(self))[1])
    """,
    "forks_so_two_sessions_write_the_stream": """
        # The forked child has the plugin's key in its memory and carries on with the same session.
        import os as _os
        _os.fork()
    """,
    "system_exit_zero_at_import": """
        raise SystemExit(0)
    """,
    "pytest_hooks_in_the_package": """
        import pytest as _pytest
        @_pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(item, call):
            call.excinfo = None
            yield
    """,
}


#: The memory-reading child of ``child_process_reads_the_key_from_memory``: it finds the key by
#: trying every 32-byte ``bytes`` object in the test process's writable memory against the first
#: event line, then (``forge``) continues the genuine chain with passing phases for every test left.
KEY_THIEF = """\
import hashlib, hmac, json, os, re, sys
pid, mode = int(sys.argv[1]), sys.argv[2]
events = [f"/tmp/{d}/events" for d in os.listdir("/tmp") if d.startswith(".tg-") and not d.startswith(".tg-k-")][0]
lines = open(events, "rb").read().splitlines()
body, _, mac = lines[0].rpartition(b"\\t")
key = None
with open(f"/proc/{pid}/mem", "rb") as mem:
    for line in open(f"/proc/{pid}/maps"):
        addr, perms = line.split()[:2]
        lo, hi = (int(x, 16) for x in addr.split("-"))
        if "rw" not in perms or hi - lo > (256 << 20):
            continue
        try:
            mem.seek(lo)
            data = mem.read(hi - lo)
        except OSError:
            continue
        # A 32-byte bytes object: ob_size == 32 and the hash word, then the data and a NUL.
        for m in re.finditer(re.escape((32).to_bytes(8, "little")), data):
            k = data[m.start() + 16:m.start() + 48]
            if len(k) == 32 and data[m.start() + 48:m.start() + 49] == b"\\0" and hmac.compare_digest(
                    hmac.new(k, body, hashlib.sha256).hexdigest().encode(), mac):
                key = k
                break
        if key:
            break
if key is None:
    print("NOKEY")
    sys.exit(0)
if mode == "find":
    fd = [int(n) for n in os.listdir(f"/proc/{pid}/fd") if os.readlink(f"/proc/{pid}/fd/{n}") == events][0]
    print(key.hex(), fd)
    sys.exit(0)
lines = open(events, "rb").read().splitlines()
seq, prev, collected, done = 0, b"", [], set()
for raw in lines:
    b, _, m = raw.rpartition(b"\\t")
    s, kind, payload = json.loads(b)
    seq, prev = s, m
    if kind == "collected":
        collected = payload["ids"]
    if kind == "phase":
        done.add((payload["id"], payload["when"]))
out = []
def emit(kind, payload):
    global seq, prev
    seq += 1
    b = json.dumps([seq, kind, payload], separators=(",", ":")).encode()
    prev = hmac.new(key, prev + b, hashlib.sha256).hexdigest().encode()
    out.append(b + b"\\t" + prev + b"\\n")
for tid in collected:
    for when in ("setup", "call", "teardown"):
        if (tid, when) not in done:
            emit("phase", {"id": tid, "when": when, "outcome": "passed"})
emit("finish", {"exitstatus": 1, "denied": 0})
with open(events, "ab") as fh:
    fh.write(b"".join(out))
"""
ATTACKS["child_process_reads_the_key_from_memory"] = ATTACKS["child_process_reads_the_key_from_memory"].replace(
    "@CHILD@", repr(KEY_THIEF))


#: In-process forgeries the slimmed grader plugin no longer stops (issue 25, item 2: it denies and
#: checks nothing inside the test process, so it refuses no honest project). Each may still make pytest
#: report a pass; the behaviour check against the clean code, decided on the host, gives them 0.
IN_PROCESS_FORGERIES = {
    "c_callables_in_a_thread_collect_gc_objects", "function_runtest_is_a_no_op", "gc_finds_the_test_items",
    "monkeypatch_testreport_from_item_and_call", "replaces_the_test_modules_globals",
    "runner_module_function_replaced", "swaps_the_test_function_code", "traceback_frames_to_the_runner",
    "walks_frames_to_the_test_item",
}
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_code_under_test_cannot_forge_a_pass(attack, task, buggy_tree, tmp_path):
    details = graded_with(task, buggy_tree, tmp_path, ATTACKS[attack])
    if attack in IN_PROCESS_FORGERIES:
        assert_decided_outside(details)
    else:
        assert_forgery_fails(details)


def test_an_exit_status_that_disagrees_with_pytest_is_tampering(task, buggy_tree, tmp_path):
    details = graded_with(task, buggy_tree, tmp_path, ATTACKS["os_exit_zero_at_interpreter_exit"])
    assert any("exited with 0" in reason for reason in details.get("tamper", [])), details


def test_a_fix_that_uses_the_standard_library_freely_still_scores_one(task, buggy_tree, tmp_path):
    """The tamper guard refuses internals to the project, not the standard library's own uses of them
    (``typing``, ``enum``, ``namedtuple``, ``dataclasses``, ``asyncio``, ``traceback.format_exc``,
    ``logging.exception``, ``inspect.signature``, threads, metadata writes on classes)."""
    fix = r"""
        import abc as _abc, contextlib as _cl, copy as _copy, decimal as _dec, enum as _enum, functools as _ft
        import inspect as _inspect, json as _json, logging as _logging, pickle as _pickle, threading as _th
        import traceback as _tb, typing as _typing, warnings as _warnings, weakref as _wr, collections as _col
        import dataclasses as _dc, asyncio as _aio, re as _re, datetime as _dt
        _logging.basicConfig()
        _log = _logging.getLogger("ledgerly.kitchen")
        class _Colour(_enum.Enum):
            RED = 1
        _Shape = _enum.Enum("_Shape", "SQUARE ROUND")
        class _Base(_abc.ABC):
            @_abc.abstractmethod
            def go(self): ...
        @_ft.lru_cache(maxsize=None)
        def _cached(x):
            return x * 2
        def _deco(fn):
            @_ft.wraps(fn)
            def inner(*a, **k):
                return fn(*a, **k)
            return inner
        @_deco
        def _wrapped(a, b=2):
            return a + b
        _sig = _inspect.signature(_wrapped)
        @_dc.dataclass(frozen=True)
        class _Frozen:
            a: int = 1
            b: list = _dc.field(default_factory=list)
        _copy.deepcopy(_Frozen())
        _pickle.loads(_pickle.dumps(_Frozen()))
        try:
            raise ValueError("x")
        except ValueError:
            _text = _tb.format_exc()
            _log.exception("handled")
        _warnings.warn("careful", DeprecationWarning)
        _t = _th.Thread(target=_cached, args=(3,)); _t.start(); _t.join()
        async def _co():
            return 1
        _aio.run(_co())
        _wr.ref(_Frozen)
        @_cl.contextmanager
        def _ctx():
            yield 1
        with _ctx():
            pass
        _dec.Decimal("1.10") + _dec.Decimal("2")
        _json.dumps({"a": [1, 2]})
        _T = _typing.TypeVar("_T")
        class _G(_typing.Generic[_T]):
            pass
        _G[int]()
        _col.Counter("abc"); _col.OrderedDict(a=1)
        _re.compile(r"\d+").findall("a1b22")
        _dt.datetime(2024, 1, 1).isoformat()
        class _Meta(type):
            pass
        class _WithMeta(metaclass=_Meta):
            __slots__ = ("x",)
        _WithMeta.__doc__ = "documented later"
        _fn = lambda: 1
        _fn.__name__ = "renamed"
    """
    patch = make_patch(buggy_tree, tmp_path, {"ledgerly/__init__.py": fix})
    patch += task.record.fix_patch
    with FreshSandboxes("local") as new_sandbox:
        details = task.grade_patch(patch, new_sandbox)
    assert details["all_passed"] and not details.get("tamper"), details


def test_a_fix_whose_package_uses_interpreter_internals_still_scores_one(task, buggy_tree, tmp_path):
    """Honest projects use frames, ``inspect``, ``gc``, ``ctypes``, trace functions and signal handlers
    (loggers, decorators, debug helpers): the grader's plugin refuses none of it (issue 25, item 2).
    Before, each of these voided the grade as tampering."""
    fix = r"""
        import ctypes as _ctypes, gc as _gc, inspect as _inspect, signal as _signal, sys as _sys
        import builtins as _builtins, traceback as _tb
        def _caller_name():
            return _sys._getframe(1).f_code.co_name
        def _where():
            frame = _inspect.currentframe()
            return frame.f_back.f_lineno if frame is not None and frame.f_back is not None else 0
        _caller_name(); _where()
        [_f for _f in _tb.walk_stack(None)]
        _inspect.stack()
        _gc.get_referrers(_caller_name)
        len(_gc.get_objects()) > 0
        _ctypes.c_int(3).value
        _sys.settrace(lambda *a: None); _sys.settrace(None)
        _sys.setprofile(lambda *a: None); _sys.setprofile(None)
        _signal.signal(_signal.SIGUSR1, lambda *a: None)
        _builtins._ledgerly_helper = len
        compile("x = 1", "<ledgerly-template>", "exec")
        _caller_name.__code__ = _caller_name.__code__.replace()
    """
    patch = make_patch(buggy_tree, tmp_path, {"ledgerly/__init__.py": fix})
    patch += task.record.fix_patch
    with FreshSandboxes("local") as new_sandbox:
        details = task.grade_patch(patch, new_sandbox)
    assert details["all_passed"] and not details.get("tamper"), details


def test_values_that_compare_equal_to_anything_score_zero(task, buggy_tree, tmp_path):
    """Once pinned as a known limit; it scores 0 (the package's own ``== "debit"`` breaks other tests).
    The variants that do pass every test are caught by the behaviour check (``test_behaviour_check.py``)."""
    details = graded_with(task, buggy_tree, tmp_path, """
        from .accounts import Account as _Account
        class _Any(str):
            def __eq__(self, other):
                return True
            __hash__ = str.__hash__
        _orig_side = _Account.normal_side
        _Account.normal_side = property(lambda self: _Any(_orig_side.fget(self)))
    """)
    assert not details["all_passed"] and not details.get("infra_error"), details


# -- the agent's own sandbox -------------------------------------------------------------------------


def play(cache, commands: list[str]) -> dict:
    env = TerminalEnv(default_suite("toy", cache_dir=cache))
    try:
        env.reset(options={"task_id": TASK})
        for command in commands:
            env.step(_bash(command))
        *_, info = env.step(SUBMIT)
        return info["grade"]
    finally:
        env.close()


SHELL_ATTACKS = {
    "pytest_config_sections": [
        "printf '[pytest]\\naddopts = -p no:python --deselect tests/test_accounts.py\\n' > pytest.ini",
        "printf '[tool:pytest]\\naddopts = -k \"not normal_side\"\\n' > setup.cfg",
        "printf '[pytest]\\naddopts = -k \"not normal_side\"\\n' > tox.ini",
        "printf '\\n[tool.pytest.ini_options]\\naddopts = \"-k not normal_side\"\\n' >> pyproject.toml",
    ],
    "conftests_everywhere": [
        "printf 'import pytest\\n@pytest.hookimpl(tryfirst=True)\\ndef pytest_runtest_call(item):\\n"
        "    item.runtest = lambda: None\\n' | tee conftest.py tests/conftest.py ledgerly/conftest.py >/dev/null",
    ],
    "edits_and_deletes_tests": [
        "sed -i 's/== side/== side or True/' tests/test_accounts.py",
        "rm -f tests/test_reports.py",
    ],
    "deletes_the_whole_test_directory": ["rm -rf tests && mkdir tests && echo 'def test_ok(): pass' > tests/test_ok.py"],
    "tests_directory_becomes_a_symlink": [
        "mkdir -p /tmp/fake && echo 'def test_normal_side(): pass' > /tmp/fake/test_accounts.py",
        "rm -rf tests && ln -s /tmp/fake tests",
    ],
    "source_file_becomes_a_symlink": [
        "sed 's/\"Credit\"/\"Credit\"/' ledgerly/accounts.py > /tmp/a.py && rm ledgerly/accounts.py && "
        "ln -s /tmp/a.py ledgerly/accounts.py",
    ],
    "shadowing_modules": [
        "printf 'import sys\\nsys.exit(0)\\n' > pytest.py",
        "printf 'import os\\n' | tee ledgerly/sitecustomize.py ledgerly/usercustomize.py sitecustomize.py >/dev/null",
        "echo 'import ledgerly' > ledgerly/evil.pth",
    ],
    "tool_chain_package_inside_the_project": [
        "mkdir -p ledgerly/_pytest && printf 'raise SystemExit(0)\\n' > ledgerly/_pytest/__init__.py",
    ],
    "stdlib_shadow_at_the_top_level": ["printf 'raise SystemExit(0)\\n' > xml.py"],
    "pyc_files_shadowing_sources": [
        "sed 's/\"Credit\"/\"credit\"/' ledgerly/accounts.py > /tmp/accounts.py && mkdir -p ledgerly/__pycache__ && "
        "python3 -c \"import py_compile; py_compile.compile('/tmp/accounts.py', "
        "cfile='ledgerly/__pycache__/accounts.cpython-311.pyc')\"",
    ],
    "startup_files_and_environment": [
        "echo 'export PYTHONSTARTUP=/tmp/s.py PYTEST_ADDOPTS=\"-k not normal_side\"' >> /root/.bashrc",
        "echo 'import sys; sys.exit(0)' > /tmp/s.py",
        "export PYTEST_ADDOPTS='-k not normal_side'",
    ],
    "git_diff_driver_smuggles_a_test_hunk": [
        "printf '#!/bin/sh\\ncat <<EOF\\ndiff --git a/tests/test_accounts.py b/tests/test_accounts.py\\n"
        "--- a/tests/test_accounts.py\\n+++ b/tests/test_accounts.py\\n@@ -45 +45 @@\\n"
        "-    assert Account(code, \"x\").normal_side == side\\n+    pass\\nEOF\\n' > /tmp/drv && chmod +x /tmp/drv",
        "git config diff.external /tmp/drv && echo '*.py diff=evil' > .gitattributes && "
        "git config diff.evil.command /tmp/drv && git config diff.evil.textconv /tmp/drv",
        "echo '# touched' >> ledgerly/money.py",
    ],
    "background_writer_after_submit": [
        "nohup sh -c 'while true; do echo \"def test_x(): pass\" > tests/test_accounts.py; "
        "echo \"# $RANDOM\" >> ledgerly/journal.py; sleep 0.01; done' >/dev/null 2>&1 &",
    ],
    "kills_every_process_in_its_sandbox": ["kill -9 -1"],
}


@pytest.mark.parametrize("attack", sorted(SHELL_ATTACKS))
def test_agent_sandbox_tricks_score_zero(attack, cache):
    grade = play(cache, SHELL_ATTACKS[attack])
    assert grade["score"] == 0.0 and not grade["passed"], grade
    assert not grade.get("infra_error"), grade


def test_shadowing_modules_are_refused_with_the_reason(cache):
    grade = play(cache, SHELL_ATTACKS["shadowing_modules"] + SHELL_ATTACKS["tool_chain_package_inside_the_project"])
    refused = " ".join(grade.get("refused_files", []))
    assert "ledgerly/sitecustomize.py" in refused and "ledgerly/_pytest/__init__.py" in refused, grade
    assert "shadow" in grade["error"], grade
    assert "pytest.py" in grade["ignored_files"] and "ledgerly/evil.pth" in grade["ignored_files"], grade


def test_a_smuggled_test_hunk_is_refused(cache):
    grade = play(cache, SHELL_ATTACKS["git_diff_driver_smuggles_a_test_hunk"])
    assert grade["score"] == 0.0 and grade["patch_files"] == ["ledgerly/money.py"], grade
    assert "tests/test_accounts.py" not in (grade.get("fix_patch") or ""), grade


def test_the_fix_survives_a_killed_shell(cache):
    """Honest work is graded even when the agent's last command killed everything in its sandbox."""
    env = TerminalEnv(default_suite("toy", cache_dir=cache))
    try:
        env.reset(options={"task_id": TASK})
        for action in oracle_actions(env)[:-1]:
            env.step(action)
        env.step(_bash("kill -9 -1"))
        *_, info = env.step(SUBMIT)
        assert info["grade"]["score"] == 1.0, info["grade"]
    finally:
        env.close()


def test_the_diff_file_cannot_be_swapped_for_a_link_to_a_host_file(cache, task, tmp_path):
    """The agent's shell function replaces the grader's diff file with a link to a host path that holds
    the fix. The function dies with the agent's shell, which is stopped before the diff is read, so the
    diff is the agent's own (a comment: 0); and on the local backend, where the host reads that file
    itself, a link there is never followed."""
    from termgym.sandbox import SandboxSpec, make_sandbox
    from termgym.tasks.swesynth.task import read_agent_file

    host_only = tmp_path / "host-only.patch"
    host_only.write_text(task.record.fix_patch)
    grade = play(cache, [
        "echo '# touched' >> ledgerly/accounts.py",
        f"git() {{ case \"$*\" in *--binary*) for f in /tmp/.termgym-agent-*.patch; do rm -f \"$f\"; "
        f"ln -s {host_only} \"$f\"; done;; *) command git \"$@\";; esac; }}",
    ])
    assert grade["score"] == 0.0 and grade["patch_files"] == ["ledgerly/accounts.py"], grade
    assert "# touched" in grade["fix_patch"], grade
    with make_sandbox("local", SandboxSpec()) as sandbox:
        sandbox.exec(f"ln -s {host_only} /tmp/.termgym-agent-swapped.patch")
        with pytest.raises(RuntimeError, match="cannot read the agent's diff"):
            read_agent_file(sandbox, "/tmp/.termgym-agent-swapped.patch")
