"""``RayEnv``: a :class:`~termgym.env.TerminalEnv` whose episodes run in a Ray actor on a sandbox node.

.. code-block:: python

    env = gym.make("termgym/SweSynth-v0", ray={"resources": {"termgym_sandbox": 1}})
    obs, info = env.reset(seed=0)           # the actor starts on a node offering termgym_sandbox
    obs, reward, terminated, truncated, info = env.step(message)

Why: on a GPU node every sandbox of an RL step competes with the trainer for the node's CPUs. Nodes
started with ``ray start --resources '{"termgym_sandbox": N}'`` take the sandboxes instead; each
actor asks for one unit, so ``N`` is that node's limit of concurrent sandboxes (docs/cluster.md).

What runs where. The actor holds a plain ``TerminalEnv`` built from the same ``gym.make`` options
(the suite is resolved on the sandbox node, from its own termgym install): ``reset``, ``step`` and
the grade run there, and their return values come back unchanged, so observations, rewards and infos
equal a local run's. Ray places the actor and says when it died; ``reset`` and ``step`` travel over
one direct TCP connection to it (:mod:`termgym.remote.channel`: a Ray call per step cost ten times
more). The driver's ``RayEnv`` is a TerminalEnv too (``terminal_env`` and
``get_wrapper_attr`` work): it builds the suite and protocol locally, never a sandbox, and mirrors
what readers use after each call: ``messages``, ``steps``, ``done``, ``commands``, ``last_exec``,
``grade`` and ``task`` (loaded from the local suite when first read). ``sandbox`` is ``None`` on the
driver: code that reaches into the sandbox (a CLI agent's ``prepare_env``, ProcessReward's workspace
snapshots, an oracle submission read from the sandbox) does not work through it; use
:meth:`RayEnv.oracle_actions` for the oracle.

A lost actor (its node died, its worker crashed: the connection closes, or Ray reports it dead while
a long call waits) raises :class:`SandboxLost` from the call that found it, a
:class:`~termgym.sandbox.base.SandboxError`: the agent loop reports it as an
:class:`~termgym.agents.loop.EnvFailure` and the evaluation harness retries the episode with a fresh
env, whose actor Ray places on a node that is still there. An exception the env itself raised (a bad action, a step after the end) comes
back as that exception, as it would locally.

The ``ray`` option (``True`` for the defaults, or a dict over :data:`RAY_DEFAULTS`):
``resources`` the actor asks for; ``num_cpus`` it reserves (default 0: the resource is the
limit); ``memory`` in bytes (``None``: none reserved); ``runtime_env`` for the actor (e.g. a
``PYTHONPATH`` where a custom suite lives); ``address`` for ``ray.init`` when this process is not
connected yet (default ``"auto"``); ``start_timeout`` seconds to wait for a free sandbox slot
before failing (``None``: wait as long as it takes).
"""

from __future__ import annotations

import os
import select
import socket
import time
from collections.abc import Mapping
from typing import Any, SupportsFloat

from termgym.config import EnvConfig
from termgym.env import TerminalEnv, Truncate
from termgym.remote.channel import connect, recv_frame, send_frame, serve
from termgym.sandbox.base import SandboxError
from termgym.tasks.base import Task

#: The ``ray`` option's keys and their defaults.
RAY_DEFAULTS: dict[str, Any] = {
    "resources": {"termgym_sandbox": 1},
    "num_cpus": 0,
    "memory": None,
    "runtime_env": None,
    "address": "auto",
    "start_timeout": 600.0,
}


#: What the env calls over its direct channel (everything else goes through Ray).
CHANNEL_METHODS = frozenset({"reset", "step", "oracle_actions"})
#: While a call runs this long without a reply, ask Ray whether the actor is still alive.
LIVENESS_SECONDS = 2.0


class SandboxLost(SandboxError):
    """The Ray actor that ran this episode's sandbox is gone (its node left the cluster, its worker
    died): the episode cannot continue. Start it again with a fresh env; the harness does so itself."""


