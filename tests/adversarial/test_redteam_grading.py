"""Red-team attacks on SWE-SYNTH grading that ``test_swesynth_grading.py`` does not cover.

Each attack leaves the bug of the bundled task ``ledgerly-03e7642999`` in place and goes after the
grade from inside the test process (code appended to ``ledgerly/__init__.py``, imported by every
test) or through the shape of the agent's diff. Each must score 0, never an infrastructure error and
never a hang. The threat model: ``docs/security.md``.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

import pytest

from termgym.env import TerminalEnv
from termgym.sandbox import FreshSandboxes
from termgym.tasks.swesynth import default_suite
from termgym.tasks.swesynth.task import prepare_workspace
from tests.adversarial.test_swesynth_grading import assert_decided_outside

TASK = "ledgerly-03e7642999"  # the task conftest.py loads: Account.normal_side says "Credit", not "credit"


def diff_of(buggy_tree: Path, tmp_path: Path, edit) -> str:
    """The agent's diff after ``edit(work_tree)`` changed a copy of the buggy repository."""
    work = tmp_path / "work"
    shutil.copytree(buggy_tree, work, symlinks=True)
    edit(work)
    subprocess.run(["git", "add", "-A", "-N", "."], cwd=work, check=True)
    return subprocess.run(["git", "diff", "--no-ext-diff", "--binary", "HEAD"], cwd=work, check=True,
                          capture_output=True, text=True).stdout


def grade(task, patch: str) -> dict:
    """Grade ``patch`` in fresh bubblewrap sandboxes, as the env's grader does after its checks."""
    with FreshSandboxes("local") as new_sandbox:
        return task.grade_patch(patch, new_sandbox)


def appended(code: str, path: str = "ledgerly/__init__.py"):
    def edit(work: Path) -> None:
        target = work / path
        target.write_text(target.read_text() + textwrap.dedent(code))
    return edit


def assert_scores_zero(details: dict) -> None:
    assert not details["all_passed"], details
    assert details["target_result"] == "0/3", details
    assert not details.get("infra_error"), details


# -- code under test going after the grader through the standard library -----------------------

STDLIB_ATTACKS = {
    # The plugin serialises each event with json.dumps and MACs the result: rewrite the body before
    # it is signed and every phase reads "passed", with a valid chain.
    "json_dumps_rewrites_events_before_signing": """
        import json as _json
        _dumps = _json.dumps
        def _forged(obj, *args, **kwargs):
            text = _dumps(obj, *args, **kwargs)
            return text.replace('"outcome":"failed"', '"outcome":"passed"')
        _json.dumps = _forged
    """,
    # hmac.new sees the key on every event: capture it, then forge a continued chain at exit.
    "hmac_new_captures_the_key": """
        import hmac as _hmac, atexit as _atexit
        _new = _hmac.new
        _seen = {}
        def _spy(key, msg=None, digestmod=""):
            _seen["key"] = key
            return _new(key, msg, digestmod)
        _hmac.new = _spy
    """,
    # The plugin's module is in sys.modules under its random name; its tables of sensitive events are
    # mutable sets its audit hook reads at every event. Empty them, then a trace function clears the
    # exception CallInfo.from_call caught before pytest builds the report.
    "empties_the_plugins_event_tables_then_traces_from_call": """
        import linecache as _linecache, sys as _sys
        for _m in list(_sys.modules.values()):
            if getattr(_m, "_EVENT", None) == "termgym.grader":
                _m._SENSITIVE.clear()
                _m._ALWAYS_DENIED.clear()
        def _tracer(frame, event, arg):
            if frame.f_code.co_name == "from_call" and event == "line":
                line = _linecache.getline(frame.f_code.co_filename, frame.f_lineno)
                if line.strip().startswith("precise_stop"):  # after the reraise check
                    frame.f_locals["excinfo"] = None
            return _tracer
        _sys.settrace(_tracer)
    """,
    # The plugin's hook wrappers call ``sys.audit`` through the module: rebind it (in the plugin's
    # module and in ``sys``) to a function that clears the failure on the CallInfo first.
    "rebinds_sys_audit_to_clear_failures": """
        import sys as _sys, types as _types
        _real = _sys.audit
        def _audit(event, *args):
            if len(args) == 3 and args[0] == "phase" and hasattr(args[2], "excinfo"):
                args[2].excinfo = None
            return _real(event, *args)
        for _m in list(_sys.modules.values()):
            if getattr(_m, "_EVENT", None) == "termgym.grader":
                _m.sys = _types.SimpleNamespace(audit=_audit, modules=_sys.modules)
                _m._audit = _audit
        _sys.audit = _audit
    """,
}


