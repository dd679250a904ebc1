"""The code the behaviour check runs *inside* a sandbox (standard library only, copied in as one file).

Three jobs, one file (see :mod:`termgym.tasks.swesynth.behaviour`):

* ``-p <module>`` (a pytest plugin, on the clean tree at generation): a global trace function (called for new frames only) records the
  arguments of every call into the functions the bug changes, pickled *before* the call runs
  (``self`` included), keeping only calls whose pickles need nothing but the standard library and
  the project's own packages (never a test module: the tests' own functions and classes, and
  closures no module holds, pickle as their source, :func:`source_function`/:func:`source_class`).
* ``python3 probe.py perturb CALLS OUT``: perturbed variants of those calls (neighbouring numbers,
  trimmed and extended strings and lists, other dict keys, flipped flags).
* ``python3 probe.py replay INPUTS``: import the package, run every input under a time limit and
  print one line of plain JSON: per input, the canonical structural form of what happened (return
  value, arguments and ``self`` after the call, exception type) and its SHA-256.

Nothing here decides a grade: the sandbox that runs it also runs the code being judged, which may
rewrite any of it. The decision is the host's comparison with answers this process never sees.
The canonical form walks actual types (``type(x)``, never ``x.__class__``, ``__eq__`` or
``__repr__``): builtin values by value, other objects by their class's module and qualified name
plus their instance ``__dict__`` and ``__slots__``, depth- and size-limited.
"""

import ast
import base64
import datetime
import decimal
import functools
import hashlib
import importlib
import io
import json
import math
import operator
import os
import pickle
import random
import re
import signal
import sys
import time
import types
import weakref

try:
    from pathlib import PurePath as _PurePath
except ImportError:  # pragma: no cover - pathlib is always there on CPython
    _PurePath = None

MARKER = "TGBEHAVIOUR "
MAX_DEPTH = 8
MAX_NODES = 3000
MAX_STR = 2000
SMALL_JSON = 600  # answers up to this size travel (and are stored) in full, larger ones as a digest
CALL_SECONDS = 2.0
GEN_ITEMS = 200
#: Which canonical form answers use: 1 names every function by ``module.qualname``; 2 (what new
#: checks record) names a function defined inside another one ``<local function>`` only, since how a
#: fix nests its helpers is no part of what it must restore. A replay uses its check's version.
CANON_VERSION = [2]
MAX_TEST_DIGESTS = 50000

_TYPE_QUALNAME = type.__dict__["__qualname__"]
_TYPE_MODULE = type.__dict__["__module__"]
_TYPE_MRO = type.__dict__["__mro__"]
_TYPE_DICT = type.__dict__["__dict__"]


def _class_name(cls):
    try:
        module = _TYPE_MODULE.__get__(cls, type)
        qual = _TYPE_QUALNAME.__get__(cls, type)
    except Exception:
        return "?"
    return f"{module if type(module) is str else '?'}.{qual if type(qual) is str else '?'}"


def _mro(cls):
    try:
        return _TYPE_MRO.__get__(cls, type)
    except Exception:
        return (cls,)


def _float_key(x):
    if math.isnan(x):
        return "nan"
    return format(x, ".12g")


def _digest(text):
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _instance_state(x, cls, walk, depth):
    """The instance ``__dict__`` (through the real descriptor) and ``__slots__`` values of ``x``."""
    out = []
    for klass in _mro(cls):
        try:
            namespace = _TYPE_DICT.__get__(klass, type)
        except Exception:
            continue
        descriptor = namespace.get("__dict__")
        if type(descriptor) is types.GetSetDescriptorType and not out:
            try:
                d = descriptor.__get__(x, klass)
            except Exception:
                d = None
            if type(d) is dict:
                out.append(["__dict__", walk(d, depth + 1)])
        for name, member in list(namespace.items()):
            if type(member) is types.MemberDescriptorType and type(name) is str and name != "__weakref__":
                try:
                    value = member.__get__(x, klass)
                except AttributeError:
                    continue
                except Exception:
                    value = None
                out.append([name, walk(value, depth + 1)])
    return out


def canonical(value):
    """The canonical structural form of ``value`` (JSON-ready), walking actual types only."""
    budget = [MAX_NODES]

    def walk(x, depth):
        budget[0] -= 1
        if budget[0] < 0:
            return ["<budget>"]
        t = type(x)
        if x is None or t is bool:
            return x
        if t is int:
            return x if -(2 ** 53) < x < 2 ** 53 else ["int", format(x, "x")]
        if t is float:
            return ["float", _float_key(x)]
        if t is str:
            return x if len(x) <= MAX_STR else ["str", len(x), _digest(x)]
        if t is bytes or t is bytearray:
            raw = bytes(x)
            return [t.__name__, raw.hex() if len(raw) <= MAX_STR else hashlib.sha256(raw).hexdigest()]
        if t is complex:
            return ["complex", _float_key(x.real), _float_key(x.imag)]
        if depth >= MAX_DEPTH:
            return ["<deep>", _class_name(t)]
        if t is list or t is tuple:
            seq = list.__iter__(x) if t is list else tuple.__iter__(x)
            return [t.__name__, [walk(item, depth + 1) for item in seq]]
        if t is dict:
            return ["dict", _sorted_pairs(dict.items(x), walk, depth)]
        if t is set or t is frozenset:
            members = set.__iter__(x) if t is set else frozenset.__iter__(x)
            return ["set", sorted((walk(item, depth + 1) for item in members), key=_sort_key)]
        if t is types.FunctionType or t is types.BuiltinFunctionType or t is types.MethodType:
            name = _callable_name(x)
            if CANON_VERSION[0] >= 2 and "<locals>" in name:
                name = "<local function>"
            return ["callable", _class_name(t), name]
        mro = _mro(t)
        name = _class_name(t)
        if _PurePath is not None and _PurePath in mro:  # its instance state holds lazily filled caches
            try:
                return ["object", name, ["path", _PurePath.__str__(x)], []]
            except Exception:
                return ["object", name, ["unreadable"], []]
        if type in mro:
            return ["class", _class_name(x)]
        if BaseException in mro:
            return ["exception", name]
        base = _value_of(x, mro, walk, depth)
        return ["object", name, base, _instance_state(x, t, walk, depth)]

    return walk(value, 0)


def _callable_name(f):
    try:
        module = object.__getattribute__(f, "__module__")
        qual = object.__getattribute__(f, "__qualname__")
        return f"{module}.{qual}" if type(module) is str and type(qual) is str else "?"
    except Exception:
        return "?"


def _sort_key(item):
    return json.dumps(item, sort_keys=True, default=str)


def _sorted_pairs(items, walk, depth):
    return sorted(([walk(k, depth + 1), walk(v, depth + 1)] for k, v in items), key=_sort_key)


def _value_of(x, mro, walk, depth):
    """The builtin or standard-library value inside an object whose class derives from one."""
    try:
        if datetime.datetime in mro:
            return ["datetime", datetime.datetime.isoformat(x)]
        if datetime.date in mro:
            return ["date", datetime.date.isoformat(x)]
        if datetime.time in mro:
            return ["time", datetime.time.isoformat(x)]
        if datetime.timedelta in mro:
            return ["timedelta", datetime.timedelta.total_seconds(x)]
        if datetime.tzinfo in mro:
            return ["tzinfo", walk(datetime.tzinfo.utcoffset(x, None) if datetime.timezone in mro else None, depth)]
        if decimal.Decimal in mro:
            return ["decimal", decimal.Decimal.__str__(x)]
        if str in mro:
            return walk(str.__str__(x), depth)
        if bool in mro:
            return walk(bool(int.__index__(x)), depth)
        if int in mro:
            return walk(int.__index__(x), depth)
        if float in mro:
            return walk(float.__float__(x), depth)
        if bytes in mro:
            return walk(bytes(memoryview(x)), depth)
        if dict in mro:
            return ["dict", _sorted_pairs(dict.items(x), walk, depth)]
        if list in mro:
            return ["list", [walk(i, depth + 1) for i in list.__iter__(x)]]
        if tuple in mro:
            return ["tuple", [walk(i, depth + 1) for i in tuple.__iter__(x)]]
        if set in mro or frozenset in mro:
            return ["set", sorted((walk(i, depth + 1) for i in frozenset(x)), key=_sort_key)]
        import re
        if re.Pattern in mro:
            return ["pattern", re.Pattern.pattern.__get__(x), re.Pattern.flags.__get__(x)]
    except Exception as exc:  # a value that cannot be read is its own answer
        return ["unreadable", _class_name(type(exc))]
    return None


def answer_of(form):
    """``{"h": sha256 of the canonical JSON, "c": the form when small, "r": sha256 of the outcome}``:
    what travels and is stored. The outcome is the return value and exception type alone (not the
    arguments after the call): how many different outcomes a check holds says whether one
    constant could answer it."""
    text = json.dumps(form, sort_keys=True, separators=(",", ":"))
    out = {"h": _digest(text)}
    if len(text) <= SMALL_JSON:
        out["c"] = form
    outcome = outcome_of(form)
    if outcome is not None:
        out["r"] = outcome
    return out


