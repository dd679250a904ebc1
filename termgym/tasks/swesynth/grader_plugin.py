"""The grader's pytest plugin: test outcomes recorded where the code under test cannot forge them.

This file runs *inside* the grading sandbox, in the same interpreter as the code being graded, so it
imports nothing from termgym. The grader copies it into a directory the sandbox cannot write, under
a random module name, and loads it with ``-p <name>`` before pytest reads any conftest or test
module (so before any code of the project under test runs). At import it:

1. makes the process non-dumpable (no other process may read its memory), reads its
   configuration from a one-time key file (HMAC key, events file, workdir, source
   directories) and deletes the file: by the time project code runs, the key exists only in the
   closure of the audit hook below, which nothing else references;
2. installs a :func:`sys.addaudithook` hook (hooks cannot be removed). The hook

   * **denies** the primitives that reach the interpreter's internals (frames, ``gc`` object
     walks, ``ctypes``, trace/profile functions, code-object construction and replacement,
     ``marshal``, new audit hooks, ``/proc/*/mem``) whenever the code asking for them is the
     project's (see :func:`_owner_is_untrusted`); each denial is also written to the event stream,
     which voids the grade;
   * **records** each test phase (setup, call, teardown) when this module's own hook wrapper signals
     it, after checking that the signal comes from pytest's genuine ``call_and_report`` for a test
     item pytest collected, and that nothing the outcome depends on was replaced: pytest's and
     pluggy's functions and classes, ``builtins``, the test item and its function (defined by the
     tests under the test's own name), the test module's globals and the signal handlers;

3. writes every record as one line of an HMAC chain to the events file, which the grader (outside
   the sandbox) verifies: a forged, reordered, missing or duplicated line, a denial, or a missing
   final line makes the grade 0.
"""

import builtins
import hashlib
import json
import os
import signal
import sys
import sysconfig
import threading
import types

import _pytest.main
import _pytest.runner
import pluggy
import pytest

_EVENT = "termgym.grader"
_audit = sys.audit
#: Audit events that hand out the interpreter's internals.
_SENSITIVE = frozenset({
    "sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile", "sys.addaudithook",
    "sys._getframemodulename", "gc.get_objects", "gc.get_referrers", "gc.get_referents", "code.__new__",
    "marshal.loads", "marshal.load", "object.__getattr__", "object.__setattr__", "object.__delattr__",
    "sys.monitoring.register_callback", "sys.monitoring.use_tool_id",
})
#: Events nothing in a pytest session needs: denied whoever asks (a callback composed of C callables,
#: ``functools.partial(store.extend, itertools.starmap(gc.get_objects, [()]))``, leaves no project
#: frame on the stack to judge by).
_ALWAYS_DENIED = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames",
                  "sys.addaudithook", "sys.monitoring.register_callback", "sys.monitoring.use_tool_id"})
#: ``sys.settrace``/``setprofile`` are judged by who asks: ``doctest`` clears the trace function
#: around every example it runs for a test.
_SENSITIVE_PREFIXES = ("ctypes.",)
#: Events the standard library raises for its own use (``typing`` reads its caller's module name,
#: ``inspect.signature`` reads ``__code__``, ``types.coroutine`` rebuilds a code object): allowed when a stdlib function that does not hand the
#: result back is the immediate caller. Every other sensitive event is judged by who is asking.
_PRIVATE_USE = frozenset({"sys._getframe", "object.__getattr__", "object.__setattr__", "object.__delattr__",
                          "code.__new__"})
#: Standard-library functions that hand a frame or code object back to their caller.
_EXPOSING = frozenset({
    ("inspect", "currentframe"), ("inspect", "stack"), ("inspect", "trace"), ("inspect", "getouterframes"),
    ("inspect", "getinnerframes"), ("inspect", "getmembers"), ("inspect", "_getmembers"),
    ("inspect", "getmembers_static"), ("traceback", "walk_stack"), ("traceback", "walk_tb"),
    ("logging/__init__", "<lambda>"), ("dis", "_get_code_object"), ("dis", "get_instructions"),
    ("dis", "__init__"),
})
#: Modules whose functions and classes decide an outcome: a replaced one voids the grade.
_TOOLCHAIN = ("pytest", "_pytest", "pluggy", "py", "iniconfig")
#: Module attributes pytest itself reassigns while it runs (assertion-rewrite state).
_MUTABLE = frozenset({("_pytest.assertion.util", "_reprcompare"), ("_pytest.assertion.util", "_assertion_pass"),
            ("_pytest.assertion.util", "_config")})


