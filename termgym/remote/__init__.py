"""Environments whose sandbox runs on another machine: :class:`RayEnv`, a TerminalEnv in a Ray actor.

``gym.make("termgym/SweSynth-v0", ray={"resources": {"termgym_sandbox": 1}})`` makes one: the
episode (task setup, every command, the grade) runs in an actor on a node of the Ray cluster that
offers the resource; the caller keeps the Gymnasium and async interface of a local env. See
:mod:`termgym.remote.ray_env` and docs/cluster.md.
"""

from termgym.remote.ray_env import RAY_DEFAULTS, RayEnv, SandboxLost, ray_options

__all__ = ["RAY_DEFAULTS", "RayEnv", "SandboxLost", "ray_options"]