def outcome_of(form):
    """sha256 of a call's outcome (return value and exception type) in its canonical form, or None
    for a form without one (a timeout, an unreplayable input)."""
    if type(form) is dict and "return" in form and "raises" in form:
        return _digest(json.dumps([form["return"], form["raises"]], sort_keys=True, separators=(",", ":")))
    return None


MAX_STATE_LEAVES = 64  # changed leaves one answer reports (more: "s_more", and no state rule for it)
_ATOM_TAGS = frozenset({"int", "float", "str", "bytes", "bytearray", "complex", "callable", "class", "exception",
                        "<deep>", "<budget>", "unreadable", "path", "set", "datetime", "date", "time",
                        "timedelta", "tzinfo", "decimal", "pattern", "timeout", "unreplayable"})


def state_leaves(form, prefix="", out=None):
    """The leaves of a canonical form by path: ``{path: JSON of the leaf}``. A path names what a
    reader of the code would (an argument's position, a dict's key, an object's attribute, a
    list's index); a leaf is a scalar, or a form no smaller part of which has its own path (a set,
    a float, a callable, a value cut short). An object's class is the leaf ``<path>@class``."""
    if out is None:
        out = {}
    if type(form) is list and form and type(form[0]) is str and form[0] not in _ATOM_TAGS:
        tag = form[0]
        if tag in ("list", "tuple") and len(form) == 2 and type(form[1]) is list:
            for n, item in enumerate(form[1]):
                state_leaves(item, f"{prefix}[{n}]", out)
            out[prefix + "@len"] = json.dumps(len(form[1]))
            return out
        if tag == "dict" and len(form) == 2 and type(form[1]) is list:
            for pair in form[1]:
                key = json.dumps(pair[0], sort_keys=True, separators=(",", ":"))
                state_leaves(pair[1], f"{prefix}[{key}]", out)
            out[prefix + "@len"] = json.dumps(len(form[1]))
            return out
        if tag == "object" and len(form) == 4:
            out[prefix + "@class"] = json.dumps(form[1])
            if form[2] is not None:
                state_leaves(form[2], prefix + "@value", out)
            for name, value in form[3]:
                if name == "__dict__" and type(value) is list and value and value[0] == "dict":
                    for pair in value[1]:
                        key = pair[0] if type(pair[0]) is str else json.dumps(pair[0], sort_keys=True)
                        state_leaves(pair[1], f"{prefix}.{key}", out)
                else:
                    state_leaves(value, f"{prefix}.{name}", out)
            return out
    out[prefix] = json.dumps(form, sort_keys=True, separators=(",", ":"))
    return out


def state_change(entry, after):
    """What a call did to its arguments (``self`` included), leaf by leaf: ``{path: [digest after,
    digest at entry]}`` for each leaf whose value changed (``"-"`` where the leaf did not exist),
    each digest the first 12 hex digits of the leaf's sha256; and whether more than
    :data:`MAX_STATE_LEAVES` changed (then only the first ones by path are given)."""
    before, now = state_leaves(entry), state_leaves(after)
    changed = {}
    for path in sorted(set(before) | set(now)):
        old, new = before.get(path), now.get(path)
        if old != new:
            changed[path] = ["-" if new is None else _digest(new)[:12], "-" if old is None else _digest(old)[:12]]
    if len(changed) > MAX_STATE_LEAVES:
        return dict(list(changed.items())[:MAX_STATE_LEAVES]), True
    return changed, False


# -- pickling what the standard pickler refuses ------------------------------------------------------

def _match_again(m):
    """A regex match as the call that finds it again: its pattern matched at its start, up to its
    end bound (same span and groups; what the function under test receives)."""
    return operator.methodcaller("match", m.string, m.start(), m.endpos), (m.re,)


def _memoryview_again(m):
    """A memoryview as a read-only view of a copy of its bytes."""
    return memoryview, (m.tobytes(),)


def _lock_again(lock):
    """A lock as a new one of its kind, not held (a cache's ``lock=RLock()``: what it guards is the
    state around it, which pickles on its own)."""
    import threading
    return (threading.RLock if type(lock) is type(threading.RLock()) else threading.Lock), ()


#: Standard types that do not pickle, rebuilt from standard-library calls (:class:`_Pickler`).
_REBUILT = {type(re.match("", "")): _match_again, memoryview: _memoryview_again}
for _lock in ("Lock", "RLock"):
    _REBUILT[type(getattr(__import__("threading"), _lock)())] = _lock_again


#: Objects that may pickle as the constructor call that made them (:func:`remember_built`):
#: ``id(obj) -> (reference, (partial(cls, *args, **kwargs), ()))``.
_BUILT = {}
MAX_BUILT = 20000


def remember_built(obj, cls, args):
    """Let ``obj`` pickle, when nothing else pickles it, as ``cls`` called again with ``args``
    (a copy of what its ``__init__`` received: ``{"pos", "var", "kw", "varkw"}``, ``self`` left out).

    A method whose ``self`` holds what does not pickle (a parser's tables of local functions, a
    connection's state machine) is then replayed on a fresh object made the same way: an input like
    any other, which the clean code must answer the same way twice to count.
    """
    made = functools.partial(cls, *args["pos"], *args["var"], **args["kw"], **args["varkw"])
    _remember(obj, (made, ()))


def _remember(obj, reduce_value):
    """Let ``obj`` pickle as ``reduce_value`` when nothing else pickles it (:func:`_built`)."""
    if len(_BUILT) >= MAX_BUILT:
        for key in [k for k, (ref, _) in _BUILT.items() if _alive(ref) is None]:
            del _BUILT[key]
        if len(_BUILT) >= MAX_BUILT:
            return
    try:
        ref = weakref.ref(obj)
    except TypeError:  # no weak references (``__slots__`` without ``__weakref__``): held, within MAX_BUILT
        ref = (obj,)
    _BUILT[id(obj)] = (ref, reduce_value)


def _alive(ref):
    return ref[0] if type(ref) is tuple else ref()


def _built(obj):
    entry = _BUILT.get(id(obj))
    if entry is not None and _alive(entry[0]) is obj:
        return entry[1]
    return None


class _Lookup:
    """Pickles as ``getattr`` of a dotted ``path`` on a module (the module as its import)."""

    def __init__(self, module, path):
        self.module, self.path = module, path

    def __reduce__(self):
        return operator.attrgetter(self.path), (self.module,)


#: ``id(value) -> (value, reduce value)`` for what project modules hold (:func:`_held_by_module`),
#: with the ``len(sys.modules)`` it was built at.
_HELD = {"modules": -1, "index": {}}
#: Top-level package names whose modules' values may be pickled as where they live (None: any that
#: is not the standard library's or a test's); the recorder sets it to the replayable packages.
HELD_PACKAGES = [None]
_ATOMS = (type(None), bool, int, float, complex, str, bytes, type, types.FunctionType,
          types.BuiltinFunctionType, types.ModuleType)


def _module_holders():
    for name, module in list(sys.modules.items()):
        top = name.split(".")[0] if type(name) is str else ""
        if not top or top in sys.stdlib_module_names or top in ("builtins", "__main__", "__mp_main__", "conftest") or \
                any(p.startswith("test") or p == "conftest" for p in name.split(".")):
            continue
        if HELD_PACKAGES[0] is not None and top not in HELD_PACKAGES[0]:
            continue
        namespace = getattr(module, "__dict__", None)
        if type(namespace) is dict:
            yield module, namespace


def _held_by_module(obj):
    """How to find ``obj`` again where a project module keeps it, or None: a module attribute, one of
    a module-level ``ChainMap``'s maps, a value of a module-level dict (under a plain key) or an item
    of a module-level list or tuple. glom's default scope holds a registry of local functions that
    every call's scope chains to; it pickles as ``glom.core._DEFAULT_SCOPE.maps[0]``."""
    import collections
    if len(sys.modules) != _HELD["modules"]:
        index = {}
        for module, namespace in _module_holders():
            for attr, value in list(namespace.items()):
                if type(attr) is not str or attr.startswith("__") or isinstance(value, _ATOMS):
                    continue
                index.setdefault(id(value), (value, (operator.attrgetter(attr), (module,))))
                if type(value) is collections.ChainMap:
                    children = [(i, m) for i, m in enumerate(value.maps)]
                    holder = _Lookup(module, attr + ".maps")
                elif type(value) in (list, tuple):
                    children = list(enumerate(value[:200]))
                    holder = _Lookup(module, attr)
                elif type(value) is dict:
                    children = [(k, v) for k, v in list(value.items())[:200]
                                if type(k) in (str, int, bytes, bool, type)]
                    holder = _Lookup(module, attr)
                else:
                    continue
                for key, child in children:
                    if not isinstance(child, _ATOMS):
                        index.setdefault(id(child), (child, (operator.itemgetter(key), (holder,))))
        _HELD["index"], _HELD["modules"] = index, len(sys.modules)
    entry = _HELD["index"].get(id(obj))
    return entry[1] if entry is not None and entry[0] is obj else None