def _norm(path, _sep=os.sep):
    return path.replace(_sep, "/")


def _not_dumpable():
    """Make this process non-dumpable: another process of the same user (one the code under test
    spawns) can then not read ``/proc/<pid>/mem`` for the key, nor attach to it."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE, 0
        raise RuntimeError(f"termgym grader plugin: prctl(PR_SET_DUMPABLE) failed (errno {ctypes.get_errno()})")


def _make_encoder():
    """JSON for the plugin's own payloads (None, bools, ints, strings, lists, dicts) from C functions
    and builtins captured at import: nothing the code under test can replace later reaches it."""
    from _json import encode_basestring_ascii as quote

    kind_of, is_a, text, integer, sequence, mapping = type, isinstance, str, int, (list, tuple), dict
    join = ",".join

    def encode(value):
        if value is None:
            return "null"
        if value is True or value is False:
            return "true" if value else "false"
        if is_a(value, integer):
            return integer.__repr__(integer(value))
        if is_a(value, text):
            return quote(value)
        if is_a(value, sequence):
            return "[" + join([encode(v) for v in value]) + "]"
        if is_a(value, mapping):
            return "{" + join([quote(text(k)) + ":" + encode(v) for k, v in mapping.items(value)]) + "}"
        raise TypeError(f"termgym grader plugin: cannot record a {kind_of(value).__name__}")

    return encode



def _install():
    # Everything the hook consults later is bound here, before project code runs: the code under test
    # can rebind attributes of ``os``, ``sys``, ``signal``, ``types`` and ``pytest`` (this function and
    # its helpers run over a private copy of the module's globals and builtins, see :func:`_sealed`).
    modules, getsignal, normpath, skipped = sys.modules, signal.getsignal, os.path.normpath, pytest.skip.Exception
    definitions = (types.FunctionType, type, types.BuiltinFunctionType, types.ModuleType)
    _not_dumpable()
    keyfile = os.environ.pop("TERMGYM_GRADER_KEYFILE", "")
    if not keyfile:
        raise RuntimeError("termgym grader plugin: TERMGYM_GRADER_KEYFILE is not set")
    with open(keyfile, encoding="utf-8") as fh:
        config = json.load(fh)
    os.unlink(keyfile)
    key = bytes.fromhex(config["key"])
    fd = os.open(config["events"], os.O_WRONLY | os.O_APPEND)
    workdir = config["workdir"].rstrip("/") + "/"
    source_dirs = [workdir + d.strip("/") + "/" for d in config["source_dirs"] if d.strip("/")]
    protected = tuple(p.rstrip("/") for p in config["protected"])
    # read-only installed test dependencies (a project's provisioned test environment): like site-packages
    trusted_dirs = tuple(_norm(p).rstrip("/") + "/" for p in config.get("trusted_dirs") or ())
    stdlib = _norm(sysconfig.get_paths()["stdlib"]).rstrip("/") + "/"
    toolchain_dirs = tuple(_norm(os.path.dirname(os.path.dirname(m.__file__))) + "/" + n + "/"
                           for m, n in ((pytest, "pytest"), (_pytest.main, "_pytest"), (pluggy, "pluggy")))
    plugin_path = __file__
    plugin_file = _norm(plugin_path)
    module_of = type.__dict__["__module__"].__get__  # a class's own __module__, no metaclass code
    state = {"seq": 0, "mac": b"", "items": {}, "busy": {}, "denied": 0}
    main_bottom = sys._getframe()
    while main_bottom.f_back is not None:
        main_bottom = main_bottom.f_back
    main_bottom = main_bottom.f_code  # the interpreter's entry (runpy or pytest's script)
    write = os.write
    get_ident = threading.get_ident
    getframe = sys._getframe

    # The event line is serialised and signed only with C functions bound here, before project code
    # runs: ``json.dumps``, ``hmac.new`` and their helpers are module attributes the code under test
    # could swap, to rewrite an event before it is signed or to see the key (it forged a full pass).
    encode = _make_encoder()  # in this closure, not a module global the project could reach
    sha256 = hashlib.sha256
    padded = (sha256(key).digest() if len(key) > 64 else key).ljust(64, b"\0")
    inner_pad = bytes([b ^ 0x36 for b in padded])
    outer_pad = bytes([b ^ 0x5C for b in padded])

    def emit(kind, payload):
        state["seq"] += 1
        body = encode([state["seq"], kind, payload])
        mac = sha256(outer_pad + sha256(inner_pad + state["mac"] + body.encode()).digest()).hexdigest()
        state["mac"] = mac.encode()
        write(fd, (body + "\t" + mac + "\n").encode())

    def classify(filename):
        """'project', 'stdlib', 'toolchain', 'trusted' (tests, conftest, the plugin) or 'library' (a
        read-only test dependency: judged by who calls it, like the tool chain)."""
        filename = _norm(filename)
        if filename.startswith("<frozen "):
            return "stdlib"
        if not filename.startswith("/"):
            return "project"  # synthetic ('<string>') or relative: made at run time
        if filename.startswith(toolchain_dirs):
            return "toolchain"
        if filename.startswith(stdlib):
            return "stdlib"
        if filename == plugin_file:
            return "trusted"
        if filename.startswith(workdir):
            if any(filename.startswith(d) for d in source_dirs) or not source_dirs:
                base = filename.rsplit("/", 1)[-1]
                tests = ("/tests/", "/test/", "/testing/")
                if not (base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py"
                        or any(t in filename[len(workdir) - 1:] for t in tests)):
                    return "project"
            return "trusted"
        if filename.startswith("/usr/"):
            return "stdlib" if "/python3" in filename and "-packages/" not in filename else "trusted"
        if trusted_dirs and filename.startswith(trusted_dirs):
            return "library"
        return "project"  # /tmp and the like: written at run time

    def _module_key(frame):
        filename = _norm(frame.f_code.co_filename)
        if filename.startswith(stdlib):
            filename = filename[len(stdlib):]
        return (filename[:-3] if filename.endswith(".py") else filename), frame.f_code.co_name

    def owner_is_untrusted(frame, private_use_ok=False):
        """Whether the code asking for an internal is the project's (see the module docstring).

        ``frame`` is the immediate caller. Project code is refused, tests and the plugin are not.
        For the events the standard library raises for its own use (``private_use_ok``), a stdlib
        caller is followed through the functions that hand frames back (``inspect.currentframe``,
        ``traceback.walk_tb``...) to whoever consumes the result: the standard library itself
        (``traceback.format_exc`` turning frames into text) is fine, the project is not. Anything
        else, and pytest's own helpers, are judged by the first frame outward that is neither
        stdlib nor tool chain.
        """
        kind = classify(frame.f_code.co_filename)
        if kind == "project":
            return True
        if kind == "trusted":
            return False
        if kind == "stdlib" and private_use_ok:
            while frame is not None and classify(frame.f_code.co_filename) == "stdlib" \
                    and _module_key(frame) in _EXPOSING:
                frame = frame.f_back
            if frame is None:
                return False
            kind = classify(frame.f_code.co_filename)
            if kind != "toolchain":
                return kind == "project"
        outer, bottom = frame.f_back, frame
        while outer is not None:
            kind = classify(outer.f_code.co_filename)
            if kind == "project":
                return True
            if kind == "trusted":
                return False
            outer, bottom = outer.f_back, outer
        # Only the standard library and pytest on the stack: fine on pytest's own main stack; a
        # thread or an exit handler started from C callables is the project's doing.
        return bottom.f_code is not main_bottom

    def snapshot_modules():
        """(namespace, name, object) for every function and class of the tool chain's modules."""
        snap = []
        for name, mod in list(modules.items()):
            if mod is None or not (name in _TOOLCHAIN or name.split(".")[0] in _TOOLCHAIN):
                continue
            snap.append((modules, name, mod))
            namespace = vars(mod)
            for attr, value in list(namespace.items()):
                if (name, attr) in _MUTABLE:
                    continue
                if isinstance(value, definitions):
                    snap.append((namespace, attr, value))
                if isinstance(value, type) and getattr(value, "__module__", None) == name:
                    cls_namespace = value.__dict__  # a live view
                    for cattr, cvalue in list(cls_namespace.items()):
                        if callable(cvalue) or isinstance(cvalue, (classmethod, staticmethod, property)):
                            snap.append((cls_namespace, cattr, cvalue))
        return snap

    baseline = {"modules": [], "builtins": [], "signals": {}}

    def describe(namespace, attr):
        for name, mod in list(modules.items()):
            if mod is not None and vars(mod) is namespace:
                return f"{name}.{attr}"
            if mod is not None and name.split(".")[0] in _TOOLCHAIN:
                for cname, cls in list(vars(mod).items()):
                    if isinstance(cls, type) and cls.__dict__ == namespace:
                        return f"{name}.{cname}.{attr}"
        return attr

    def take_baseline():
        baseline["modules"] = snapshot_modules()
        baseline["builtins"] = list(vars(builtins).items())
        baseline["signals"] = {s: getsignal(s) for s in signal.valid_signals()
                               if s not in (signal.SIGKILL, signal.SIGSTOP)}

    def replaced(accept=None):
        """The first baseline entry replaced since it was taken (described), or ``None``.

        ``accept(attr, now)`` may excuse a replaced module attribute."""
        for namespace, attr, value in baseline["modules"]:
            now = namespace.get(attr)
            if now is not value and not (accept is not None and accept(attr, now)):
                return describe(namespace, attr)
        names = vars(builtins)
        for attr, value in baseline["builtins"]:
            if names.get(attr) is not value:
                return f"builtins.{attr}"
        for sig, value in baseline["signals"].items():
            if getsignal(sig) is not value:
                return f"the handler of signal {sig}"
        return None

    def toolchain_patch(attr, now):
        code = getattr(now, "__code__", None) or getattr(getattr(now, "fget", None), "__code__", None)
        return code is not None and classify(code.co_filename) == "toolchain" and attr.strip("_") in code.co_name

    def rebase_after_configure():
        """pytest's own ``pytest_configure`` hooks patch some classes (``_pytest.legacypath`` adds
        ``Config.inifile``...): accept replacements that are tool-chain functions named after what
        they replace, and refuse any other change made before the tests start."""
        what = replaced(accept=toolchain_patch)
        if what is not None:
            return f"{what} was replaced before the tests started"
        take_baseline()
        return None

    def integrity(item, full):
        """What was replaced since pytest started, or ``None`` when nothing was."""
        if full:
            what = replaced()
            if what is not None:
                return f"{what} was replaced"
        if item is not None:
            record = state["items"].get(id(item))
            if record is None or record[0] is not item:
                return "a test item pytest did not collect"
            _, nodeid, obj, code, cls_runtest, module_snapshot = record
            if getattr(item, "obj", None) is not obj or getattr(obj, "__code__", None) is not code:
                return f"{nodeid}: the test function was replaced"
            if type(item).runtest is not cls_runtest or "runtest" in vars(item):
                return f"{nodeid}: the test item was altered"
            module = getattr(item, "module", None)
            if module is not None:
                namespace = vars(module)
                for attr, value in module_snapshot:
                    if namespace.get(attr) is not value:
                        return f"{nodeid}: the test module's {attr!r} was replaced"
        return None

    def genuine_call(frame, item, call):
        """The signal comes from our wrapper, run by pytest's own call_and_report for ``item``."""
        if frame.f_code is not wrapper_code["makereport"]:
            return False
        outer = frame.f_back
        for _ in range(12):
            if outer is None:
                return False
            if outer.f_code is report_code:
                local = outer.f_locals
                return local.get("item") is item and local.get("call") is call
            outer = outer.f_back
        return False

    def defined_as(obj, name, path):
        """Whether ``obj`` is the function the test file ``path`` defined as ``name``, or a wrapper made
        outside the tests (a library's decorator) around it. A test-file function under another name
        is refused even when its ``__wrapped__`` says otherwise: the code under test can set that."""
        if not isinstance(name, str):
            return True  # not a Python test function (doctests, other collectors' items)
        for depth in range(16):
            code = getattr(obj, "__code__", None)
            if code is not None and code.co_name == name and _norm(code.co_filename) == path:
                return True
            if depth == 0 and (code is None or classify(code.co_filename) == "trusted"):
                return False
            obj = getattr(obj, "__wrapped__", None)
            if obj is None:
                return False
        return False

    def record_items(frame, items):
        if frame.f_code is not wrapper_code["collection"]:
            return "collection signal from elsewhere"
        for item in items:
            obj = getattr(item, "obj", None)
            module = getattr(item, "module", None)
            path = str(getattr(item, "path", getattr(item, "fspath", "")))
            code = getattr(obj, "__code__", None)
            if code is not None and classify(code.co_filename) not in ("trusted", "toolchain", "library"):
                return f"{item.nodeid}: its function was not defined with the tests"
            if code is not None and not defined_as(obj, getattr(item, "originalname", None), _norm(path)):
                # A test's name rebound to another test's function (same fixtures, one that passes)
                # between the module's body and its collection: the code under test can run there.
                return f"{item.nodeid}: its name points at another function ({code.co_name})"
            if module is not None and _norm(getattr(module, "__file__", "") or "") != _norm(path):
                return f"{item.nodeid}: its module is not its test file"
            module_snapshot = []
            if module is not None:
                for attr, value in vars(module).items():
                    if isinstance(value, definitions):
                        module_snapshot.append((attr, value))
            state["items"][id(item)] = (item, item.nodeid, obj, getattr(obj, "__code__", None),
                                        type(item).runtest, module_snapshot)
        return None

    def hook(event, args):
        if event != _EVENT and event not in _SENSITIVE and not event.startswith(_SENSITIVE_PREFIXES) \
                and event != "open" and event != "compile":
            return
        me = get_ident()
        depth = state["busy"].get(me, 0)
        if depth >= 2:
            return  # the check below asking for its own caller's frame
        if depth == 1:
            # Raised while this hook runs: by its own work (frame and ``__code__`` reads), or by
            # code it cannot help running (a metaclass property it reads, an object's ``__class__``
            # consulted by ``isinstance``), which must not slip through unjudged.
            state["busy"][me] = 2
            try:
                if getframe(1).f_code.co_filename == plugin_path:
                    return
            finally:
                state["busy"][me] = 1
            state["denied"] += 1
            emit("tamper", {"reason": f"code run inside the grader's audit hook used {event}"})
            raise _Denied(f"{event} is not available to code run by the grader's audit hook")
        state["busy"][me] = 1
        try:
            try:
                frame = getframe(1)
            except ValueError:  # called from C with no Python frame at all
                frame = None
            if frame is None or event in _ALWAYS_DENIED or event.startswith(_SENSITIVE_PREFIXES):
                if event == _EVENT or event == "open" and frame is None:
                    return
                state["denied"] += 1
                emit("tamper", {"reason": f"the code under test used {event}"})
                raise _Denied(f"{event} is not available to the code under test while it is graded")
            if event == _EVENT:
                kind = args[0]
                if kind == "phase":
                    item, call = args[1], args[2]
                    if not genuine_call(frame, item, call):
                        emit("tamper", {"reason": "a test outcome was reported from outside pytest's runner"})
                        return
                    broken = integrity(item, call.when == "call")
                    if broken:
                        emit("tamper", {"reason": broken})
                        return
                    excinfo = call.excinfo
                    if excinfo is None:
                        outcome = "passed"
                    elif issubclass(type(excinfo.value), skipped):  # the real class, not its __class__
                        outcome = "skipped"
                    else:
                        outcome = "failed"
                    emit("phase", {"id": item.nodeid, "when": call.when, "outcome": outcome})
                elif kind == "collected":
                    problem = record_items(frame, args[1])
                    if problem:
                        emit("tamper", {"reason": problem})
                        return
                    emit("collected", {"ids": [i.nodeid for i in args[1]]})
                elif kind == "configured":
                    if frame.f_code is not wrapper_code["configure"]:
                        emit("tamper", {"reason": "a configure signal from elsewhere"})
                        return
                    broken = rebase_after_configure()
                    if broken:
                        emit("tamper", {"reason": broken})
                elif kind == "finish":
                    if frame.f_code is not wrapper_code["finish"]:
                        emit("tamper", {"reason": "a finish signal from elsewhere"})
                        return
                    broken = integrity(None, True)
                    if broken:
                        emit("tamper", {"reason": broken})
                    emit("finish", {"exitstatus": int(args[1]), "denied": state["denied"]})
                return
            if event == "open":
                path = args[0]
                if isinstance(path, bytes):
                    path = path.decode("utf-8", "replace")
                if not isinstance(path, str):
                    return
                path = normpath(path)
                sensitive = path.startswith(protected) or (
                    path.startswith("/proc/") and path.rsplit("/", 1)[-1] in ("mem", "environ", "fd"))
                if not sensitive or not owner_is_untrusted(frame):
                    return
            elif event == "compile":
                # Code compiled under a file name that is not the project's would pass for the
                # standard library's or pytest's in the owner check above.
                filename = args[1] if len(args) > 1 else None
                if isinstance(filename, bytes):
                    filename = filename.decode("utf-8", "replace")
                if not isinstance(filename, str) or classify(filename) == "project" \
                        or not owner_is_untrusted(frame):
                    return
            elif event in ("object.__setattr__", "object.__delattr__"):
                # CPython audits writes of type metadata (``__name__``, ``__module__``, ``__doc__``:
                # namedtuple and dataclasses make those) and of a function's ``__code__``. Only
                # replacing code, or touching the tool chain's own classes, helps a forger.
                target, name = args[0], args[1] if len(args) > 1 else ""
                owner_module = module_of(target) if isinstance(target, type) else ""
                if name != "__code__" and not (isinstance(owner_module, str)
                                                and owner_module.split(".")[0] in _TOOLCHAIN):
                    return
                if not owner_is_untrusted(frame, private_use_ok=True):
                    return
            elif event.startswith("marshal.") and frame.f_code.co_name == "_compile_bytecode" \
                    and classify(frame.f_code.co_filename) == "stdlib" \
                    and _norm(str(frame.f_locals.get("bytecode_path") or "")).startswith(("/usr/", stdlib,
                                                                                            *trusted_dirs)):
                return  # the import system loading a cached module of the read-only system or test env
            elif not owner_is_untrusted(frame, private_use_ok=event in _PRIVATE_USE):
                return
            state["denied"] += 1
            emit("tamper", {"reason": f"the code under test used {event}"})
            raise _Denied(f"{event} is not available to the code under test while it is graded")
        finally:
            del state["busy"][me]

    class _Denied(RuntimeError):
        pass

    wrapper_code = {}
    report_code = _pytest.runner.call_and_report.__code__
    return hook, emit, take_baseline, wrapper_code, {"python": sys.version.split()[0],
                                                     "pytest": pytest.__version__, "pluggy": pluggy.__version__}




