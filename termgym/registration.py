"""Registering termgym environments with Gymnasium.

Every termgym id points at :func:`make_terminal_env`, which builds a :class:`termgym.env.TerminalEnv`
(or, given the ``ray`` option, a :class:`termgym.remote.RayEnv`, whose episodes run on a sandbox
node of a Ray cluster), with a ``suite`` given as an import path (``"package.module:factory"``) so
that ``gym.make``'s kwargs stay picklable for async vector envs. ``register_suite`` is how users
add their own ids.
"""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym

#: The entry point of every termgym id, and the class it builds unless told to run remotely.
ENTRY_POINT = "termgym.registration:make_terminal_env"
ENV_CLASS = "termgym.env:TerminalEnv"

#: The built-in ids and the suite factories behind them (called with the suite options).
BUILTIN_ENVS: dict[str, dict[str, Any]] = {
    "termgym/SweSynth-v0": {"suite": "termgym.tasks.swesynth:default_suite", "max_steps": 50},
    "termgym/LiveWeb-v0": {"suite": "termgym.tasks.liveweb.suite:LiveWebSuite", "max_steps": 30},
    "termgym/Harbor-v0": {"suite": "termgym.tasks.harbor.suite:HarborSuite", "max_steps": 50},
}


def make_terminal_env(**kwargs: Any) -> gym.Env:
    """``gym.make``'s constructor for termgym ids: a TerminalEnv of ``kwargs``.

    With ``ray=True`` or ``ray={...}`` (resources, num_cpus…; see :mod:`termgym.remote.ray_env`)
    it is a :class:`~termgym.remote.RayEnv`: the same env, run in a Ray actor on a node offering
    the resource, so configuration alone (``env_kwargs`` of ``termgym eval`` or the veRL agent
    loop) moves the sandboxes off the caller's machine.
    """
    ray = kwargs.pop("ray", None)
    if ray is not None and ray is not False:
        from termgym.remote import RayEnv

        return RayEnv(ray=ray, **kwargs)
    from termgym.env import TerminalEnv

    return TerminalEnv(**kwargs)


# What gym.make reads off a creator to check ``render_mode`` (TerminalEnv's own; kept literal so that
# registering ids does not import the env).
make_terminal_env.metadata = {"render_modes": ["ansi", "human"]}  # type: ignore[attr-defined]


def register_suite(env_id: str, suite: Any, **env_kwargs: Any) -> None:
    """Register ``env_id`` so ``gym.make(env_id)`` builds a TerminalEnv over ``suite``.

    ``suite`` is a :class:`~termgym.tasks.base.TaskSuite`, a callable returning one, or an import
    path ``"module:attr"`` to either. ``env_kwargs`` are defaults that ``gym.make`` arguments
    override: :class:`~termgym.config.EnvConfig` fields (``max_steps``, ``backend``,
    ``protocol``…), ``suite_options`` (a dict for the suite factory), or suite options by name.

    Registering an id that is already registered replaces it with a ``UserWarning`` saying so
    (re-running a notebook cell is fine; two plugins claiming one id is worth knowing).
    """
    if env_id in gym.registry:
        previous = gym.registry[env_id]
        was = ENV_CLASS if previous.entry_point == ENTRY_POINT else previous.entry_point
        warnings.warn(f"register_suite: replacing the registered environment {env_id!r} "
                      f"(was {was} with {previous.kwargs.get('suite', '?')!r})",
                      UserWarning, stacklevel=2)
        del gym.registry[env_id]
    gym.register(id=env_id, entry_point=ENTRY_POINT, kwargs={"suite": suite, **env_kwargs})


def register_builtin_envs() -> None:
    for env_id, kwargs in BUILTIN_ENVS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=ENTRY_POINT, kwargs=dict(kwargs))


def termgym_env_ids() -> list[str]:
    """All registered ids that build a TerminalEnv (built-in and user-registered)."""
    return sorted(
        env_id for env_id, spec in gym.registry.items() if spec.entry_point in (ENTRY_POINT, ENV_CLASS)
    )