#: In-process forgeries the slimmed grader plugin no longer stops: pytest may report a pass, and the
#: behaviour check against the clean code (decided on the host) must give them 0. The daemon thread
#: races pytest's runner (it forges pytest's verdicts only when the thread wins).
DECIDED_OUTSIDE = {"empties_the_plugins_event_tables_then_traces_from_call", "daemon_thread_patches_the_runner_later"}


def assert_attack_fails(name: str, details: dict) -> None:
    """The attack ``name`` scores 0: outright, or through the behaviour check when it fools pytest."""
    if name in DECIDED_OUTSIDE:
        assert_decided_outside(details)
    else:
        assert_scores_zero(details)


@pytest.mark.parametrize("name", list(STDLIB_ATTACKS))
def test_stdlib_patching_cannot_forge_events(task, buggy_tree, tmp_path, name):
    assert_attack_fails(name, grade(task, diff_of(buggy_tree, tmp_path, appended(STDLIB_ATTACKS[name]))))


# -- code under test going after the test process itself ------------------------------------------

PROCESS_ATTACKS = {
    # Fake pytest summaries on the real stdout/stderr descriptors at exit: no printed line is read.
    "atexit_prints_fake_summaries_on_fds_1_and_2": """
        import atexit as _atexit, os as _os
        def _lie():
            for fd in (1, 2):
                _os.write(fd, b"\\n===== 233 passed in 0.10s =====\\nPASSED tests/test_accounts.py\\n")
        _atexit.register(_lie)
    """,
    # A trace function for every new thread, installed through threading rather than sys.settrace.
    "threading_settrace": """
        import threading as _threading
        def _tracer(frame, event, arg):
            frame.f_locals.get("self")
            return _tracer
        _threading.settrace(_tracer)
        _threading.Thread(target=lambda: None).start()
    """,
    # A daemon thread that patches the runner once the tests are under way.
    "daemon_thread_patches_the_runner_later": """
        import threading as _threading, time as _time
        def _later():
            _time.sleep(0.2)
            import _pytest.python as _python
            _python.Function.runtest = lambda self: None
        _threading.Thread(target=_later, daemon=True).start()
    """,
    # The descriptor writes of the whole process filtered: failing events never reach the file.
    "os_write_drops_failing_events": """
        import os as _os
        _write = _os.write
        def _filtered(fd, data):
            if b'"failed"' in bytes(data):
                return len(data)
            return _write(fd, data)
        _os.write = _filtered
    """,
    # Kill the runner with resource limits or an alarm, or move it to another directory.
    "setrlimit_cpu_kills_the_runner": """
        import resource as _resource
        _resource.setrlimit(_resource.RLIMIT_CPU, (0, 0))
    """,
    "setrlimit_fsize_stops_the_event_file": """
        import resource as _resource
        _resource.setrlimit(_resource.RLIMIT_FSIZE, (0, 0))
    """,
    "signal_alarm_ends_the_session": """
        import signal as _signal
        _signal.alarm(1)
    """,
    "changes_the_working_directory": """
        import os as _os
        _os.chdir("/")
    """,
    "faulthandler_dumps_tracebacks_to_stdout": """
        import faulthandler as _faulthandler, sys as _sys
        _faulthandler.dump_traceback_later(0.05, repeat=True, file=_sys.__stdout__)
    """,
    # Children that outlive pytest and hold its output open: the grade must not wait for them.
    "orphans_hold_the_output_open": """
        import subprocess as _subprocess
        for _ in range(3):
            _subprocess.Popen(["sleep", "900"], start_new_session=True)
    """,
    "sys_stdout_replaced": """
        import io as _io, sys as _sys
        _sys.stdout = _sys.stderr = _io.StringIO()
    """,
}


@pytest.mark.parametrize("name", list(PROCESS_ATTACKS))
def test_process_level_attacks_score_zero(task, buggy_tree, tmp_path, name):
    details = grade(task, diff_of(buggy_tree, tmp_path, appended(PROCESS_ATTACKS[name])))
    assert_attack_fails(name, details)
    assert not details["tests_timed_out"], details  # ended by pytest, not by the grader's clock