# -- functions of the test code, pickled as their source ------------------------------------------

#: The module name a function remade from its source pickles under (:func:`source_function`): not a
#: real module, so :class:`_Loader` answers it itself and a plain unpickler in another process fails.
SOURCE_MODULE = "__termgym_probe__"
_TREES = {}  # filename -> parsed module (or None when it does not parse)
_RECIPES = {}  # code object -> (source, name, names read) or None


def _test_module(name):
    """Whether a module name is test code (``tests.test_cache``, ``conftest``, ``toolz.tests.x``)."""
    return type(name) is str and any(p.startswith("test") or p == "conftest" for p in name.split("."))


def _by_source(module, qualname):
    """Whether a function or class ``module.qualname`` is pickled as its source: while recording
    (the replayable packages known), when a replay could not import it: code outside those packages
    that is not installed either (the test tree: ``tests/``, ``jsonpickle_test.py``, ``conftest``),
    and any defined inside a function or as a lambda (``toolz.tests``' local
    ``mycurry``, the lambda funcy's ``isa(int)`` returns). A closure of the project's code is then
    made from the clean tree's source, like any other argument value the tests made."""
    if HELD_PACKAGES[0] is None or type(module) is not str or type(qualname) is not str:
        return False
    top = module.split(".")[0]
    local = "<locals>" in qualname or "<lambda>" in qualname
    if top in sys.stdlib_module_names:
        return False
    if top in HELD_PACKAGES[0]:
        return local
    filename = getattr(sys.modules.get(module), "__file__", None)
    if type(filename) is not str:
        return _test_module(module)
    # outside the replayable packages and not installed: the test tree's (``tests/jsonpickle_test.py``)
    return "site-packages" not in filename and "dist-packages" not in filename


def _tree(filename):
    if filename not in _TREES:
        import linecache
        try:
            _TREES[filename] = ast.parse("".join(linecache.getlines(filename)))
        except Exception:
            _TREES[filename] = None
    return _TREES[filename]


def _arg_names(args):
    names = [a.arg for a in (*args.posonlyargs, *args.args)]
    names += [args.vararg.arg] if args.vararg else []
    names += [a.arg for a in args.kwonlyargs]
    return names + ([args.kwarg.arg] if args.kwarg else [])


def _code_arg_names(code):
    n = code.co_argcount + code.co_kwonlyargcount
    names = list(code.co_varnames[:n])
    if code.co_flags & 0x04:
        names.insert(code.co_argcount, code.co_varnames[n])
        n += 1
    if code.co_flags & 0x08:
        names.append(code.co_varnames[n])
    return names


def _within(node, position):
    line, end_line, col, end_col = position
    return (node.lineno, node.col_offset) <= (line, col) and (end_line, end_col) <= (node.end_lineno, node.end_col_offset)


def _function_node(code):
    """The ``def`` or ``lambda`` of the source that compiled to ``code``, or None when it is not
    found or not found alone."""
    tree = _tree(code.co_filename)
    if tree is None:
        return None
    arg_names = _code_arg_names(code)
    if code.co_name == "<lambda>":
        found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda) and n.lineno == code.co_firstlineno
                 and _arg_names(n.args) == arg_names]
        if len(found) > 1 and hasattr(code, "co_positions"):
            spots = [p for p in code.co_positions() if p[0] is not None and p[2] is not None and p[1] is not None
                     and p[3] is not None and (p[0], p[2]) != (code.co_firstlineno, 0)]
            if spots:
                found = [n for n in found if _within(n.body, spots[0])]
        return found[0] if len(found) == 1 else None
    found = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
             and n.name == code.co_name and _arg_names(n.args) == arg_names
             and min([n.lineno] + [d.lineno for d in n.decorator_list]) == code.co_firstlineno]
    return found[0] if len(found) == 1 else None


def _recipe(code):
    """``(source, name, names read)`` that defines, run alone, a function with ``code``'s behaviour: its
    ``def`` without decorators, annotations or default expressions (the defaults are set from the
    recorded function's values), or ``name = lambda ...``."""
    if code not in _RECIPES:
        node = _function_node(code)
        recipe = None
        if node is not None:
            import copy
            node = copy.deepcopy(node)
            args = node.args
            args.defaults = [ast.Constant(None) for _ in args.defaults]
            args.kw_defaults = [None if d is None else ast.Constant(None) for d in args.kw_defaults]
            if isinstance(node, ast.Lambda):
                name = "_recorded_lambda"
                source = f"{name} = {ast.unparse(node)}"
            else:
                node.decorator_list = []
                node.returns = None
                for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
                    if a is not None:
                        a.annotation = None
                name = node.name
                source = ast.unparse(node)
            recipe = (source, name, frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name)))
        _RECIPES[code] = recipe
    return _RECIPES[code]


def _global_names(code):
    names = set(code.co_names)
    for const in code.co_consts:
        if type(const) is types.CodeType:
            names |= _global_names(const)
    return names


def _replayable_module(module):
    top = module.__name__.split(".")[0]
    if top in sys.stdlib_module_names:
        return True
    return not _test_module(module.__name__) if HELD_PACKAGES[0] is None else top in HELD_PACKAGES[0]


def _closure_into(namespace, func, skip):
    """Put the values of ``func``'s closure into ``namespace`` (but the names in ``skip``); False
    when a cell is empty (a name the enclosing function binds later)."""
    for free, cell in zip(func.__code__.co_freevars, func.__closure__ or ()):
        if free in skip:
            continue
        try:
            namespace[free] = cell.cell_contents
        except ValueError:
            return False
    return True


def _replayable_namespace(namespace):
    """Whether every module ``namespace`` holds can be imported where the replay runs (``pytest`` cannot)."""
    return not any(type(v) is types.ModuleType and not _replayable_module(v) for v in namespace.values())


def _source_reduce(func):
    """How :class:`_Pickler` pickles a function of the test code (a lambda the test passes as a key,
    a helper it defines): :func:`source_function` of its source, with the values of the names it
    reads from its closure and its module. Replaying it needs no test module; what it reads must
    pickle like any other argument."""
    made = func.__dict__.get("__tg_recipe__")
    if made is not None:
        return source_function, made
    code = func.__code__
    recipe = _recipe(code)
    if recipe is None:
        return None
    source, name, read = recipe
    namespace = {"__name__": func.__module__}
    module_globals = func.__globals__
    for global_name in sorted(_global_names(code) & read):
        if global_name in module_globals and global_name != name:
            namespace[global_name] = module_globals[global_name]
    if not _closure_into(namespace, func, (name,)) or not _replayable_namespace(namespace):
        return None
    return source_function, (source, name, namespace, func.__defaults__, func.__kwdefaults__)


def source_function(source, name, namespace, defaults, kwdefaults):
    """A function of the test code made again from its source (see :func:`_source_reduce`)."""
    scope = dict(namespace)
    exec(compile(source, f"<recorded {name}>", "exec"), scope)
    func = scope[name]
    func.__defaults__, func.__kwdefaults__ = defaults, kwdefaults
    func.__dict__["__tg_recipe__"] = (source, name, namespace, defaults, kwdefaults)
    return func


def _defs_in(node):
    """The ``def``s and ``class``es directly in ``node``'s body (inside ``if``/``try``/``with`` too)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield child
        elif isinstance(child, ast.stmt) or isinstance(child, ast.excepthandler):
            yield from _defs_in(child)


def _class_node(cls):
    """The ``class`` statement that made ``cls``, followed down its qualified name, or None."""
    module = sys.modules.get(_TYPE_MODULE.__get__(cls, type))
    filename = getattr(module, "__file__", None)
    tree = _tree(filename) if type(filename) is str else None
    if tree is None:
        return None
    found = [tree]
    for part in _TYPE_QUALNAME.__get__(cls, type).split("."):
        if part == "<locals>":
            continue
        found = [d for node in found for d in _defs_in(node) if d.name == part]
        if not found:
            return None
    return found[0] if len(found) == 1 and isinstance(found[0], ast.ClassDef) else None


_CLASS_RECIPES = {}  # class -> (source, name, names read) or None


def _class_reduce(cls):
    """How :class:`_Pickler` pickles a class of the test code (a ``Timer`` a test hands a cache, a
    subclass it defines inside a test): :func:`source_class` of its ``class`` statement, with the
    values of the names it reads from its module and its methods' closures."""
    made = _TYPE_DICT.__get__(cls, type).get("__tg_recipe__")
    if made is not None:
        return source_class, made
    bases = cls.__bases__
    if cls not in _CLASS_RECIPES:
        node = _class_node(cls)
        if node is not None and len(node.bases) == len(bases) and not any(
                isinstance(b, ast.Starred) for b in node.bases):
            # the bases as the classes they were (``class Table(self._dict, InlineTable)`` reads the
            # enclosing method's ``self``, which nothing of the class keeps)
            import copy
            node = copy.deepcopy(node)
            node.bases = [ast.Name(f"_recorded_base_{i}", ast.Load()) for i in range(len(bases))]
        _CLASS_RECIPES[cls] = None if node is None else (
            ast.unparse(node), node.name, frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name)))
    recipe = _CLASS_RECIPES[cls]
    if recipe is None:
        return None
    source, name, read = recipe
    module = sys.modules.get(_TYPE_MODULE.__get__(cls, type))
    module_globals = getattr(module, "__dict__", {})
    namespace = {"__name__": _TYPE_MODULE.__get__(cls, type)}
    namespace.update((f"_recorded_base_{i}", base) for i, base in enumerate(bases) if f"_recorded_base_{i}" in read)
    for global_name in sorted(read):
        if global_name in module_globals and global_name != name:
            namespace[global_name] = module_globals[global_name]
    for member in list(_TYPE_DICT.__get__(cls, type).values()):
        func = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
        if type(func) is not types.FunctionType or func.__code__.co_filename != getattr(module, "__file__", None):
            continue  # a method the class statement does not hold (a dataclass's generated ``__repr__``)
        if not _closure_into(namespace, func, (name, "__class__")):
            return None
    if not _replayable_namespace(namespace):
        return None
    return source_class, (source, name, namespace)


