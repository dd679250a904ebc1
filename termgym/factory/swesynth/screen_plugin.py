"""The screening plugin: per-test outcomes and, optionally, the source lines each test executes.

This file runs *inside* the generation sandbox, in the project's own test process, so it imports
nothing from termgym (only the standard library and pytest, whatever pytest version the project's
environment provides). It is loaded with ``-p termgym_screen`` from a directory put first on
``PYTHONPATH`` and reads its settings from the JSON file named by ``TERMGYM_SCREEN_CONFIG``:

* ``out`` — where to write the result (JSON);
* ``trace`` — record line coverage per test;
* ``roots`` — absolute directories whose ``*.py`` files are traced (the project's source dirs);
* ``budgets`` (optional) — node id -> seconds a test may take (setup, call and teardown together);
  a test still running past its budget ends the run at once: the result then holds ``overran``
  (that node id) and the process exits with status 124, as a run killed by its timeout would.
  A test without an entry has ``default_budget`` seconds (none when that is absent). A loop in C
  code that never releases the interpreter lock (a regular expression backtracking) starves that
  watchdog; ``faulthandler``'s own thread, which needs no lock, then ends the process a second
  later, after writing the test's node id and the stacks to ``overrun_file``;
* ``calls`` (optional) — record, per test, the places where test code calls into the project
  (``roots``): the test file and line of the call and the caller's local variables written as
  Python literals where their value is one (``None`` where it is not), the last such call per
  line. A report writer rebuilds the call from that line's source with the values filled in: a
  concrete example for a test that reads its cases from a data file;
* ``stop_after_failures`` (optional) — once more tests than this have failed, the session stops
  after the current test (as ``--maxfail`` does: exit status 1) and the result holds
  ``stopped_early``: the candidate breaks too many tests whatever the rest do.

Every result also holds ``durations`` (node id -> {phase: seconds} for ``setup``, ``call`` and
``teardown``), so a clean run tells how long each test takes and what its fixtures cost. The result holds ``outcomes`` (node id -> passed/failed/skipped, decided like the grader: a test
passes when its setup, call and teardown all pass), ``messages`` (node id -> failure text, for bug
reports), with ``calls``: ``calls`` (node id -> [{file, line, callee, locals}]), and with ``trace``: ``lines`` (node id -> {file: [line, ...]}), ``import_lines``
(lines executed outside any test: imports, class bodies, ``def`` lines, defaults, collection) and
``spawners`` (tests that started a process, whose code line tracing cannot follow).

It is a generation tool, not a grader: nothing here is trusted for a grade. Grades come from the
grader's own plugin (:mod:`termgym.tasks.swesynth.grader_plugin`).
"""

import ast
import faulthandler
import json
import os
import sys
import threading
import time

import pytest

_CONFIG = json.load(open(os.environ["TERMGYM_SCREEN_CONFIG"], encoding="utf-8"))
# a root is a package folder (every file below it) or a single-module project's file
_ROOTS = tuple(os.path.join(os.path.realpath(r), "") for r in _CONFIG.get("roots", []) if not r.endswith(".py"))
_ROOT_FILES = frozenset(os.path.realpath(r) for r in _CONFIG.get("roots", []) if r.endswith(".py"))
_WORKDIR = os.path.join(os.path.realpath(os.getcwd()), "")
_phases = {}
_messages = {}
_lines = {}
_import_lines = set()
_state = {"current": _import_lines, "test": None}
_wanted = {}
_spawners = set()
_durations = {}
_BUDGETS = _CONFIG.get("budgets") or {}
_DEFAULT_BUDGET = _CONFIG.get("default_budget")
#: ``(node id, monotonic deadline)`` of the test now running, or ``None``; read by the watchdog.
#: One tuple, replaced whole, so the watchdog never pairs one test's name with another's deadline.
_running = [None]
#: Audit events of a new process (or a fork of this one): the child's lines are not traced.
_SPAWN_EVENTS = frozenset({"subprocess.Popen", "os.system", "os.posix_spawn", "os.spawn", "os.exec", "os.fork",
                           "os.forkpty", "pty.spawn"})


def _is_project_file(filename):
    hit = _wanted.get(filename)
    if hit is None:
        real = os.path.realpath(filename)
        hit = _wanted[filename] = real.endswith(".py") and (real.startswith(_ROOTS) or real in _ROOT_FILES)
    return hit