# -- the shape of the diff --------------------------------------------------------------------------


def test_a_patch_that_deletes_the_package_is_the_agents_zero(task, buggy_tree, tmp_path):
    details = grade(task, diff_of(buggy_tree, tmp_path, lambda work: shutil.rmtree(work / "ledgerly")))
    assert details["all_result"] == "0/233" and not details.get("infra_error"), details


# -- agent-sandbox tricks played through the env -----------------------------------------------------

SUBMIT = "THOUGHT: done\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"
#: A pytest plugin that turns every report into a pass; each trick below tries to get it loaded.
FORGING_PLUGIN = (
    "printf 'import pytest\\n@pytest.hookimpl(hookwrapper=True)\\ndef pytest_runtest_makereport(item, call):\\n"
    "    out = yield\\n    out.get_result().outcome = \\\"passed\\\"\\n' > {path}"
)

SHELL_TRICKS = {
    # importlib.metadata entry points: a pytest11 plugin registered by a .dist-info inside the package
    # and at the root (pytest autoloads them from sys.path), and an .egg-link / .egg-info beside them.
    "dist_info_registers_a_pytest11_plugin": [
        FORGING_PLUGIN.format(path="ledgerly/evil_plugin.py"),
        "for d in ledgerly/evil-1.0.dist-info evil-1.0.dist-info ledgerly.egg-info; do mkdir -p $d && "
        "printf 'Metadata-Version: 2.1\\nName: evil\\nVersion: 1.0\\n' > $d/METADATA && "
        "printf '[pytest11]\\nevil = ledgerly.evil_plugin\\n' > $d/entry_points.txt; done",
        "cp ledgerly.egg-info/METADATA ledgerly.egg-info/PKG-INFO; echo /app > evil.egg-link",
    ],
    # Names pytest or git might treat specially: a newline that splits one path into two in a listing,
    # a conftest spelt in capitals and in full-width letters, a stub file, __pycache__ as a package.
    "odd_file_names": [
        FORGING_PLUGIN.format(path="\"$(printf 'ledgerly/x.py\\ntests/conftest.py')\""),
        FORGING_PLUGIN.format(path="ledgerly/CONFTEST.py"),
        FORGING_PLUGIN.format(path="ledgerly/\uff43onftest.py"),
        FORGING_PLUGIN.format(path="ledgerly/__init__.pyi"),
        "mkdir -p ledgerly/__pycache__ && touch ledgerly/__pycache__/__init__.py",
        FORGING_PLUGIN.format(path="ledgerly/__pycache__/conftest.py"),
    ],
    # CRLF line endings on the package's own modules.
    "crlf_line_endings": ["sed -i 's/$/\\r/' ledgerly/*.py"],
    # The grader is made to handle a lot: 3000 new modules and one 8 MB module.
    "many_and_huge_files": [
        "mkdir -p ledgerly/gen && for i in $(seq 3000); do echo \"X = $i\" > ledgerly/gen/m$i.py; done",
        "python3 -c \"open('ledgerly/huge.py','w').write('# ' + 'x' * 8_000_000 + chr(10))\"",
    ],
}


@pytest.mark.parametrize("attack", sorted(SHELL_TRICKS))
def test_agent_sandbox_tricks_score_zero(attack, cache):
    env = TerminalEnv(default_suite("toy", cache_dir=cache))
    try:
        env.reset(options={"task_id": TASK})
        for command in SHELL_TRICKS[attack]:
            env.step(f"THOUGHT: next step\n```bash\n{command}\n```")
        *_, info = env.step(SUBMIT)
        grade = info["grade"]
    finally:
        env.close()
    assert grade["score"] == 0.0 and not grade["passed"], grade
    assert not grade.get("infra_error"), grade