def source_class(source, name, namespace):
    """A class of the test code made again from its source (see :func:`_class_reduce`)."""
    scope = dict(namespace)
    exec(compile(source, f"<recorded {name}>", "exec"), scope)
    cls = scope[name]
    type.__setattr__(cls, "__tg_recipe__", (source, name, namespace))
    return cls


def _mangled(owner, name):
    """The attribute a private ``name`` written in class ``owner`` is stored under (``__cmp`` in
    ``Resolver``: ``_Resolver__cmp``), or None where nothing mangles (a class named only of
    underscores)."""
    return f"_{owner.lstrip('_')}{name}" if owner.strip("_") else None


def _private_method_reduce(method):
    """A bound method of a private name (anytree's ``Resolver`` passes ``self.__cmp`` on as a
    callback) as the ``getattr`` of its mangled name, ``_Resolver__cmp``: the standard reduction
    asks the instance for ``__cmp``, which no instance has, so such arguments pickled and never
    loaded again. ``None`` for any other method."""
    name = method.__func__.__name__
    if not name.startswith("__") or name.endswith("__"):
        return None
    owner = method.__func__.__qualname__.rpartition(".")[0].rpartition(".")[2]
    mangled = _mangled(owner, name) if owner != "<locals>" else None  # no class: nothing to mangle
    return None if mangled is None else (getattr, (method.__self__, mangled))


def _lookup(module_name, path):
    """What the dotted ``path`` names in the loaded module ``module_name`` (how pickle finds a class
    or a function again), or None."""
    found = sys.modules.get(module_name) if type(module_name) is str else None
    for part in path.split(".") if type(path) is str else ["<locals>"]:
        if part == "<locals>" or found is None:
            return None
        found = getattr(found, part, None)
    return found


def _found_by_name(obj, module_name, qualname):
    """Whether ``module_name.qualname`` leads back to ``obj`` itself."""
    return obj is not None and _lookup(module_name, qualname) is obj


#: Metaclasses a class made at run time may have to be made again (:func:`_run_time_class_reduce`):
#: the plain ones, whose call takes ``(name, bases, namespace)``.
_PLAIN_METACLASSES = (type, __import__("abc").ABCMeta)


def _run_time_class_reduce(cls):
    """A class a project makes at run time (marko's ``Markdown`` joins its extensions into
    ``type("_Parser", mixins + (Parser,), {})``), which no module attribute holds, as that call:
    its metaclass called with its name, its bases and what its namespace holds. The standard
    pickle looks the class up by name and fails, so every call whose arguments held such an
    object (a marko ``Source`` holds its parser) pickled never. A class its module keeps under
    another name (``functools._CacheInfo``, named ``CacheInfo``) pickles as that attribute.
    ``None`` for a class pickle finds by name, a nested one (its qualified name has a dot: a class
    statement inside a function or a class; the test code's are made from their source), one of
    another metaclass, and one whose namespace holds more than constants (a method or an object
    could lead back to the class before the call that makes it is pickled)."""
    meta = type(cls)
    module, qualname = _TYPE_MODULE.__get__(cls, type), _TYPE_QUALNAME.__get__(cls, type)
    if "." in qualname or _found_by_name(cls, module, qualname):
        return None
    module_dict = getattr(sys.modules.get(module) if type(module) is str else None, "__dict__", None)
    for attr, value in list(module_dict.items()) if type(module_dict) is dict else ():
        if value is cls and type(attr) is str:  # kept under another name (functools._CacheInfo)
            return operator.attrgetter(attr), (sys.modules[module],)
    if meta not in _PLAIN_METACLASSES:
        return None
    namespace = {k: v for k, v in _TYPE_DICT.__get__(cls, type).items()
                 if k not in ("__dict__", "__weakref__", "_abc_impl", "__slotnames__")  # made again on use
                 and type(v) is not types.MemberDescriptorType}
    if not all(_plain_data(v) for v in namespace.values()):
        return None  # methods or objects of its own: they may lead back to the class before it is made
    return meta, (cls.__name__, cls.__bases__, namespace)


def _plain_data(value):
    """Whether ``value`` is a constant or a tuple of constants (what a class made by joining bases holds)."""
    if type(value) is tuple:
        return all(_plain_data(v) for v in value)
    return type(value) in (type(None), bool, int, float, str, bytes)


def _lru_cache_reduce(wrapper):
    """A function cached with ``functools.lru_cache`` and kept under another name than its own
    (jsonschema's ``RefResolver`` keeps ``lru_cache(1024)(urljoin)``: named ``urljoin``, it is not
    ``urllib.parse.urljoin``) as the wrapping call, with an empty cache. The standard pickle looks
    the wrapper up by the wrapped function's name, finds the function, and fails. ``None`` for a
    wrapper pickle finds by name."""
    if _found_by_name(wrapper, getattr(wrapper, "__module__", None), getattr(wrapper, "__qualname__", None)):
        return None
    parameters = wrapper.cache_parameters()
    return lru_cached, (wrapper.__wrapped__, parameters["maxsize"], parameters["typed"])


def lru_cached(func, maxsize, typed):
    """``func`` cached again as ``functools.lru_cache(maxsize, typed)`` made it (:func:`_lru_cache_reduce`)."""
    return functools.lru_cache(maxsize=maxsize, typed=typed)(func)


def blank_object(cls, args, kwargs):
    """An object of ``cls`` as its ``__new__`` makes it before ``__init__`` runs (:class:`_Blank`);
    pickled again (a perturbed variant of its call), it is that blank object again."""
    new = cls.__new__
    made = object.__new__(cls) if new is object.__new__ else new(cls, *args, **kwargs)
    _remember(made, (blank_object, (cls, args, kwargs)))
    return made


class _Blank:
    """The ``self`` a constructor receives, which pickles as what ``__new__`` made of the constructor's
    arguments: a class whose pickling reads what ``__init__`` sets (tomlkit's ``Array`` reduces
    itself to its ``_value``) does not pickle before ``__init__`` ran, so a bug in ``__init__``
    had no replayable call. The replay then runs ``__init__`` on that blank object, as the
    constructor does."""

    def __init__(self, cls, args, kwargs):
        self.cls, self.args, self.kwargs = cls, args, kwargs

    def __reduce__(self):
        return blank_object, (self.cls, self.args, self.kwargs)


#: What a pickle names under :data:`SOURCE_MODULE` (the loader answers these names itself).
_SOURCE_MODULE_NAMES = {"source_function": source_function, "source_class": source_class, "lru_cached": lru_cached,
                        "blank_object": blank_object}
sys.modules.setdefault(SOURCE_MODULE, types.ModuleType(SOURCE_MODULE))
for _name, _made in _SOURCE_MODULE_NAMES.items():
    _made.__module__, _made.__qualname__ = SOURCE_MODULE, _name
    setattr(sys.modules[SOURCE_MODULE], _name, _made)


def _private_function_reduce(func):
    """A function of a private name kept in a class (anytree's ``AbstractIter`` defaults its filter to
    ``AbstractIter.__default_filter``, a static method) as the ``getattr`` of its mangled name on
    that class: the standard pickle looks up ``AbstractIter.__default_filter``, which the class
    holds as ``_AbstractIter__default_filter``, and fails. ``None`` for any other function."""
    owner_path, _, name = func.__qualname__.rpartition(".")
    if not owner_path or "<locals>" in owner_path or not name.startswith("__") or name.endswith("__"):
        return None
    owner = _lookup(func.__module__, owner_path)
    mangled = _mangled(owner.__name__, name) if isinstance(owner, type) else None
    return (getattr, (owner, mangled)) if mangled is not None and getattr(owner, mangled, None) is func else None


