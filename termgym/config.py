"""What a :class:`~termgym.env.TerminalEnv` is built from: an :class:`EnvConfig` and suite options.

The two never mix inside the env. ``gym.make("termgym/SweSynth-v0", backend="docker",
split="test", path="my-suite")`` still takes them side by side, as Gymnasium passes every keyword
to the constructor: :func:`split_options` is the one place that tells them apart, by the fields of
:class:`EnvConfig`. What is not an env field goes to the suite factory, and a key the factory does
not take is an error naming it and listing both sets of options (:func:`resolve_suite`).
"""

from __future__ import annotations

import dataclasses
import inspect
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from termgym.imports import is_import_path, load_object
from termgym.sandbox.base import check_cpus
from termgym.tasks.base import TaskSuite

if TYPE_CHECKING:
    from termgym.protocols.base import Protocol

MODES = ("persistent", "stateless")


@dataclass(frozen=True)
class EnvConfig:
    """How episodes run, whatever the tasks are. Frozen: build a new one with :meth:`replace`.

    Attributes:
        backend: ``"local"`` (bubblewrap) or ``"docker"``.
        protocol: ``"minisweagent"``, ``"toolcall"``, ``"terminus"``, a ``"module:Class"`` or an instance.
        max_steps: steps (assistant messages) before the episode is truncated.
        time_limit: wall-clock seconds for the agent phase before it is truncated (``None``: none).
        command_timeout: per-command timeout in seconds (``None``: the task's ``Limits``).
        max_context_chars: truncate once the chat history exceeds this many characters.
        cpus: the agent's sandbox's CPU quota in CPUs (``None``: the task's ``Limits.cpus``, 1 CPU
            unless the task asks otherwise). Grading sandboxes keep the task's own quota, so a grade
            does not depend on this option.
        mode: ``"persistent"`` shell or ``"stateless"`` (a fresh subshell per command).
        split: which split of the suite ``reset`` draws from (``None``: the suite's default).
        sandbox_options: extra constructor arguments for the backend's sandbox.
        protocol_options: extra constructor arguments for the protocol (when named, not an instance).
    """

    backend: str = "local"
    protocol: str | Protocol = "minisweagent"
    max_steps: int = 50
    time_limit: float | None = None
    command_timeout: float | None = None
    max_context_chars: int | None = None
    cpus: float | None = None
    mode: str = "persistent"
    split: str | None = None
    sandbox_options: Mapping[str, Any] = field(default_factory=dict)
    protocol_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.backend, str) or not self.backend:
            raise ValueError(f"EnvConfig.backend must be a backend name like 'local' or 'docker', not {self.backend!r}")
        if isinstance(self.max_steps, bool) or not isinstance(self.max_steps, numbers.Integral) or self.max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {self.max_steps!r}")
        object.__setattr__(self, "max_steps", int(self.max_steps))
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        for name in ("time_limit", "command_timeout", "max_context_chars"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real) or value <= 0):
                raise ValueError(f"{name} must be a positive number or None, got {value!r}")
        check_cpus(self.cpus, "EnvConfig.cpus")
        for name in ("sandbox_options", "protocol_options"):
            value = getattr(self, name)
            if value is None:
                value = {}
            if not isinstance(value, Mapping):
                raise TypeError(f"{name} must be a mapping of keyword arguments, not {type(value).__name__}")
            # a private copy: the caller's dict changing later must not change a frozen config
            object.__setattr__(self, name, dict(value))

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The option names that belong to the env (everything else in ``gym.make`` is a suite option)."""
        return tuple(f.name for f in dataclasses.fields(cls))

    def replace(self, **changes: Any) -> EnvConfig:
        """A copy with ``changes`` applied (validated like a new config)."""
        unknown = sorted(set(changes) - set(self.field_names()))
        if unknown:
            raise TypeError(f"EnvConfig has no option(s) {', '.join(unknown)}; it has: {', '.join(self.field_names())}")
        return dataclasses.replace(self, **changes)


def split_options(options: Mapping[str, Any], config: EnvConfig | None = None,
                  suite_options: Mapping[str, Any] | None = None) -> tuple[EnvConfig, dict[str, Any]]:
    """Split mixed keyword options into ``(env config, suite options)``.

    Keys named like an :class:`EnvConfig` field override ``config`` (default: ``EnvConfig()``);
    the others are suite options, added to ``suite_options`` (and to a ``"suite_options"`` dict
    among ``options``, as ``register_suite`` defaults may carry one). A key given twice is an error.
    """
    options = dict(options)
    explicit = [dict(suite_options or {}), dict(options.pop("suite_options", None) or {})]
    env_keys = set(EnvConfig.field_names())
    env_part = {k: v for k, v in options.items() if k in env_keys}
    loose = {k: v for k, v in options.items() if k not in env_keys}
    merged: dict[str, Any] = {}
    for part in (*explicit, loose):
        twice = sorted(set(merged) & set(part))
        if twice:
            raise TypeError(f"suite option(s) {', '.join(twice)} given twice (in suite_options and as keywords)")
        merged.update(part)
    base = config if config is not None else EnvConfig()
    if not isinstance(base, EnvConfig):
        raise TypeError(f"config must be an EnvConfig, not {type(base).__name__}")
    return (base.replace(**env_part) if env_part else base), merged


def resolve_suite(suite: Any, **options: Any) -> TaskSuite:
    """A suite from an instance, a factory, or an import path ``"module:attr"`` to either.

    ``options`` go to the factory. One it does not take is a ``TypeError`` naming the key, the
    options the suite takes and the env options (so a misspelt ``max_step`` says what was meant).
    """
    if isinstance(suite, str):
        if not is_import_path(suite):
            raise ValueError(f"suite must be a TaskSuite, a callable or 'module:attr', not {suite!r}")
        suite = load_object(suite, what="suite")
    if isinstance(suite, TaskSuite):
        if options:
            raise TypeError(f"suite options {sorted(options)} given, but the suite is already built")
        return suite
    if callable(suite):
        _check_suite_options(suite, options)
        try:
            built = suite(**options)
        except TypeError as exc:  # a factory taking **options passed them on to a class that refused one
            if "unexpected keyword argument" not in str(exc):
                raise
            raise TypeError(f"{exc} (it is not an env option either: {', '.join(EnvConfig.field_names())})") from exc
        if not isinstance(built, TaskSuite):
            raise TypeError(f"suite factory {suite!r} returned {type(built).__name__}, not a TaskSuite")
        return built
    raise TypeError(f"cannot make a task suite from {suite!r}")


def suite_option_names(factory: Any) -> tuple[str, ...] | None:
    """The keyword options a suite factory takes, or ``None`` when it takes any (``**options``)."""
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable: let the call itself complain
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return tuple(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


def _check_suite_options(factory: Any, options: Mapping[str, Any]) -> None:
    accepted = suite_option_names(factory)
    if accepted is None:
        return
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        name = getattr(factory, "__qualname__", repr(factory))
        raise TypeError(f"unknown option(s) {', '.join(map(repr, unknown))}: not an env option "
                        f"({', '.join(EnvConfig.field_names())}) nor an option of suite {name} "
                        f"({', '.join(accepted) or 'none'})")


__all__ = ["MODES", "EnvConfig", "resolve_suite", "split_options", "suite_option_names"]