def _local(frame, event, arg):
    if event == "line":
        _state["current"].add((frame.f_code.co_filename, frame.f_lineno))
    return _local


def _global(frame, event, arg):
    # Called once per function call; only project frames get a line tracer, the rest run untraced.
    if _is_project_file(frame.f_code.co_filename):
        _state["current"].add((frame.f_code.co_filename, frame.f_lineno))
        return _local
    return None


def _audit(event, args):
    if event in _SPAWN_EVENTS and _state["test"] is not None:
        _spawners.add(_state["test"])


if _CONFIG.get("trace"):
    sys.settrace(_global)
    threading.settrace(_global)
    sys.addaudithook(_audit)


#: Calls from test code into the project, per test: node id -> {(file, line): (callee, locals)}.
_calls = {}
#: A caller's file name -> its path in the working tree when it is test code (a file of the tree
#: outside the project's roots and any installed package), else ``""``; resolved once per file.
_test_files = {}
_MAX_SITES = 40  # call sites kept per test
_LITERAL_TYPES = (str, bytes, int, float, complex, bool, type(None), tuple, list, dict, set, frozenset)


def _profile(frame, event, arg):
    # A profile hook sees each Python call once: a project function called from test code (a file
    # of the working tree outside the project's roots) records its caller's line and locals.
    if event != "call" or not _is_project_file(frame.f_code.co_filename):
        return
    caller = frame.f_back
    if caller is None or caller.f_code.co_name == "<module>":
        return
    where = _test_file(caller.f_code.co_filename)
    if not where:
        return
    sites = _calls.setdefault(_state["test"], {})
    key = (where, caller.f_lineno)
    if key in sites or len(sites) < _MAX_SITES:  # the last call of a line: a failing case ends the test
        sites[key] = (frame.f_code.co_name, dict(caller.f_locals))


def _test_file(filename):
    hit = _test_files.get(filename)
    if hit is None:
        real = os.path.realpath(filename)
        test_code = real.startswith(_WORKDIR) and os.sep + "site-packages" + os.sep not in real \
            and not _is_project_file(filename)
        hit = _test_files[filename] = real[len(_WORKDIR):] if test_code else ""
    return hit


def _literal(value):
    """``value`` as a Python literal that reads back equal, or ``None``."""
    if not isinstance(value, _LITERAL_TYPES):
        return None
    try:
        text = repr(value)
        if len(text) > 400 or ast.literal_eval(text) != value:
            return None
    except Exception:  # a repr that raises or does not read back
        return None
    return text


def _watchdog():
    # A bug that makes a test loop would hold the run until the sandbox's timeout kills it: end the
    # run as soon as a test outlives its budget. A daemon thread gets the interpreter lock every
    # switch interval even while the test loops in Python code; a loop that never releases it (in C)
    # is ended by faulthandler's thread (see ``_arm``).
    while True:
        time.sleep(0.05)
        current = _running[0]
        if current is not None and time.monotonic() > current[1] and _running[0] is current:
            try:
                with open(_CONFIG["out"], "w", encoding="utf-8") as fh:
                    json.dump({"overran": current[0], "budget": _budget(current[0]), "outcomes": {}}, fh)
            finally:
                os._exit(124)


def _budget(nodeid):
    return _BUDGETS.get(nodeid, _DEFAULT_BUDGET)


_OVERRUN = None
if _BUDGETS or _DEFAULT_BUDGET is not None:
    threading.Thread(target=_watchdog, name="termgym-screen-watchdog", daemon=True).start()
    if _CONFIG.get("overrun_file"):
        _OVERRUN = open(_CONFIG["overrun_file"], "w", encoding="utf-8")


def _arm(nodeid, budget):
    """Set the test's deadline for the watchdog and, a second later, for faulthandler's thread."""
    _running[0] = None if budget is None else (nodeid, time.monotonic() + budget)
    if _OVERRUN is not None and budget is not None:
        _OVERRUN.seek(0)
        _OVERRUN.truncate()
        _OVERRUN.write(nodeid + "\n")
        _OVERRUN.flush()
        faulthandler.dump_traceback_later(budget + 1.0, exit=True, file=_OVERRUN)