def _misnamed_reduce(obj):
    """How to find again a class, a function or a method that the standard pickle looks up under a
    name that does not lead back to it (made at run time, cached, private), or None."""
    if isinstance(obj, type):
        return _run_time_class_reduce(obj)
    kind = type(obj)
    if kind is functools._lru_cache_wrapper:
        return _lru_cache_reduce(obj)
    if kind is types.FunctionType:
        return _private_function_reduce(obj)
    if kind is types.MethodType:
        return _private_method_reduce(obj)
    return None


class _Pickler(pickle.Pickler):
    """The standard pickler, plus: a module pickles as its import, a match of the ``regex`` package as
    its ``re`` one does (:func:`_match_again`), and an instance of a class
    defined inside a function (a sentinel from a factory: ``make_sentinel.<locals>.Sentinel``) as
    the module attribute that holds it, when a module holds it; a method or a function of a private
    name as its mangled name (:func:`_private_method_reduce`, :func:`_private_function_reduce`); a
    class made at run time as the call that makes it (:func:`_run_time_class_reduce`) and a
    function cached under another name as its ``lru_cache`` call (:func:`_lru_cache_reduce`).
    With ``rebuild``, an object
    :func:`remember_built` knows pickles as the constructor call that made it, and any other that
    a project module keeps as where it keeps it (:func:`_held_by_module`)."""

    rebuild = False

    def reducer_override(self, obj):
        if self.rebuild:
            made = _built(obj)
            if made is None and not isinstance(obj, _ATOMS) and type(obj) is not _Lookup:
                made = _held_by_module(obj)
            if made is not None:
                return made
        if type(obj) is types.ModuleType:
            return importlib.import_module, (obj.__name__,)
        if type(obj) is types.FunctionType and ("__tg_recipe__" in obj.__dict__
                                                  or _by_source(obj.__module__, obj.__qualname__)):
            made = None if _test_module(obj.__module__) else _held_by_module(obj)  # the project's own object
            made = made or _source_reduce(obj)
            if made is not None:
                return made
        if isinstance(obj, type) and ("__tg_recipe__" in _TYPE_DICT.__get__(obj, type)
                                      or _by_source(_TYPE_MODULE.__get__(obj, type), _TYPE_QUALNAME.__get__(obj, type))):
            made = _class_reduce(obj)
            if made is not None:
                return made
        made = _misnamed_reduce(obj)
        if made is not None:
            return made
        rebuild = _REBUILT.get(type(obj))
        if rebuild is not None:
            return rebuild(obj)
        if _class_name(type(obj)) == "_regex.Match":  # the third-party ``regex`` module's match (parsimonious)
            return _match_again(obj)
        if "<locals>" in _TYPE_QUALNAME.__get__(type(obj), type) and type(obj) is not types.FunctionType:
            held = _held_by_module(obj)  # a sentinel: the module attribute that holds it
            if held is not None:
                return held
        return NotImplemented


class _RebuildPickler(pickle._Pickler):
    """:class:`_Pickler`'s second try, on the pure-Python pickler: the C one never asks
    ``reducer_override`` about exact dicts and lists, and a module-level dict (glom's default scope
    map) is what has to pickle as where it lives."""

    rebuild = True
    reducer_override = _Pickler.reducer_override


def dumps(value):
    """``pickle.dumps`` (protocol 4) that also takes regex matches and memoryviews (:data:`_REBUILT`)
    and module-level singletons of local classes (:class:`_Pickler`), without touching the
    process's global ``copyreg`` table (the tests under the recorder keep theirs). What does not
    pickle so is tried again (:class:`_RebuildPickler`) with the objects :func:`remember_built`
    knows as their constructor calls and what project modules keep as where they keep it."""
    buffer = io.BytesIO()
    LAST_DUMP_REBUILT[0] = False
    try:
        _Pickler(buffer, protocol=4).dump(value)
    except Exception as first:
        buffer = io.BytesIO()
        try:
            _RebuildPickler(buffer, protocol=4).dump(value)
        except Exception:
            raise first from None  # what the plain pickle said is the reason worth reading
        LAST_DUMP_REBUILT[0] = True
    return buffer.getvalue()


#: Whether the last :func:`dumps` pickled objects as the calls that make or find them again (their
#: state then comes from the replaying process, not from the recorded one).
LAST_DUMP_REBUILT = [False]


# -- recording (a pytest plugin) --------------------------------------------------------------------

def _no_address(exc):
    """An error's text without memory addresses (``<function f at 0x7f..>``), so alike reasons count as one."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", str(exc))[:120]


class _Recorder:
    def __init__(self, config):
        self.targets = {(rel, qual) for rel, qual in config["targets"]}
        self.allowed = set(config["allowed_modules"])
        self.max_per_target = int(config["max_per_target"])
        self.max_bytes = int(config["max_bytes"])
        # A function every test call of which pickles larger than ``max_bytes`` keeps its smallest
        # call up to ``max_large_bytes`` (:meth:`write`): one large input rather than no check.
        self.max_large_bytes = int(config.get("max_large_bytes", self.max_bytes))
        self.large = {}
        self.out = config["out"]
        # Digests of *every* call the tests make into the targets (not only the recorded ones): an
        # input among them is one the agent can read off the tests, so it cannot count as held out.
        self.digests_out = config.get("digests_out")
        self.digests = set()
        self.digested = set()
        self.codes = {}
        self.calls = []
        self.counts = {}
        self.seen = set()
        self.generator_frames = set()
        self.dropped = {}
        self.dropped_out = config.get("dropped_out")
        self.active = False
        # The classes whose methods the bug changes (``(file, class qualname)``): their objects'
        # constructor calls are kept (:meth:`on_init`) so a ``self`` that does not pickle is made again.
        self.classes = {(rel, qual.rsplit(".", 1)[0]) for rel, qual in self.targets
                        if "." in qual and "<locals>" not in qual}
        self.class_wanted = {}
        HELD_PACKAGES[0] = frozenset(self.allowed)

    def match(self, code):
        hit = self.codes.get(code)
        if hit is None:
            hit = False
            filename = code.co_filename.replace(os.sep, "/")
            for rel, qual in self.targets:
                if code.co_qualname == qual and (filename.endswith("/" + rel) or filename == rel):
                    hit = (rel, qual)
                    break
            self.codes[code] = hit
        return hit

    def on_call(self, frame, event, arg):
        if event != "call" or self.active:
            return None
        hit = self.match(frame.f_code)
        if not hit:
            if self.classes and frame.f_code.co_name == "__init__":
                self.active = True
                try:
                    self.on_init(frame)
                except Exception:
                    pass
                finally:
                    self.active = False
            return None
        wanted = self.counts.get(hit, 0) < self.max_per_target
        if not wanted and (self.digests_out is None or len(self.digests) >= MAX_TEST_DIGESTS):
            return None
        code = frame.f_code
        if code.co_flags & 0x2A0:  # generator, coroutine, async generator: record the first entry only
            if id(frame) in self.generator_frames:
                return None
            self.generator_frames.add(id(frame))
        self.active = True
        try:
            self.record(hit, code, frame.f_locals, wanted)
        except Exception as exc:
            if wanted:
                self.drop(self.unpicklable(code, frame.f_locals, exc))
        finally:
            self.active = False
        return None

    def wanted_class(self, cls):
        """Whether ``cls`` is, or derives from, a class whose methods the bug changes."""
        wanted = self.class_wanted.get(cls)
        if wanted is None:
            wanted = False
            for klass in _mro(cls):
                module = sys.modules.get(_TYPE_MODULE.__get__(klass, type))
                filename = getattr(module, "__file__", None)
                if type(filename) is not str:
                    continue
                filename = filename.replace(os.sep, "/")
                qual = _TYPE_QUALNAME.__get__(klass, type)
                if any(q == qual and (filename.endswith("/" + rel) or filename == rel) for rel, q in self.classes):
                    wanted = True
                    break
            self.class_wanted[cls] = wanted
        return wanted

    def on_init(self, frame):
        """The outermost ``__init__`` of an object of a wanted class: keep a copy of its arguments
        (:func:`remember_built`), if they pickle with only the standard library and the project."""
        code = frame.f_code
        if not code.co_argcount:
            return
        local_vars = frame.f_locals
        obj = local_vars.get(code.co_varnames[0])
        cls = type(obj)
        if not self.wanted_class(cls):
            return
        init = None
        for klass in _mro(cls):
            init = _TYPE_DICT.__get__(klass, type).get("__init__")
            if init is not None:
                break
        if getattr(init, "__code__", None) is not code:  # a base's __init__ called by super()
            return
        call = self.arguments(code, local_vars)
        call["pos"] = call["pos"][1:]
        data = dumps(call)
        if len(data) > self.max_bytes or _unreplayable(data, self.allowed):
            return
        remember_built(obj, cls, loads(data))

    def drop(self, reason):
        """Count a wanted call that could not be kept, by why (what the recording says when none is)."""
        if len(self.dropped) < 50 or reason in self.dropped:
            self.dropped[reason] = self.dropped.get(reason, 0) + 1

    @staticmethod
    def unpicklable(code, local_vars, exc):
        """Which argument of a call did not pickle, its class and the error: ``self (pkg.Table): ...``."""
        for name in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]:
            if name not in local_vars:
                continue
            try:
                dumps(local_vars[name])
            except Exception as inner:
                return f"{name} ({_class_name(type(local_vars[name]))}) does not pickle: {_no_address(inner)}"
        return f"its arguments do not pickle: {_class_name(type(exc))}: {_no_address(exc)}"

    @staticmethod
    def arguments(code, local_vars):
        """A call's arguments from its frame at entry: ``{"pos", "kw", "var", "varkw"}``."""
        n_pos = code.co_argcount
        names = code.co_varnames
        call = {"pos": [local_vars[n] for n in names[:n_pos]],
                "kw": {n: local_vars[n] for n in names[n_pos:n_pos + code.co_kwonlyargcount]}}
        index = n_pos + code.co_kwonlyargcount
        call["var"] = list(local_vars[names[index]]) if code.co_flags & 0x04 else []
        index += 1 if code.co_flags & 0x04 else 0
        call["varkw"] = dict(local_vars[names[index]]) if code.co_flags & 0x08 else {}
        return call

    def record(self, hit, code, local_vars, wanted=True):
        call = self.arguments(code, local_vars)
        try:
            data = dumps(call)
        except Exception:
            if code.co_name != "__init__" or not call["pos"]:
                raise
            # a constructor's ``self``, not built yet: as what ``__new__`` made of the same arguments
            call["pos"][0] = _Blank(type(call["pos"][0]), call["pos"][1:] + call["var"], {**call["kw"], **call["varkw"]})
            data = dumps(call)
        # A test call far larger than any stored input (perturbed ones are at most about twice their
        # recorded call) cannot be one of them; a repeated call is digested once.
        if (self.digests_out is not None and len(self.digests) < MAX_TEST_DIGESTS
                and len(data) <= 4 * max(self.max_bytes, self.max_large_bytes)):
            seen = hashlib.sha1(data).digest()
            if seen not in self.digested:
                self.digested.add(seen)
                self.digests.add(call_digest(hit[1], data))
                if LAST_DUMP_REBUILT[0]:  # objects pickled as how to make them: the state the test gave them counts too
                    try:
                        self.digests.add(_digest(json.dumps([hit[1], canonical(call)], sort_keys=True,
                                                            separators=(",", ":"))))
                    except Exception:
                        pass
        if not wanted:
            return
        if len(data) > self.max_bytes:
            self.drop(f"its pickled arguments are larger than {self.max_bytes} bytes")
            held = self.large.get(hit)
            if len(data) <= self.max_large_bytes and (held is None or len(data) < held[0]) \
                    and not _unreplayable(data, self.allowed):
                self.large[hit] = (len(data), base64.b64encode(data).decode())
            return
        key = hashlib.sha256(repr(hit).encode() + data).hexdigest()
        if key in self.seen:
            return
        why = _unreplayable(data, self.allowed)
        if why:
            self.drop(why)
            return
        self.seen.add(key)
        self.counts[hit] = self.counts.get(hit, 0) + 1
        self.calls.append({"target": list(hit), "args": base64.b64encode(data).decode()})

    def write(self):
        for hit, (_size, args) in self.large.items():
            if not self.counts.get(hit):
                self.calls.append({"target": list(hit), "args": args, "large": True})
        with open(self.out, "w") as fh:
            json.dump(self.calls, fh)
        if self.digests_out is not None:
            with open(self.digests_out, "w") as fh:
                json.dump(sorted(self.digests), fh)
        if self.dropped_out is not None:
            with open(self.dropped_out, "w") as fh:
                json.dump(self.dropped, fh)