@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    _audit(_EVENT, "configured")


@pytest.hookimpl(hookwrapper=True)
def pytest_collection_modifyitems(session, config, items):
    yield
    _audit(_EVENT, "collected", list(items))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    _audit(_EVENT, "phase", item, call)
    yield


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    _audit(_EVENT, "finish", int(exitstatus))


def _sealed():
    """This module's functions re-created over a private copy of its globals and of ``builtins``.

    The module itself sits in ``sys.modules`` under its (random) name, so the code under test can
    find it and rebind or mutate its globals (emptying the tables of sensitive events let it install
    a trace function that cleared each failure before the report: a forged full pass). The hook
    and the hook wrappers pluggy registers read only the private copy, which nothing else holds.
    """
    private = dict(globals())
    private["__builtins__"] = dict(vars(builtins))
    for name, value in list(private.items()):
        if isinstance(value, types.FunctionType) and value.__globals__ is globals():
            copy = types.FunctionType(value.__code__, private, value.__name__, value.__defaults__,
                                      value.__closure__)
            copy.__dict__.update(value.__dict__)  # the hookimpl markers
            copy.__kwdefaults__, copy.__qualname__ = value.__kwdefaults__, value.__qualname__
            private[name] = copy
    return private


_private = _sealed()
for _name in ("pytest_configure", "pytest_collection_modifyitems", "pytest_runtest_makereport",
              "pytest_sessionfinish"):
    globals()[_name] = _private[_name]  # the functions pluggy registers when this import returns
_hook, _emit, _take_baseline, _wrapper_code, _versions = _private["_install"]()
del _private, _name
_wrapper_code.update({"configure": pytest_configure.__code__,
                      "collection": pytest_collection_modifyitems.__code__,
                      "makereport": pytest_runtest_makereport.__code__,
                      "finish": pytest_sessionfinish.__code__})
_emit("start", _versions)
_take_baseline()
sys.addaudithook(_hook)
del _hook, _emit, _take_baseline, _wrapper_code, _versions