def ray_options(value: bool | Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``ray`` option with defaults filled in; unknown keys and bad values raise naming them."""
    if value is True or value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise TypeError(f"the ray option is True or a dict of {', '.join(RAY_DEFAULTS)}, not {value!r}")
    unknown = sorted(set(value) - set(RAY_DEFAULTS))
    if unknown:
        raise TypeError(f"unknown ray option(s) {', '.join(map(repr, unknown))}; known: {', '.join(RAY_DEFAULTS)}")
    options = {**RAY_DEFAULTS, **value}
    resources = options["resources"]
    if not isinstance(resources, Mapping) or not all(
            isinstance(k, str) and isinstance(v, (int, float)) and v > 0 for k, v in resources.items()):
        raise ValueError(f"ray resources must map names to positive amounts, e.g. {{'termgym_sandbox': 1}}; "
                         f"got {resources!r}")
    options["resources"] = dict(resources)
    timeout = options["start_timeout"]
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ValueError(f"ray start_timeout must be positive seconds or None, got {timeout!r}")
    return options


class EnvHost:
    """The actor's side: a plain TerminalEnv, plus what the driver's mirror needs after each call.

    Each call returns the env's own return values untouched and, beside them, the *new* history
    messages and commands (not the whole history again: a step's reply stays small).
    """

    def __init__(self, make_kwargs: dict[str, Any]) -> None:
        self.env = TerminalEnv(**make_kwargs)
        self._sent_messages = 0
        self._sent_commands = 0

    def where(self) -> dict[str, Any]:
        """Where this actor runs: Ray's node id, the host name and the pid (also a liveness probe)."""
        import ray

        return {"node_id": ray.get_runtime_context().get_node_id(), "host": socket.gethostname(),
                "pid": os.getpid()}

    def open_channel(self) -> tuple[str, int, bytes]:
        """Listen for the env's direct connection (:mod:`termgym.remote.channel`): host, port, token."""
        import ray

        return serve(ray.util.get_node_ip_address(), lambda method, args: getattr(self, method)(*args),
                     CHANNEL_METHODS)

    def reset(self, seed: int | None, options: dict[str, Any] | None) -> tuple[Any, ...]:
        """``env.reset``'s ``(observation, info)`` and the whole new history for the mirror."""
        self._sent_messages = self._sent_commands = 0
        observation, info = self.env.reset(seed=seed, options=options)
        return observation, info, self._mirror()

    def step(self, action: Any) -> tuple[Any, ...]:
        """``env.step``'s five values, and what the step added to the history for the mirror."""
        return self.env.step(action), self._mirror()

    def oracle_actions(self, submission: str | None) -> list[Any]:
        """:func:`termgym.env.oracle_actions` of the running episode, with the sandbox at hand."""
        from termgym.env import oracle_actions

        return oracle_actions(self.env, submission)

    def close(self) -> None:
        """Close the env (and the running episode's sandbox)."""
        self.env.close()

    def _mirror(self) -> dict[str, Any]:
        env = self.env
        messages, commands = env.messages[self._sent_messages:], env.commands[self._sent_commands:]
        self._sent_messages, self._sent_commands = len(env.messages), len(env.commands)
        return {"messages": messages, "commands": commands, "steps": env.steps, "done": env.done,
                "last_exec": env.last_exec, "grade": env.grade,
                "task_id": env.task.task_id if env.task is not None else None}


_ACTOR_CLASS: Any = None


def _actor_class() -> Any:
    global _ACTOR_CLASS
    if _ACTOR_CLASS is None:
        try:
            import ray
        except ImportError:
            raise ImportError("the ray option needs Ray on the driver and the sandbox nodes: "
                              "pip install 'termgym[eval]' (or 'ray[default]')") from None
        # No restarts and no task retries: a restarted actor would have lost the sandbox's state,
        # and a step retried on it would run the agent's command twice.
        _ACTOR_CLASS = ray.remote(max_restarts=0, max_task_retries=0)(EnvHost)
    return _ACTOR_CLASS


class RayEnv(TerminalEnv):
    """A TerminalEnv whose episodes run in a Ray actor (see the module docstring).

    Args:
        suite, config, suite_options, render_mode, **options: as :class:`~termgym.env.TerminalEnv`;
            the actor builds its env from the same values.
        ray: ``True`` or a dict of :data:`RAY_DEFAULTS` keys (resources, num_cpus, memory,
            runtime_env, address, start_timeout).

    ``remote_node`` is where the current actor runs (``node_id``, ``host``, ``pid``), ``None``
    before the first ``reset``. One actor serves every episode of the env until ``close``; one
    found lost is replaced at the next ``reset``.
    """

    def __init__(
        self,
        suite: Any,
        config: EnvConfig | None = None,
        *,
        suite_options: Mapping[str, Any] | None = None,
        render_mode: str | None = None,
        ray: bool | Mapping[str, Any] | None = True,
        **options: Any,
    ) -> None:
        super().__init__(suite, config, suite_options=suite_options, render_mode=render_mode, **options)
        self.ray_options = ray_options(ray)
        # The actor resolves the suite from what the caller gave (an import path resolves against
        # the sandbox node's own install), with this env's validated config.
        self._make_kwargs = {"suite": suite, "config": self.config, "suite_options": dict(self.suite_options)}
        self._actor: Any = None
        self._channel: socket.socket | None = None
        self.remote_node: dict[str, Any] | None = None

    # The task is loaded locally only when someone reads it (an agent, the recorder).
    @property
    def task(self) -> Task | None:
        if self._task is None and self._task_id is not None:
            self._task = self.suite.load(self._task_id)
        return self._task

    @task.setter
    def task(self, value: Task | None) -> None:
        self._task = value
        self._task_id = value.task_id if value is not None else None

    # -- gymnasium API ------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """As :meth:`TerminalEnv.reset`, in the actor (started here on first use, or after a loss)."""
        super(TerminalEnv, self).reset(seed=seed)  # gym.Env's: seeds the local np_random; the actor draws the task
        self._ensure_actor()
        observation, info, mirror = self._call("reset", seed, options)
        self.messages, self.commands, self.task = [], [], None
        self._apply(mirror)
        self._started_at = time.monotonic()
        return observation, info

    def step(self, action: str | dict[str, Any] | Truncate) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        """As :meth:`TerminalEnv.step`, in the actor; raises :class:`SandboxLost` if the actor is gone."""
        if self.done or self._actor is None:
            raise RuntimeError("the episode is over (or never started): call reset() first")
        (observation, reward, terminated, truncated, info), mirror = self._call("step", action)
        self._apply(mirror)
        if self.render_mode == "human":
            print(self.render_turn(-2) + "\n" + self.render_turn(-1))
        return observation, reward, terminated, truncated, info

    def close(self) -> None:
        """End the episode and the actor (its sandbox closes with it)."""
        actor, self._actor = self._actor, None
        self.done = True
        self._close_channel()
        if actor is not None:
            import ray

            try:
                ray.get(actor.close.remote(), timeout=60)
            except Exception:  # a lost actor has nothing left to close
                pass
            try:
                ray.kill(actor)
            except Exception:
                pass

    def oracle_actions(self, submission: str | None = None) -> list[str | dict[str, Any]]:
        """:func:`termgym.env.oracle_actions` run in the actor, where the sandbox is."""
        if self._actor is None:
            raise RuntimeError("call reset() first")
        return self._call("oracle_actions", submission)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    # -- helpers ----------------------------------------------------------------------------------

    def _end_episode(self) -> None:  # TerminalEnv's: nothing local to close here
        self.done = True

    def _ensure_actor(self) -> Any:
        if self._actor is not None:
            return self._actor
        import ray

        opts = self.ray_options
        if not ray.is_initialized():
            ray.init(address=opts["address"], configure_logging=False, log_to_driver=False)
        actor = _actor_class().options(
            num_cpus=opts["num_cpus"], resources=opts["resources"], memory=opts["memory"],
            runtime_env=opts["runtime_env"]).remote(self._make_kwargs)
        try:
            self.remote_node = ray.get(actor.where.remote(), timeout=opts["start_timeout"])
            host, port, token = ray.get(actor.open_channel.remote())
        except ray.exceptions.GetTimeoutError:
            ray.kill(actor)
            offered = {k: v for k, v in ray.cluster_resources().items() if k in opts["resources"]}
            raise SandboxError(
                f"no Ray node gave this env's actor {opts['resources']} within {opts['start_timeout']:g} s "
                f"(the cluster offers {offered or 'none of it'}); start sandbox nodes with "
                "ray start --resources '{\"termgym_sandbox\": N}' (docs/cluster.md), or raise ray.start_timeout"
            ) from None
        except ray.exceptions.RayError as exc:
            raise self._lost(exc, "start", actor) from exc
        try:
            self._channel = connect(host, port, token)
        except OSError as exc:
            raise self._lost(exc, "start", actor) from exc
        self._actor = actor
        return actor

    def _call(self, method: str, *args: Any) -> Any:
        """``EnvHost.<method>(*args)`` over the channel; the env's own exception is raised as it is."""
        if self._channel is None:
            raise RuntimeError("call reset() first")
        try:
            send_frame(self._channel, (method, args))
            status, value = self._receive(method)
        except (OSError, EOFError) as exc:  # the actor's process is gone with its end of the channel
            raise self._lost(exc, method) from exc
        if status == "error":
            raise value
        return value

    def _receive(self, during: str) -> Any:
        assert self._channel is not None
        while True:
            ready, _, _ = select.select([self._channel], [], [], LIVENESS_SECONDS)
            if ready:
                return recv_frame(self._channel)
            # A long call (grading runs the test suite): is the actor still there? Ray knows when a
            # node is declared dead even if this connection never hears of it.
            import ray

            try:
                ray.get(self._actor.where.remote(), timeout=LIVENESS_SECONDS * 5)
            except ray.exceptions.GetTimeoutError:
                continue  # slow to answer, not known dead: keep waiting
            except ray.exceptions.RayError as exc:
                raise self._lost(exc, during) from exc

    def _close_channel(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            try:
                channel.close()
            except OSError:
                pass

    def _lost(self, exc: BaseException, during: str, actor: Any = None) -> SandboxLost:
        node = self.remote_node or {}
        actor, self._actor = actor or self._actor, None
        self._close_channel()
        self.done = True
        if actor is not None:  # gone, or unreachable: either way it must not keep its slot
            import ray

            try:
                ray.kill(actor)
            except Exception:
                pass
        where = f"node {node['node_id'][:12]} on {node['host']}" if node else "its node"
        return SandboxLost(f"env.{during}: the Ray actor holding this episode's sandbox ({where}) is gone: "
                           f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}. The episode "
                           "cannot continue; start it again with a fresh env (termgym eval retries it as an "
                           "infrastructure failure, on a node that is still there)")

    def _apply(self, mirror: dict[str, Any]) -> None:
        self.messages.extend(mirror["messages"])
        self.commands.extend(mirror["commands"])
        self.steps, self.done = mirror["steps"], mirror["done"]
        self.last_exec, self.grade = mirror["last_exec"], mirror["grade"]
        if mirror["task_id"] != self._task_id:
            self._task, self._task_id = None, mirror["task_id"]