def call_digest(qualname, data):
    """What identifies a call of ``qualname`` with pickled arguments ``data``: the digest of the
    canonical form of the arguments as they load again (what a replay of them would see)."""
    try:
        try:
            args = pickle.loads(data)
        except Exception:
            args = loads(data)
        form = canonical(args)
    except Exception as exc:
        form = ["unloadable", _class_name(type(exc)), hashlib.sha256(data).hexdigest()]
    return _digest(json.dumps([qualname, form], sort_keys=True, separators=(",", ":")))


def _builtin_new(cls, args):
    """An instance of ``cls`` made by the ``__new__`` of its nearest built-in base, as pickle's
    own protocol-0 reconstructor makes one: for a class whose ``__new__`` takes other arguments
    than its pickle hands back (cssselect's ``Token(type_, value, pos)``, a tuple of two with the
    position as an attribute; rfc3986's ``ParseResult``, a namedtuple whose ``__new__`` also
    wants ``uri_ref``; a class whose ``__new__`` needs an argument its pickle never gives). The
    state the pickle then restores is the object's as it was recorded."""
    base = next(b for b in cls.__mro__ if not isinstance(b.__dict__.get("__new__"), staticmethod)
                and (b.__dict__.get("__new__") is not None or b is object))
    if base is object:
        return object.__new__(cls)
    if getattr(cls, "__getnewargs__", None) is getattr(base, "__getnewargs__", False):
        return base.__new__(cls, *args)  # tuple's and str's own ``__getnewargs__``: the value itself
    return base.__new__(cls, args)  # a namedtuple's: its fields, one argument each


class _Loader(pickle._Unpickler):
    """The pure-Python unpickler, except that ``__slots__`` state is restored with
    ``object.__setattr__``: immutable value classes (a ``__setattr__`` that refuses) load too;
    ``__setstate__`` is looked up on the class where the instance's lookup recurses (an instance
    whose ``__getattr__`` reads its own attributes, tinydb's ``Query``, before its state is back;
    elsewhere the instance's lookup stands, as the standard unpickler's); and an
    object whose class's ``__new__`` refuses the arguments its pickle gives is made by its
    built-in base's (:func:`_builtin_new`).
    With ``allowed``, only classes of the standard library and those top-level packages load."""

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, data, allowed=None):
        import io
        super().__init__(io.BytesIO(data))
        self.allowed = allowed

    def find_class(self, module, name):
        if module == SOURCE_MODULE and name in _SOURCE_MODULE_NAMES:
            return _SOURCE_MODULE_NAMES[name]
        if self.allowed is not None:
            top = module.split(".")[0]
            if top in ("__main__", "conftest") or (top not in self.allowed and top not in sys.stdlib_module_names):
                raise pickle.UnpicklingError(f"{module}.{name} is not replayable")
        return super().find_class(module, name)

    def load_newobj(self):
        args = self.stack.pop()
        cls = self.stack.pop()
        try:
            obj = cls.__new__(cls, *args)
        except TypeError:
            obj = _builtin_new(cls, args)
        self.append(obj)

    dispatch[pickle.NEWOBJ[0]] = load_newobj

    def load_build(self):
        state = self.stack.pop()
        inst = self.stack[-1]
        try:
            setstate = getattr(inst, "__setstate__", None)
        except RecursionError:  # a ``__getattr__`` reading state not yet back (tinydb's ``Query``)
            setstate = getattr(type(inst), "__setstate__", None)
            setstate = None if setstate is None else functools.partial(setstate, inst)
        if setstate is not None:
            setstate(state)
            return
        slotstate = None
        if isinstance(state, tuple) and len(state) == 2:
            state, slotstate = state
        if state:
            inst.__dict__.update(state)
        if slotstate:
            for key, value in slotstate.items():
                object.__setattr__(inst, key, value)

    dispatch[pickle.BUILD[0]] = load_build

    def load_reduce(self):
        made, args = self.stack[-2], self.stack[-1]
        super().load_reduce()
        if type(made) is functools.partial and not args and isinstance(made.func, type):
            # an object pickled as its constructor call (:func:`remember_built`) pickles so again
            # (a perturbed variant of the call holding it)
            try:
                remember_built(self.stack[-1], made.func,
                               {"pos": list(made.args), "var": [], "kw": dict(made.keywords), "varkw": {}})
            except Exception:
                pass

    dispatch[pickle.REDUCE[0]] = load_reduce


def loads(data, allowed=None):
    """Unpickle recorded arguments (see :class:`_Loader`)."""
    return _Loader(data, allowed).load()


def _unreplayable(data, allowed):
    """None when ``data`` unpickles with only the standard library and the project's packages, else
    why not (a module outside them, or the error loading it again)."""
    try:
        loads(data, set(allowed))
    except pickle.UnpicklingError as exc:
        text = str(exc)
        if text.endswith(" is not replayable"):
            return f"its arguments need {text[:-len(' is not replayable')]}, outside the standard library and the project"
        return f"its arguments do not load again: {text[:120]}"
    except Exception as exc:
        return f"its arguments do not load again: {_class_name(type(exc))}: {_no_address(exc)}"
    return None


_RECORDER = None