def _disarm():
    _running[0] = None
    if _OVERRUN is not None:
        faulthandler.cancel_dump_traceback_later()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _arm(item.nodeid, _budget(item.nodeid))
    if _CONFIG.get("calls"):
        _state["test"] = item.nodeid
        sys.setprofile(_profile)
        try:
            yield
        finally:
            sys.setprofile(None)
            _disarm()
            _state["test"] = None
        return
    if not _CONFIG.get("trace"):
        try:
            yield
        finally:
            _disarm()
        return
    seen = set()
    _state["current"] = seen
    _state["test"] = item.nodeid
    if sys.gettrace() is None:  # something (a debugger helper, doctest) cleared it: trace again
        sys.settrace(_global)
    try:
        yield
    finally:
        _disarm()
        _state["current"] = _import_lines
        _state["test"] = None
        _lines[item.nodeid] = seen


_STOP_AFTER = _CONFIG.get("stop_after_failures")
_failed = set()
_session = []


def pytest_configure(config):
    # The report writer reads pytest's own tracebacks (the failing line marked ``>``, the values
    # of the test's arguments): a project whose ``addopts`` ask for another style (mako's
    # ``--tb native``, cbor2's and typeguard's ``--tb=short``) left failure texts from which no
    # example could be read, so every candidate of theirs failed its report. Messages are a
    # generation fact, not a grade: the grader's runs keep the project's own style.
    if getattr(config.option, "tbstyle", "auto") not in ("auto", "long"):
        config.option.tbstyle = "auto"


def pytest_sessionstart(session):
    _session.append(session)


def pytest_runtest_logreport(report):
    entry = _phases.setdefault(report.nodeid, {})
    entry[report.when] = report.outcome
    if report.failed and _STOP_AFTER is not None and report.nodeid not in _failed:
        _failed.add(report.nodeid)
        if len(_failed) > _STOP_AFTER and _session:
            _session[0].shouldfail = f"more than {_STOP_AFTER} tests failed"
    _durations.setdefault(report.nodeid, {})[report.when] = round(float(getattr(report, "duration", 0.0) or 0.0), 4)
    if report.failed and report.nodeid not in _messages:
        # The same text pytest's junit report gives a failure: the crash line, then the traceback.
        try:
            crash = getattr(report.longrepr, "reprcrash", None)
            message = crash.message if crash is not None else str(report.longrepr)
            text = str(report.longreprtext)
            _messages[report.nodeid] = (message + "\n" + text[-8000:]).strip()
        except Exception:  # a longrepr that cannot render still leaves the outcome
            _messages[report.nodeid] = ""


def _relative(filename):
    real = os.path.realpath(filename)
    return real[len(_WORKDIR):] if real.startswith(_WORKDIR) else real


def _grouped(pairs):
    out = {}
    for filename, line in pairs:
        out.setdefault(_relative(filename), []).append(line)
    return {f: sorted(set(v)) for f, v in out.items()}


def pytest_sessionfinish(session, exitstatus):
    sys.settrace(None)
    threading.settrace(None)
    outcomes = {}
    for nodeid, entry in _phases.items():
        if "skipped" in (entry.get("setup"), entry.get("call")):
            outcomes[nodeid] = "skipped"
        elif all(entry.get(w) == "passed" for w in ("setup", "call", "teardown")):
            outcomes[nodeid] = "passed"
        else:
            outcomes[nodeid] = "failed"
    result = {"outcomes": outcomes, "messages": _messages, "exitstatus": int(exitstatus),
              "stopped_early": bool(_STOP_AFTER is not None and len(_failed) > _STOP_AFTER),
              "durations": _durations,
              "python": sys.version.split()[0], "pytest": pytest.__version__}
    if _CONFIG.get("calls"):
        result["calls"] = {nodeid: [{"file": f, "line": line, "callee": callee,
                                     "locals": {k: _literal(v) for k, v in local.items()}}
                                    for (f, line), (callee, local) in sites.items()]
                           for nodeid, sites in _calls.items()}
    if _CONFIG.get("trace"):
        result["lines"] = {nodeid: _grouped(seen) for nodeid, seen in _lines.items()}
        result["import_lines"] = _grouped(_import_lines)
        result["spawners"] = sorted(_spawners)
    with open(_CONFIG["out"], "w", encoding="utf-8") as fh:
        json.dump(result, fh)
