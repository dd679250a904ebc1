"""``TerminalEnv``: the one environment class behind every termgym id.

It composes a task suite (what to do), a sandbox backend (where commands run), a protocol (how
assistant messages become commands and results become text) and limits (steps, wall clock,
context). Observations are text and actions are assistant messages (text or an OpenAI message
dict); the reward is the grade's score on the last step and 0 before it (process rewards are a
wrapper: :class:`termgym.wrappers.rewards.ProcessReward`).

Everything goes through ``reset`` and ``step``, so every wrapper sees every episode end:

* an episode cut from outside (a trainer's token budget, a cut turn, a driver's own limit) ends
  with ``env.step(Truncate(reason))``, a last step that grades the episode (:class:`Truncate`);
* token data (ids, log-probabilities, usage) rides on the action message under ``"extra"`` and
  comes back in the step's ``info["extra"]``; the env keeps it out of the chat history;
* async code awaits :func:`areset` / :func:`astep` / :func:`aclose` on the *wrapped* env;
* code that must read the running task, sandbox or history uses ``env.get_wrapper_attr(name)``
  or :func:`terminal_env` (read only: driving the base env would skip the wrappers).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium.vector import utils as vector_utils

from termgym.config import EnvConfig, resolve_suite, split_options
from termgym.encodable import map_strings
from termgym.protocols import make_protocol
from termgym.sandbox import ExecResult, FreshSandboxes, Sandbox, make_sandbox, run_blocking
from termgym.sandbox.base import in_sandbox_terms
from termgym.tasks.base import Grade, GradingContext, Task


class TextSpace(gym.Space[str]):
    """Any Unicode string up to ``max_length`` characters (Gymnasium's ``Text`` needs a fixed charset).

    Vector envs batch it as a tuple of strings; async vector envs pass it through shared memory as
    Unicode code points (see the registrations below).
    """

    def __init__(self, max_length: int = 200_000, seed: int | None = None) -> None:
        self.max_length = max_length
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        length = int(self.np_random.integers(1, 64))
        codes = self.np_random.integers(32, 127, size=length)
        return "".join(map(chr, codes))

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"TextSpace(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TextSpace) and other.max_length == self.max_length


@vector_utils.create_empty_array.register(TextSpace)
def _empty_text(space: TextSpace, n: int = 1, fn: Any = None) -> tuple[str, ...]:
    return ("",) * n


@vector_utils.create_shared_memory.register(TextSpace)
def _text_shared_memory(space: TextSpace, n: int = 1, ctx: Any = None) -> Any:
    import multiprocessing

    return (ctx or multiprocessing).Array(np.dtype(np.int32).char, n * space.max_length)


@vector_utils.read_from_shared_memory.register(TextSpace)
def _read_text(space: TextSpace, shared_memory: Any, n: int = 1) -> tuple[str, ...]:
    data = np.frombuffer(shared_memory.get_obj(), dtype=np.int32).reshape((n, space.max_length))
    return tuple("".join(map(chr, row[row > 0])) for row in data)  # 0 pads (NULs never reach observations)


@vector_utils.write_to_shared_memory.register(TextSpace)
def _write_text(space: TextSpace, index: int, value: str, shared_memory: Any) -> None:
    codes = np.frombuffer(value[: space.max_length].encode("utf-32-le"), dtype=np.int32)
    destination = np.frombuffer(shared_memory.get_obj(), dtype=np.int32)
    row = destination[index * space.max_length : (index + 1) * space.max_length]
    row[:] = 0
    row[: len(codes)] = codes


#: The key of an action message that carries token data (``token_ids``, ``logprobs``, ``usage``...)
#: past the env: it is taken off the message and returned as the step's ``info["extra"]``.
EXTRA_KEY = "extra"


@dataclass(frozen=True)
class Truncate:
    """The action that ends the running episode from outside: ``env.step(Truncate("context_limit"))``.

    For a driver that stops at a limit the env does not know (a trainer's token budget, a turn cut
    by ``max_tokens``, a loop's turn cap). The step records ``message`` (the cut turn's text; ``""``
    between turns records nothing) as the assistant's last turn without acting on it
    (``info["action"]["kind"]`` is ``"cut"``), grades the episode and returns ``truncated=True``
    with ``info["end_reason"] == reason``. It is an ordinary action, so every wrapper sees it and
    settles the episode as it settles any last step (process rewards' outcome, the recorder's record).
    ``message`` may be a message dict carrying token data under ``"extra"``, as any action.
    """

    reason: str
    message: str | dict[str, Any] = ""

    def __post_init__(self) -> None:
        if not isinstance(self.reason, str) or not self.reason:
            raise ValueError(f"Truncate needs a non-empty reason string, got {self.reason!r}")
        if not isinstance(self.message, (str, dict)):
            raise TypeError(f"Truncate.message must be text or a message dict, not {type(self.message).__name__}")


def split_extra(action: Any) -> tuple[Any, dict[str, Any]]:
    """``(message, extra)``: an action message without its ``"extra"`` token data, and that data.

    A :class:`Truncate` keeps its reason; its message is split the same way.
    """
    if isinstance(action, Truncate):
        message, extra = split_extra(action.message)
        return Truncate(action.reason, message), extra
    if isinstance(action, Mapping) and EXTRA_KEY in action:
        extra = action[EXTRA_KEY]
        if extra is not None and not isinstance(extra, Mapping):
            raise TypeError(f"an action's {EXTRA_KEY!r} must be a dict of token data, not {type(extra).__name__}")
        message = {k: v for k, v in action.items() if k != EXTRA_KEY}
        if set(message) <= {"role", "content"} and isinstance(message.get("content"), str):
            # A plain text reply wrapped only to carry its token data: step on the text itself.
            return message["content"], dict(extra or {})
        return message, dict(extra or {})
    return action, {}


def terminal_env(env: gym.Env) -> TerminalEnv:
    """The :class:`TerminalEnv` at the bottom of a wrapper stack, to *read* (task, protocol, history).

    The documented accessor for code that needs the running task or sandbox (an agent reading its
    task, the oracle). Never drive it (``step``/``reset``/``close`` on it skip every wrapper): act
    through the wrapped env. Raises ``TypeError`` when ``env`` is not a termgym env.
    """
    base = env.unwrapped
    if not isinstance(base, TerminalEnv):
        raise TypeError(f"expected a termgym env (TerminalEnv under its wrappers), got {type(base).__name__}")
    return base


async def areset(env: gym.Env, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
    """``env.reset(...)`` run off the event loop (termgym's I/O thread pool), through all of ``env``'s wrappers."""
    return await run_blocking(env.reset, seed=seed, options=options)


async def astep(env: gym.Env, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
    """``env.step(action)`` run off the event loop, through all of ``env``'s wrappers."""
    return await run_blocking(env.step, action)


async def aclose(env: gym.Env) -> None:
    """``env.close()`` run off the event loop."""
    await run_blocking(env.close)


class TerminalEnv(gym.Env[str, str]):
    """A multi-turn terminal episode over one task of a suite.

    Args:
        suite: a :class:`TaskSuite`, a factory, or ``"module:attr"``; ``suite_options`` go to the factory.
        config: how episodes run (:class:`~termgym.config.EnvConfig`: backend, protocol, limits,
            mode, split, sandbox and protocol options); default ``EnvConfig()``.
        suite_options: keyword arguments for the suite factory.
        render_mode: ``"ansi"`` or ``"human"``.
        **options: ``gym.make`` style keywords, split by :func:`~termgym.config.split_options`:
            the names of :class:`~termgym.config.EnvConfig` fields (``backend``, ``max_steps``…)
            override ``config``, the rest are suite options; an option neither takes is an error.

    ``reset(seed=..., options={"task_id": ...})`` returns ``(task_prompt, info)`` with
    ``info["system_prompt"]``, ``info["task_id"]``, ``info["messages"]``, ``info["tools"]`` and
    ``info["runtime"]`` (the system the sandbox runs on: the pinned runtime's version, ``"host"`` or
    a Docker image). ``step(message)`` returns ``(observation, reward, terminated, truncated, info)``; on the last step
    ``info["grade"]`` holds the grade and ``info["messages"]`` the whole chat history. ``step``
    also takes a :class:`Truncate` (end the episode from outside), and a message dict may carry
    token data under ``"extra"``, returned as ``info["extra"]`` (see the module docstring).
    """

    metadata = {"render_modes": ["ansi", "human"]}

    # The config's fields, read where the env uses them (the config itself is frozen).
    backend = property(lambda self: self.config.backend, doc="The sandbox backend (``EnvConfig.backend``).")
    max_steps = property(lambda self: self.config.max_steps, doc="``EnvConfig.max_steps``.")
    time_limit = property(lambda self: self.config.time_limit, doc="``EnvConfig.time_limit``.")
    command_timeout = property(lambda self: self.config.command_timeout, doc="``EnvConfig.command_timeout``.")
    max_context_chars = property(lambda self: self.config.max_context_chars, doc="``EnvConfig.max_context_chars``.")
    mode = property(lambda self: self.config.mode, doc="``EnvConfig.mode``.")
    split = property(lambda self: self.config.split, doc="``EnvConfig.split``.")
    sandbox_options = property(lambda self: dict(self.config.sandbox_options), doc="``EnvConfig.sandbox_options``.")

    def __init__(
        self,
        suite: Any,
        config: EnvConfig | None = None,
        *,
        suite_options: Mapping[str, Any] | None = None,
        render_mode: str | None = None,
        **options: Any,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}, not {render_mode!r}")
        self.config, self.suite_options = split_options(options, config, suite_options)
        self.suite = resolve_suite(suite, **self.suite_options)
        self.protocol = make_protocol(self.config.protocol, **self.config.protocol_options)
        self.protocol.configure(mode=self.config.mode)
        self.render_mode = render_mode
        self.observation_space = TextSpace()
        self.action_space = TextSpace()

        self.task: Task | None = None
        self.sandbox: Sandbox | None = None
        self.messages: list[dict[str, Any]] = []
        self.grade: Grade | None = None
        self.steps = 0
        self.done = True
        self.commands: list[str] = []
        self.last_exec: ExecResult | None = None
        self._started_at = 0.0

    # -- gymnasium API ------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode: pick a task, start its sandbox, return the task prompt and info."""
        super().reset(seed=seed)
        self._end_episode()
        task_id = (options or {}).get("task_id")
        if task_id is None:
            ids = self.suite.task_ids(self.split)
            if not ids:
                raise RuntimeError(f"suite {self.suite.name!r} has no tasks in split {self.split!r}")
            task_id = ids[int(self.np_random.integers(len(ids)))]
        self.task = self.suite.load(str(task_id))
        spec = self.task.sandbox_spec()
        if self.command_timeout is not None:
            spec = dataclasses.replace(spec, limits=dataclasses.replace(spec.limits, command_timeout=self.command_timeout))
        if self.config.cpus is not None:
            spec = dataclasses.replace(spec, limits=dataclasses.replace(spec.limits, cpus=self.config.cpus))
        self.sandbox = make_sandbox(self.backend, spec, mode=self.mode, **self.sandbox_options)
        try:
            self.sandbox.start()
            self.task.setup(self.sandbox)
            self.protocol.start(self.sandbox)
        except BaseException:
            self._end_episode()
            raise
        self.messages = self.opening_messages(self.task)
        system_prompt = self.messages[0]["content"] if self.messages[0]["role"] == "system" else ""
        prompt = self.messages[-1]["content"]
        self.grade = None
        self.steps = 0
        self.commands = []
        self.done = False
        self._started_at = time.monotonic()
        info = {
            "task_id": self.task.task_id,
            "system_prompt": system_prompt,
            "messages": list(self.messages),
            "tools": self.protocol.tools(),
            "suite": self.suite.name,
            # the system the task runs on (a pinned runtime version, "host" or a Docker image)
            "runtime": self.sandbox.runtime,
        }
        info.update(getattr(self.protocol, "run_metadata", dict)())  # e.g. terminus: prompt_source
        return prompt, info

    def opening_messages(self, task: Task) -> list[dict[str, Any]]:
        """The chat an episode of ``task`` opens with: the protocol's system prompt and the task prompt.

        ``reset`` starts the history with it; RL data rows (:mod:`termgym.data.rl`) use it as their
        ``prompt``. A protocol whose prompt is one user message (Terminus-2 with Harbor's template)
        has no system message.
        """
        system_prompt = self.protocol.system_prompt(task)
        prompt = self.protocol.task_prompt(task)
        return ([{"role": "system", "content": system_prompt}] if system_prompt else []) + [
            {"role": "user", "content": prompt}]

    def step(self, action: str | dict[str, Any] | Truncate) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        """Apply one assistant message (or a :class:`Truncate`); see the class docstring for what comes back."""
        if self.done or self.task is None or self.sandbox is None:
            raise RuntimeError("the episode is over (or never started): call reset() first")
        if not isinstance(action, (str, dict, Truncate)):
            raise TypeError(f"an action is an assistant message (text or a message dict) or a Truncate, "
                            f"not {type(action).__name__}")
        action, extra = split_extra(action)
        if isinstance(action, Truncate):
            return self._truncating_step(action.message, action.reason, extra)
        parsed = self.protocol.parse(action)
        self.messages.append(self.protocol.assistant_message(action))
        self.steps += 1
        info: dict[str, Any] = {"step": self.steps, "task_id": self.task.task_id,
                                "action": {"kind": parsed.kind, "command": parsed.command, "error": parsed.error}}
        if extra:
            info["extra"] = extra
        terminated = False
        submission: str | None = None
        result: ExecResult | None = None
        if parsed.kind == "format_error":
            observation = self.protocol.render_format_error(parsed)
        elif parsed.kind == "submit":
            terminated, submission = True, parsed.submission or ""
        else:
            assert parsed.command is not None
            refusal = self.task.check_command(parsed.command)
            if refusal is not None:
                result = ExecResult(output=refusal, exit_code=1)
                info["refused"] = True
            else:
                self.commands.append(parsed.command)
                timeout, ends_episode = self._command_deadline()
                result = self.protocol.execute(parsed, self.sandbox, timeout, ends_episode=ends_episode)
                submission = self.protocol.detect_submission(result)
                terminated = submission is not None
            if not terminated:
                observation = self.protocol.render_observation(result, parsed)
        if terminated:
            problem = self.task.check_submission(submission or "")
            if problem is None:
                observation = "Submitted."
            else:  # malformed: say why and let the agent submit again
                terminated, submission = False, None
                info["submission_error"] = problem
                observation = f"Your submission was not accepted: {problem}\nFix it and submit again."
        self.last_exec = result
        if result is not None:
            # Timings stay out of info (they would make info differ between identical runs);
            # read them from env.get_wrapper_attr("last_exec").duration and ("elapsed").
            info["exec"] = {k: v for k, v in dataclasses.asdict(result).items() if k != "duration"}
        self.messages.append(self.protocol.observation_message(observation, parsed))

        truncated, reason = False, "submitted"
        if not terminated:
            elapsed = time.monotonic() - self._started_at
            if self.steps >= self.max_steps:
                truncated, reason = True, "max_steps"
            elif (limit := self._time_limit()) is not None and elapsed >= limit:
                truncated, reason = True, "time_limit"
            elif self.max_context_chars is not None and self.context_chars() > self.max_context_chars:
                truncated, reason = True, "context_limit"
        reward = 0.0
        if terminated or truncated:
            grade = self._grade(submission, reason)
            reward = grade.score
            info["grade"] = grade.to_dict()
            info["end_reason"] = reason
            info["messages"] = list(self.messages)
            self._end_episode()
        if self.render_mode == "human":
            print(self.render_turn(-2) + "\n" + self.render_turn(-1))
        return observation, reward, terminated, truncated, info

    def _truncating_step(self, message: str | dict[str, Any], reason: str,
                         extra: dict[str, Any]) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """The last step of an episode cut from outside (see :class:`Truncate`)."""
        assert self.task is not None
        if message not in ("", None):
            self.messages.append(self.protocol.assistant_message(message))
            self.steps += 1
        info: dict[str, Any] = {"step": self.steps, "task_id": self.task.task_id,
                                "action": {"kind": "cut", "command": None, "error": None}}
        if extra:
            info["extra"] = extra
        grade = self._grade(None, reason)
        info["grade"] = grade.to_dict()
        info["end_reason"] = reason
        info["messages"] = list(self.messages)
        self._end_episode()
        return "", grade.score, False, True, info

    def render(self) -> str | None:
        """The transcript so far as ANSI-coloured text (``render_mode="ansi"``) or printed (``"human"``)."""
        text = "\n".join(self.render_turn(i) for i in range(len(self.messages)))
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        """End the episode (its sandbox is closed; the episode is not graded)."""
        self._end_episode()
        super().close()

    def __del__(self) -> None:
        try:
            self._end_episode()
        except Exception:
            pass

    # -- helpers ----------------------------------------------------------------------------------

    def _time_limit(self) -> float | None:
        limits = [t for t in (self.time_limit, getattr(self.task, "time_limit", None)) if t is not None]
        return min(limits) if limits else None

    def _command_deadline(self) -> tuple[float | None, bool]:
        """The timeout for this step's command, and whether it is the episode's time limit.

        ``command_timeout``, cut to what is left of the time limit. The time limit is a deadline, as
        Harbor's agent timeout is: a command still running when it passes is stopped there with its
        shell, so nothing more of what the agent typed runs (Harbor cancels its agent), and the step
        then ends the episode as truncated ("time_limit").
        """
        limit = self._time_limit()
        if limit is None:
            return self.command_timeout, False
        remaining = max(0.01, limit - (time.monotonic() - self._started_at))
        per_command = self.command_timeout
        if per_command is None and self.sandbox is not None:
            per_command = self.sandbox.spec.limits.command_timeout
        # Far from the deadline, the usual per-command timeout (or the protocol's own) applies unchanged.
        if per_command is None or remaining < per_command:
            return remaining, True
        return self.command_timeout, False

    @property
    def elapsed(self) -> float:
        """Seconds since the current (or last) episode started."""
        return time.monotonic() - self._started_at if self._started_at else 0.0

    def context_chars(self) -> int:
        return sum(len(m.get("content") or "") for m in self.messages)

    def render_turn(self, index: int) -> str:
        colours = {"system": "\x1b[2m", "user": "\x1b[36m", "assistant": "\x1b[33m", "tool": "\x1b[36m"}
        message = self.messages[index]
        role = message["role"]
        content = message.get("content") or ""
        if message.get("tool_calls"):
            content += "\n" + "\n".join(f"-> {c['function']['name']}({c['function']['arguments']})"
                                        for c in message["tool_calls"])
        return f"{colours.get(role, '')}[{role}]\x1b[0m {content}"

    def _grade(self, submission: str | None, reason: str) -> Grade:
        assert self.task is not None and self.sandbox is not None
        new_sandbox = FreshSandboxes(self.backend, mode="persistent", **self.sandbox_options)
        ctx = GradingContext(sandbox=self.sandbox, new_sandbox=new_sandbox, submission=submission, reason=reason,
                             elapsed=time.monotonic() - self._started_at, commands=list(self.commands))
        try:
            try:
                grade = self.task.grade(ctx)
            except Exception as exc:  # grading must not crash the episode; keep the reason
                grade = Grade(score=0.0, passed=False, error=f"grading failed: {type(exc).__name__}: {exc}")
            # A message about the agent's files names them as the agent sees them, never by where
            # this host keeps its sandboxes (the grading sandboxes' too, before they close).
            hosts = {k: v for box in (self.sandbox, *new_sandbox.opened) for k, v in box.host_paths().items()}
            if hosts:
                grade.details = map_strings(grade.details, lambda text: in_sandbox_terms(text, hosts))
                grade.error = None if grade.error is None else in_sandbox_terms(grade.error, hosts)
            self.grade = grade
        finally:
            new_sandbox.close()
        self.grade.details.setdefault("end_reason", reason)
        return self.grade

    def _end_episode(self) -> None:
        self.done = True
        task, sandbox = self.task, self.sandbox
        self.sandbox = None
        if task is not None:
            try:
                task.teardown()
            except Exception:
                pass
        if sandbox is not None:
            sandbox.close()


def oracle_actions(env: TerminalEnv, submission: str | None = None) -> list[str | dict[str, Any]]:
    """The assistant messages that play the current task's oracle in the env's protocol."""
    task = env.task
    if task is None:
        raise RuntimeError("call reset() first")
    commands = task.oracle_commands()
    if commands is None:
        raise ValueError(f"task {task.task_id!r} has no oracle")
    if submission is None and env.sandbox is not None:
        submission = task.oracle_submission(env.sandbox)
    submits = [env.protocol.submit_message(submission or "") for _ in range(env.protocol.submit_confirmations)]
    return [env.protocol.oracle_message(c) for c in commands] + submits