def pytest_configure(config):
    global _RECORDER
    path = os.environ.get("TG_BEHAVIOUR_CONFIG")
    if not path:
        return
    with open(path) as fh:
        _RECORDER = _Recorder(json.load(fh))
    import threading
    # A global trace function is called for new frames only (no C calls, no lines: it returns None).
    sys.settrace(_RECORDER.on_call)
    threading.settrace(_RECORDER.on_call)


def pytest_unconfigure(config):
    if _RECORDER is not None:
        sys.settrace(None)
        _RECORDER.write()


# -- perturbing ---------------------------------------------------------------------------------------

def _stdlib_callables():
    import operator
    return [len, abs, max, sorted, str, int, dict, repr, operator.add, str.upper, divmod, isinstance]


def _variants(value):
    t = type(value)
    if value is None:
        return [0, "x", []]
    if t is bool:
        return [not value]
    if t is int:
        return [value + 1, value - 1, value * 2 + 3, -value if value else 7, value + 10]
    if t is float:
        return [value + 0.5, value - 1.25, value * 3.0, -value if value else 2.5] if math.isfinite(value) else [0.0]
    if t is str:
        bumped = value[:-1] + chr(ord(value[-1]) + 1) if value and ord(value[-1]) < 0x10FFFF else "a"
        out = [value[:-1], value + (value[-1:] or "a"), value[1:], value.upper() if value.upper() != value
               else value.lower() if value.lower() != value else value + " ", bumped, value * 2,
               value[: len(value) // 2], " " + value]
        if value and 1 < ord(value[0]) < 0x10FFFF:  # the first character one down and one up, early
            out[1:1] = [chr(ord(value[0]) - 1) + value[1:], chr(ord(value[0]) + 1) + value[1:]]
        if value.isdigit():
            out.insert(0, str(int(value) + 1))
        seen, unique = set(), []
        for v in out:
            if v != value and v not in seen:
                seen.add(v)
                unique.append(v)
        return unique
    if t is bytes:
        return [value[:-1], value + (value[-1:] or b"a"), value[1:]]
    if t is list:
        return [value[:-1], value + value[:1], value[::-1], value[1:]] if value else [[0]]
    if t is tuple:
        return [value[:-1], value + value[:1], value[::-1], value[1:]] if value else [(0,)]
    if t is dict and value:
        keys = list(value)
        dropped = {k: v for k, v in value.items() if k != keys[-1]}
        other = dict(value)
        extra = "x_" + str(keys[0]) if isinstance(keys[0], str) else (keys[0] + 1 if type(keys[0]) is int else None)
        if extra is not None and extra not in value:
            other[extra] = value[keys[0]]
        first_dropped = {k: v for k, v in value.items() if k != keys[0]}
        out = [dropped, other] if other != value else [dropped]
        return out + ([first_dropped] if len(keys) > 1 else [])
    if t is set or t is frozenset:
        items = sorted(value, key=repr)
        return [t(items[1:]), t(items + [len(items)])] if items else [t([0])]
    if t in (types.FunctionType, types.BuiltinFunctionType) or (t is type and value.__module__ == "builtins"):
        # another callable of the standard library (a function or a builtin type of another kind)
        return [f for f in _stdlib_callables() if f is not value][:6]
    return _stdlib_variants(value, t)


def _stdlib_variants(value, t):
    """Neighbours of standard-library values (dates, times, durations, decimals, fractions)."""
    try:
        if t is datetime.datetime:
            return [value + datetime.timedelta(days=1), value - datetime.timedelta(days=40, seconds=3661),
                    value.replace(year=value.year + 1) if value.year < 9999 else value.replace(year=2000),
                    value.replace(microsecond=(value.microsecond + 123457) % 1000000)]
        if t is datetime.date:
            return [value + datetime.timedelta(days=1), value - datetime.timedelta(days=40),
                    value.replace(year=value.year + 1) if value.year < 9999 else value.replace(year=2000)]
        if t is datetime.time:
            return [value.replace(hour=(value.hour + 1) % 24), value.replace(minute=(value.minute + 7) % 60),
                    value.replace(microsecond=(value.microsecond + 250000) % 1000000)]
        if t is datetime.timedelta:
            return [value + datetime.timedelta(seconds=1), value * 2, -value,
                    value + datetime.timedelta(days=3, microseconds=7)]
        if t is decimal.Decimal:
            return [value + 1, -value, value * 3, value + decimal.Decimal("0.25")] if value.is_finite() else []
        import fractions
        if t is fractions.Fraction:
            return [value + 1, -value, value / 3 if value else fractions.Fraction(1, 3)]
    except (ValueError, OverflowError, ArithmeticError):
        return []
    return []


_ATTRIBUTE_BAGS = ("argparse.Namespace", "types.SimpleNamespace")


def _project_object(value):
    """Whether ``value`` is an instance of a class outside the standard library and the builtins
    (a project's object, or a plain attribute bag such as ``argparse.Namespace``)."""
    t = type(value)
    module = getattr(t, "__module__", None)
    if type(module) is not str:
        return False
    if f"{module}.{getattr(t, '__qualname__', '')}" in _ATTRIBUTE_BAGS:
        return True
    return module != "builtins" and module.split(".")[0] not in sys.stdlib_module_names


def _object_state(value):
    """The instance ``__dict__`` of a project object (what is perturbed for its attributes), or None."""
    if not _project_object(value):
        return None
    state = getattr(value, "__dict__", None)
    return state if type(state) is dict else None


def _object_attributes(value):
    """``[(name, current value, setter)]`` of a project object's attributes: its ``__dict__`` items,
    then the values of its ``__slots__`` (set through the slot's own descriptor, so a class that
    refuses ``setattr`` is perturbed all the same), then its contents when it derives from ``list``
    or ``dict`` (``<items>``). ``setter(obj, new)`` sets one on any object of the class (a copy)."""
    if not _project_object(value):
        return []
    out = []
    state = _object_state(value)
    for attr, current in list((state or {}).items()):
        out.append((attr, current, lambda obj, new, attr=attr: obj.__dict__.__setitem__(attr, new)))
    seen = set(state or ())
    for klass in _mro(type(value)):
        try:
            namespace = _TYPE_DICT.__get__(klass, type)
        except Exception:
            continue
        for name, member in list(namespace.items()):
            if type(member) is not types.MemberDescriptorType or name in seen or name == "__weakref__":
                continue
            seen.add(name)
            try:
                current = member.__get__(value, klass)
            except Exception:
                continue
            out.append((name, current, lambda obj, new, member=member: member.__set__(obj, new)))
    if isinstance(value, list):
        out.append(("<items>", list(list.__iter__(value)),
                    lambda obj, new: list.__setitem__(obj, slice(None), list(new))))
    elif isinstance(value, dict):
        def refill(obj, new):
            dict.clear(obj)
            dict.update(obj, new)
        out.append(("<items>", dict(dict.items(value)), refill))
    return out


def _encoded(args):
    return base64.b64encode(dumps(args)).decode()


def perturb(calls, per_call):
    """Per recorded call: the call itself, then variants changing one argument at a time (interleaved
    over the arguments so every argument gets some), then variants of project objects' attributes
    (``self`` included), up to ``per_call`` variants."""
    out = []
    for index, call in enumerate(calls):
        out.append({"target": call["target"], "args": call["args"], "origin": f"test:{index}"})
        try:
            args = loads(base64.b64decode(call["args"]))
        except Exception:
            continue
        made = 0
        slots = [("pos", i) for i in range(len(args["pos"]))] + [("kw", k) for k in args["kw"]] + \
                [("var", i) for i in range(len(args["var"]))] + [("varkw", k) for k in args["varkw"]]
        method_like = bool(args["pos"]) and _project_object(args["pos"][0])
        per_slot = [[(kind, key, new) for new in _variants(args[kind][key])] for kind, key in slots
                    if not (kind == "pos" and key == 0 and method_like)]
        per_slot = [variants + ([(v[0], v[1], None)] if variants and args[v[0]][v[1]] is not None else [])
                    for variants in per_slot for v in variants[:1]]  # and None where a value was
        # Attributes of project objects among the arguments (``self`` first): one variant each, in turn.
        attr_slots = []
        for kind, key in slots:
            held = args[kind][key]
            for attr, value, setter in _object_attributes(held):
                variants = _variants(value)[:3]
                if variants:
                    attr_slots.append([(kind, key, (attr, setter), new) for new in variants])
            fields = getattr(type(held), "_fields", None)
            if isinstance(held, tuple) and type(fields) is tuple and _project_object(held):
                for field in fields:  # a named tuple's fields: a copy made by its own _replace
                    variants = _variants(getattr(held, field, None))[:3]
                    if type(field) is str and variants:
                        attr_slots.append([(kind, key, (field, None), new) for new in variants])
        interleaved = [slot[i] for i in range(max(map(len, per_slot), default=0)) for slot in per_slot
                       if i < len(slot)]
        attrs = [slot[i] for i in range(max(map(len, attr_slots), default=0)) for slot in attr_slots
                 if i < len(slot)]
        # Arguments first, attributes after; when both exist, up to a third of the budget goes to attributes.
        attr_take = min(len(attrs), per_call // 3) if interleaved else per_call
        chosen = [("arg", v) for v in interleaved[:per_call - attr_take]]
        chosen += [("attr", v) for v in attrs[:per_call - len(chosen)]]
        for what, variant in chosen:
            changed = loads(dumps(args))
            if what == "arg":
                kind, key, new = variant
                changed[kind][key] = new
                origin = f"perturbed:{index}:{kind}:{key}"
            else:
                kind, key, (attr, setter), new = variant
                target = changed[kind][key]
                try:
                    if setter is None:  # a named tuple's field: a new tuple
                        changed[kind][key] = target._replace(**{attr: new})
                    else:  # on the copy: the setter takes the object it sets
                        setter(target, new)
                except Exception:
                    continue
                origin = f"perturbed:{index}:{kind}:{key}.{attr}"
            try:
                encoded = _encoded(changed)
            except Exception:
                continue
            out.append({"target": call["target"], "args": encoded, "origin": origin})
            made += 1
    return out


def digests(spec):
    """``call_digest`` of every input of ``spec`` (on the clean tree, to compare with the tests' calls)."""
    return [call_digest(item["qualname"], base64.b64decode(item["args"])) for item in spec["inputs"]]


# -- replaying ----------------------------------------------------------------------------------------

class _OutOfTime(BaseException):
    pass


#: The functions that read a clock, as the C calls a profile function sees (however the code under
#: test imported them: ``from time import monotonic`` calls this same object).
_CLOCK_FUNCTIONS = tuple(getattr(time, name) for name in (
    "time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "process_time",
    "process_time_ns", "thread_time", "thread_time_ns", "clock_gettime", "clock_gettime_ns") if hasattr(time, name))
_CLOCK_IDS = frozenset(map(id, _CLOCK_FUNCTIONS))  # a lookup per C call the watch sees (they live as long as time)
_CLOCK_METHODS = ("now", "utcnow", "today")
#: What a watched replay saw the code read: a clock, or chance (the process-wide random generator
#: every ``random.*`` function draws from, seeded by the OS at start; ``os.urandom``, which
#: ``uuid4``, ``secrets`` and ``SystemRandom`` read).
_SEEN = {"clock": False, "chance": False}


def _reads_clock(func):
    """Whether a C function a profile event names reads a clock: one of :mod:`time`'s, or
    ``now``/``utcnow``/``today`` of :class:`datetime.date` or a subclass."""
    if id(func) in _CLOCK_IDS:
        return True
    owner = getattr(func, "__self__", None)
    return (isinstance(owner, type) and issubclass(owner, datetime.date)
            and getattr(func, "__name__", None) in _CLOCK_METHODS)


def _draws_chance(func):
    """Whether a C function a profile event names draws randomness no seed of the code's own fixed:
    the shared generator behind ``random.random``/``choice``/``shuffle``/... (a generator the code
    made with a seed is left alone), or the OS's."""
    if func is os.urandom:
        return True
    return getattr(func, "__self__", None) is random._inst and getattr(func, "__name__", None) in ("random", "getrandbits")


def _watch(frame, event, arg):
    """A profile function: notes a clock read or a random draw by the replayed code. Not a time
    stamp :mod:`logging` puts on a record (which no answer shows)."""
    if event != "c_call":
        return
    if not _SEEN["clock"] and _reads_clock(arg):
        module = frame.f_globals.get("__name__") if frame is not None else None
        if not (type(module) is str and (module == "logging" or module.startswith("logging."))):
            _SEEN["clock"] = True
    elif not _SEEN["chance"] and _draws_chance(arg):
        _SEEN["chance"] = True


def _on_alarm(signum, frame):
    raise _OutOfTime()


def _mangled(owner, name):
    """``name`` as a class body named ``owner`` stores it: a private ``__name`` becomes
    ``_Owner__name`` (what ``__qualname__`` does not show), dunders and public names stay."""
    if name.startswith("__") and not name.endswith("__") and owner.lstrip("_"):
        return "_" + owner.lstrip("_") + name
    return name


def _attribute_name(obj, parts, i):
    """The name under which ``obj`` (what ``parts[:i]`` resolved to) holds ``parts[i]``: mangled
    when ``obj`` is the class ``parts[i - 1]``."""
    return _mangled(parts[i - 1], parts[i]) if i and isinstance(obj, type) else parts[i]


def _resolve(module_name, qualname):
    import importlib
    obj = importlib.import_module(module_name)
    parts = qualname.split(".")
    for i in range(len(parts) - 1):
        obj = getattr(obj, _attribute_name(obj, parts, i))
    last = _attribute_name(obj, parts, len(parts) - 1)
    raw = None
    if isinstance(obj, type):
        for klass in _mro(obj):
            namespace = _TYPE_DICT.__get__(klass, type)
            if last in namespace:
                raw = namespace[last]
                break
    if raw is None:
        raw = getattr(obj, last)
    if isinstance(raw, (staticmethod, classmethod)):
        raw = raw.__func__
    elif isinstance(raw, property):
        raw = raw.fget
    return raw


def replay_one(item, seconds, watch=False, entry=None):
    """One input's canonical form; with ``watch``, :data:`_SEEN` says afterwards whether unpickling
    it or the call read a clock or drew chance (a profile function watches, so the call runs slower).
    ``entry``, a one-item list, receives the arguments' canonical form just before the call (left
    None where the call did not run)."""
    _SEEN["clock"] = _SEEN["chance"] = False
    signal.setitimer(signal.ITIMER_REAL, seconds)
    if watch:
        sys.setprofile(_watch)
    try:
        try:
            args = loads(base64.b64decode(item["args"]))
            func = _resolve(item["module"], item["qualname"])
        except _OutOfTime:
            raise
        except BaseException as exc:
            return ["unreplayable", _class_name(type(exc))]
        if entry is not None:
            entry[0] = canonical([args["pos"], args["var"], args["kw"], args["varkw"]])
        try:
            result = func(*args["pos"], *args["var"], **args["kw"], **args["varkw"])
            if type(result) is types.GeneratorType:
                items = []
                for produced in result:
                    items.append(canonical(produced))
                    if len(items) >= GEN_ITEMS:
                        break
                result_form = ["generator", items]
            else:
                result_form = canonical(result)
            error = None
        except _OutOfTime:
            raise
        except BaseException as exc:
            result_form, error = None, _class_name(type(exc))
        after = canonical([args["pos"], args["var"], args["kw"], args["varkw"]])
        return {"return": result_form, "raises": error, "args_after": after}
    except _OutOfTime:
        return ["timeout"]
    finally:
        if watch:
            sys.setprofile(None)
        signal.setitimer(signal.ITIMER_REAL, 0)


def replay(spec):
    CANON_VERSION[0] = int(spec.get("canonical", 1))
    sys.path[:] = [p for p in spec["sys_path"]] + [p for p in sys.path[1:] if "site-packages" not in p
                                                   and "dist-packages" not in p]
    saved = os.dup(1)
    os.dup2(2, 1)  # the code under test prints to stderr (discarded); only this line reaches stdout
    out = os.fdopen(saved, "w")
    import importlib
    for module in sorted({item["module"] for item in spec["inputs"]}):
        try:  # imports are not the calls being timed (a failed one shows in every call of its module)
            importlib.import_module(module)
        except BaseException:
            pass
    signal.signal(signal.SIGALRM, _on_alarm)
    results = []
    watch = spec.get("watch") is True
    state = spec.get("state") is True
    for item in spec["inputs"]:
        entry = [None] if state else None
        form = replay_one(item, float(spec.get("seconds", CALL_SECONDS)), watch, entry)
        seen = {kind: True for kind, hit in _SEEN.items() if watch and hit}
        result = {"id": item["id"], **answer_of(form), **seen}
        if state and entry[0] is not None and type(form) is dict:
            result["s"], more = state_change(entry[0], form["args_after"])
            if more:
                result["s_more"] = True
        results.append(result)
    out.write(MARKER + json.dumps({"version": 1, "results": results}, separators=(",", ":")) + "\n")
    out.flush()


def main(argv):
    mode = argv[1]
    if mode == "perturb":
        with open(argv[2]) as fh:
            spec = json.load(fh)
        sys.path[:] = list(spec["sys_path"]) + sys.path[1:]
        inputs = perturb(spec["calls"], int(spec["per_call"]))
        with open(argv[3], "w") as fh:
            json.dump(inputs, fh)
    elif mode == "replay":
        with open(argv[2]) as fh:
            spec = json.load(fh)
        replay(spec)
    elif mode == "digests":
        with open(argv[2]) as fh:
            spec = json.load(fh)
        sys.path[:] = list(spec["sys_path"]) + sys.path[1:]
        made = digests(spec)
        with open(argv[3], "w") as fh:
            json.dump(made, fh)
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv)