#: The trace function of the table-emptying attack, installed from code the audit hook itself runs
#: (where it used not to judge its own thread's events).
_TRACER = """
    import sys as _sys
    def _tracer(frame, event, arg):
        # ``f_code`` is audited, ``f_locals`` is not: CallInfo.from_call is known by its locals,
        # and the moment after its except block by ``result`` set while ``precise_stop`` is not.
        if event == "line":
            local = frame.f_locals
            if {"func", "when", "reraise", "excinfo", "result"} <= local.keys() \
                    and "precise_stop" not in local and local["excinfo"] is not None:
                local["excinfo"] = None
        return _tracer
    def _install_tracer():
        # Only from inside the grader's hook (told apart by the file two frames up): asked
        # anywhere else, settrace is denied and the denial alone voids the grade.
        import warnings as _warnings
        with _warnings.catch_warnings(record=True) as caught:
            _warnings.simplefilter("always")
            _warnings.warn("where am I", stacklevel=3)  # C code reads the caller's frame: no audit
        caller = caught[0].filename if caught else ""
        if _sys.gettrace() is None and not caller.startswith(("/app/", "/usr/")):
            _sys.settrace(_tracer)
"""
HOOK_REENTRY_ATTACKS = {
    # The hook reads ``__module__`` of a class whose attribute is written: a metaclass property.
    "metaclass_property_read_by_the_hook": ("ledgerly/__init__.py", _TRACER + """
    class _Meta(type):
        @property
        def __module__(cls):
            _install_tracer()
            return "harmless"
    class _Probe(metaclass=_Meta):
        pass
    _Probe.__name__ = "Probe"
"""),
    # The hook snapshots the test module's globals with ``isinstance``, which consults the
    # ``__class__`` of an object that is not a function: the imported ``validate_code`` becomes one.
    "class_property_of_a_name_the_tests_import": ("ledgerly/accounts.py", _TRACER + """
    class _Callable:
        def __init__(self, function):
            self._function = function
        def __call__(self, *args, **kwargs):
            return self._function(*args, **kwargs)
        @property
        def __class__(self):
            _install_tracer()
            return _Callable
    validate_code = _Callable(validate_code)
"""),
}


@pytest.mark.parametrize("attack", sorted(HOOK_REENTRY_ATTACKS))
def test_code_run_by_the_audit_hook_is_judged_too(task, buggy_tree, tmp_path, attack):
    path, code = HOOK_REENTRY_ATTACKS[attack]
    assert_scores_zero(grade(task, diff_of(buggy_tree, tmp_path, appended(code, path))))


# -- a test name rebound to another test's function during collection -------------------------------

ALIAS_TASK = "ledgerly-0501e45db5"  # the failing test: test_journal.py::test_trial_balance_rows(ledger)
#: A ``sys.meta_path`` finder (no audited primitive) hands ``test_journal`` a module object of its
#: own class; pytest's loader runs the module in it (no project frame on the stack while it compiles),
#: then pytest looks up ``pytest_plugins``, which is missing: the class's ``__getattr__`` runs after the
#: module body and before collection, and points ``test_trial_balance_rows`` at
#: ``test_balance_on_normal_side`` (same fixture, passes on the buggy code). A first version that
#: wrapped ``exec_module`` was caught: pytest's compile of the test module ran under project code.
ALIAS_ATTACK = """
    import sys as _sys, types as _types

    class _TestModule(_types.ModuleType):
        def __getattr__(self, name):
            names = self.__dict__
            if "test_balance_on_normal_side" in names:
                passing = names["test_balance_on_normal_side"]
                if WITH_WRAPPED:  # claim to wrap the real test, as functools.wraps would
                    passing.__wrapped__ = names["test_trial_balance_rows"]
                names["test_trial_balance_rows"] = passing
            raise AttributeError(name)

    class _Loader:
        def __init__(self, real):
            self.exec_module = real.exec_module
        def create_module(self, spec):
            return _TestModule(spec.name)

    class _Finder:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if not name.endswith("test_journal"):
                return None
            for finder in _sys.meta_path:
                if finder is _Finder:
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    spec.loader = _Loader(spec.loader)
                    return spec
            return None

    _sys.meta_path.insert(0, _Finder)
"""


@pytest.mark.parametrize("with_wrapped", [pytest.param(False, id="plain"),
                                          pytest.param(True, id="claims_to_wrap_the_real_test")])
def test_a_test_name_rebound_to_another_tests_function(cache, with_wrapped):
    task = default_suite("toy", cache_dir=cache).load(ALIAS_TASK)
    tree = prepare_workspace(task.record, cache)
    code = ALIAS_ATTACK.replace("WITH_WRAPPED", str(with_wrapped))
    with tempfile.TemporaryDirectory() as tmp:
        details = grade(task, diff_of(tree, Path(tmp), appended(code)))
    assert not details["all_passed"], details
    assert not details.get("infra_error"), details
    if details["target_result"] != "0/1":  # pytest was fooled: the behaviour check must have decided
        assert details.get("behaviour_failure") or details.get("tamper"), details
