"""The ``harbor`` agent: Harbor's own agents (Terminus-2, its installed agents) on termgym tasks.

Harbor (``pip install 'harbor>=0.26,<0.27'``, Python >= 3.12) runs an agent against a
``BaseEnvironment``: ``agent.setup(env)`` then ``agent.run(instruction, env, context)``, where the
environment offers ``exec``, file upload/download and lifecycle calls. This module provides:

- :class:`TermgymSandboxEnvironment`, a Harbor ``BaseEnvironment`` over a running termgym
  :class:`~termgym.sandbox.base.Sandbox` (bubblewrap or Docker), so Harbor's agents run in termgym's
  sandboxes (and without a Docker engine on the local backend);
- :class:`HarborAgent`, a termgym :class:`~termgym.agents.base.Agent` that, inside ``termgym eval``,
  lets a Harbor agent work on the episode's task, then submits so that termgym grades the
  episode and writes the same results and reports as for a native agent.

One door: inside an episode the Harbor agent acts *through the env*. Its environment is a
:class:`TermgymSandboxEnvironment` over a :class:`StepChannel`: every ``exec`` (Terminus-2's tmux
commands included), upload and download becomes a command the harness sends through ``env.step``,
and its result goes back to the agent. So each command is a step of the episode's record, counts
against ``max_steps``, meets the task's time limit and command bans (a refused command returns the
refusal with exit code 1, as for any agent). The agent's own trajectory (its LLM turns) stays in
``logs_dir`` (``meta["harbor_logs_dir"]``); token counts from Harbor's ``AgentContext`` are
recorded as the submitting step's usage. The protocol must run shell commands (``minisweagent``
or ``toolcall``), not keystrokes (``terminus``).

This drives Harbor's agent classes directly; Harbor's ``Trial`` runner (``harbor run``) is not used
because it builds environments from Harbor task directories (a Dockerfile per task), not from
termgym tasks. Needs Python >= 3.12 (Harbor's requirement) with termgym importable.
"""

from __future__ import annotations

import asyncio
import base64
import io
import shlex
import tarfile
import tempfile
import uuid
from pathlib import Path
from typing import Any

from termgym.agents.base import Agent, Episode, InfraError, Reply
from termgym.archives import extract_all

try:
    from harbor.environments.base import BaseEnvironment
    from harbor.environments.base import ExecResult as HarborExecResult
except ImportError as _exc:  # the module stays importable for the error message below
    BaseEnvironment = object  # type: ignore[assignment,misc]
    HarborExecResult = None  # type: ignore[assignment,misc]
    _HARBOR_IMPORT_ERROR: ImportError | None = _exc
else:
    _HARBOR_IMPORT_ERROR = None


def _require_harbor() -> None:
    if _HARBOR_IMPORT_ERROR is not None:
        raise InfraError("the harbor agent needs Harbor (Python >= 3.12): pip install 'harbor>=0.26,<0.27' "
                         f"({_HARBOR_IMPORT_ERROR})", retriable=False)


class TermgymSandboxEnvironment(BaseEnvironment):  # type: ignore[misc,valid-type]
    """Harbor's environment interface over a termgym sandbox (bubblewrap or Docker).

    Two ways in:

    - ``TermgymSandboxEnvironment(sandbox=box, logs_dir=...)``: over a sandbox termgym already
      started (the :class:`HarborAgent` path; termgym owns the sandbox and ``stop`` leaves it).
    - from Harbor's trial runner, as an external environment
      (``EnvironmentConfig(import_path="termgym.agents.harbor:TermgymSandboxEnvironment",
      kwargs={"backend": "local"})``): Harbor passes the task's ``environment/`` folder, and
      ``start`` builds the sandbox termgym's Harbor loader makes for that task folder (its
      Dockerfile emulated on the local backend, built on Docker); ``stop`` closes it.

    - ``TermgymSandboxEnvironment(channel=StepChannel(...), logs_dir=...)``: inside a termgym
      episode (the :class:`HarborAgent` path): every call becomes a command sent through ``env.step``.

    Every ``exec`` runs in a fresh ``bash -c`` inside the sandbox (as Harbor's container
    environments do), in ``cwd`` or the sandbox's working directory, with ``env`` exported, under
    ``timeout_sec``. ``user`` is ignored: a termgym sandbox has one user.
    """

    def __init__(self, environment_dir: Path | None = None, environment_name: str = "termgym",
                 session_id: str | None = None, trial_paths: Any = None, task_env_config: Any = None, *,
                 sandbox: Any = None, logs_dir: Path | str | None = None, backend: str = "local",
                 channel: StepChannel | None = None, **kwargs: Any) -> None:
        _require_harbor()
        from harbor.models.task.config import EnvironmentConfig
        from harbor.models.trial.paths import TrialPaths

        if sandbox is None and channel is None and environment_dir is None:
            raise ValueError("TermgymSandboxEnvironment needs a started termgym sandbox (sandbox=...), an episode's "
                             "StepChannel (channel=...) or, from Harbor's trial runner, the task's environment_dir")
        if backend not in ("local", "docker"):
            raise ValueError(f"TermgymSandboxEnvironment: backend must be 'local' or 'docker', not {backend!r}")
        if trial_paths is None:
            if logs_dir is None:
                raise ValueError("TermgymSandboxEnvironment needs trial_paths (Harbor) or logs_dir")
            trial_paths = TrialPaths(trial_dir=Path(logs_dir))
            trial_paths.mkdir()
        self._sandbox = sandbox
        self._channel = channel
        self._owns_sandbox = sandbox is None and channel is None
        self._backend = backend
        # No Dockerfile of its own when termgym built the sandbox: an empty folder stands in.
        environment_dir = Path(environment_dir) if environment_dir else Path(tempfile.mkdtemp(prefix="termgym-env-"))
        super().__init__(environment_dir=environment_dir, environment_name=environment_name,
                         session_id=session_id or f"{environment_name}__{uuid.uuid4().hex[:8]}",
                         trial_paths=trial_paths, task_env_config=task_env_config or EnvironmentConfig(),
                         enable_environment_dir_upload=False, **kwargs)

    @staticmethod
    def type() -> str:
        return "termgym"

    @property
    def capabilities(self) -> Any:
        """termgym sandboxes have no network unless the task allows it (Harbor's ``allow_internet``)."""
        from harbor.environments.capabilities import EnvironmentCapabilities

        return EnvironmentCapabilities(disable_internet=True)

    def _validate_definition(self) -> None:
        """A task folder must be one termgym's Harbor loader reads (checked in ``start``)."""
        if self._sandbox is None and self._channel is None and not (self.environment_dir / "Dockerfile").is_file() and not (
                self.environment_dir.parent / "task.toml").is_file():
            raise FileNotFoundError(f"{self.environment_dir}: no Dockerfile, and no task.toml beside it")

    async def start(self, force_build: bool) -> None:
        """Start the task folder's sandbox (trial-runner mode); a given sandbox or episode is already running."""
        if self._sandbox is not None or self._channel is not None:
            return
        from termgym.sandbox import make_sandbox
        from termgym.tasks.harbor.loader import load_task

        def build() -> Any:
            task = load_task(self.environment_dir.parent, backend=self._backend)
            box = make_sandbox(self._backend, task.sandbox_spec(), mode="stateless")
            try:
                box.start()
                task.setup(box)
            except BaseException:
                box.close()
                raise
            return box

        self._sandbox = await asyncio.to_thread(build)

    async def stop(self, delete: bool) -> None:
        if self._owns_sandbox and self._sandbox is not None:
            await asyncio.to_thread(self._sandbox.close)

    async def exec(self, command: str, cwd: str | None = None, env: dict[str, str] | None = None,
                   timeout_sec: int | None = None, user: str | int | None = None) -> Any:
        workdir = cwd or (self._channel.workdir if self._channel is not None else self._sandbox.workdir)
        parts = []
        if env:
            parts.append("export " + " ".join(f"{k}={shlex.quote(str(v))}" for k, v in env.items()))
        parts.append(f"cd {shlex.quote(workdir)}")
        run = f"bash -c {shlex.quote(command)}"
        if timeout_sec and self._channel is not None:
            run = f"timeout -k 5 {int(timeout_sec)} {run}"  # the env's step has no per-call timeout of its own
        parts.append(f"exec {run}")
        script = "; ".join(parts[:-1]) + " && " + parts[-1]
        # A subshell: the sandbox's persistent shell (if any) keeps its own state.
        if self._channel is not None:
            output, code = await self._channel.run(f"(\n{script}\n)", kind="exec")
            return HarborExecResult(stdout=output, stderr="", return_code=code)
        result = await asyncio.to_thread(self._sandbox.exec, f"(\n{script}\n)", timeout_sec)
        return HarborExecResult(stdout=result.output, stderr="", return_code=result.exit_code)

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        data = Path(source_path).read_bytes()
        if self._channel is not None:
            await self._channel.write_files({target_path: data})
            return
        await asyncio.to_thread(self._sandbox.write_file, target_path, data)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        if self._channel is not None:
            root = Path(source_dir)
            files = {f"{target_dir.rstrip('/')}/{p.relative_to(root).as_posix()}": p.read_bytes()
                     for p in sorted(root.rglob("*")) if p.is_file()}
            await self._channel.write_files(files)
            return
        await asyncio.to_thread(self._sandbox.put_dir, source_dir, target_dir)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        if self._channel is not None:
            data = await self._channel.read_file(source_path)
        else:
            data = await asyncio.to_thread(self._sandbox.read_file, source_path)
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        Path(target_path).write_bytes(data)

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        if self._channel is not None:
            await self._channel.read_dir(source_dir, Path(target_dir))
            return
        await asyncio.to_thread(self._sandbox.get_dir, source_dir, target_dir)


class StepChannel:
    """Carries a Harbor agent's calls to the termgym harness, which runs each as an ``env.step``.

    The agent's coroutine awaits :meth:`run`; the harness's ``act`` takes the next request with
    :meth:`next_request`, returns it as the step's action, and after the step hands the result
    back with :meth:`deliver`. Uploads and downloads are commands too (base64 over the step's output).
    """

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self.requests: asyncio.Queue[tuple[str, str, asyncio.Future[tuple[str, int]]]] = asyncio.Queue()
        self.pending: asyncio.Future[tuple[str, int]] | None = None
        self.calls = 0

    async def run(self, command: str, kind: str = "exec") -> tuple[str, int]:
        """Run ``command`` as the episode's next step; returns its output and exit code."""
        future: asyncio.Future[tuple[str, int]] = asyncio.get_running_loop().create_future()
        self.calls += 1
        await self.requests.put((kind, command, future))
        return await future

    def deliver(self, output: str, exit_code: int) -> None:
        if self.pending is not None and not self.pending.done():
            self.pending.set_result((output, exit_code))
        self.pending = None

    async def write_files(self, files: dict[str, bytes]) -> None:
        for path, data in files.items():
            quoted = shlex.quote(path)
            encoded = base64.b64encode(data).decode()
            command = (f"mkdir -p \"$(dirname {quoted})\" && printf %s {shlex.quote(encoded)} | base64 -d > {quoted}")
            output, code = await self.run(command, kind="upload")
            if code != 0:
                raise RuntimeError(f"uploading {path} into the sandbox failed (exit {code}): {output[-500:]}")

    async def read_file(self, path: str) -> bytes:
        quoted = shlex.quote(path)
        output, code = await self.run(f"wc -c < {quoted} && base64 -w0 {quoted}", kind="download")
        return _decode(output, code, path)

    async def read_dir(self, path: str, target: Path) -> None:
        quoted = shlex.quote(path)
        output, code = await self.run(f"tar -C {quoted} -cf /tmp/.termgym-dl.tar . && wc -c < /tmp/.termgym-dl.tar && "
                                      "base64 -w0 /tmp/.termgym-dl.tar; rm -f /tmp/.termgym-dl.tar", kind="download")
        data = _decode(output, code, path)
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            extract_all(tar, target)


def _decode(output: str, code: int, path: str) -> bytes:
    """``SIZE\\nBASE64`` from a download step; an error names the file when it is missing or cut."""
    lines = output.strip().splitlines()
    if code != 0 or len(lines) < 1 or not lines[0].strip().isdigit():
        raise FileNotFoundError(f"cannot read {path} from the sandbox (exit {code}): {output.strip()[-300:]}")
    data = base64.b64decode("".join(lines[1:])) if len(lines) > 1 else b""
    if len(data) != int(lines[0]):
        raise RuntimeError(f"reading {path} from the sandbox: got {len(data)} of {lines[0]} bytes (the step's "
                           "output was cut at the sandbox's output limit)")
    return data


class HarborAgent(Agent):
    """Runs a Harbor agent in each termgym episode's sandbox, then submits for termgym's grade.

    Args:
        harbor_agent: a Harbor agent name (``terminus-2``, ``oracle``, ``claude-code``… as ``harbor run -a``
            takes them) or an import path ``module:Class``.
        model: the model name Harbor's agent gets (litellm style: ``openai/gpt-4.1``); with
            ``base_url`` and no provider prefix, ``openai/`` is added.
        base_url: an OpenAI-compatible API root, passed as the agent's ``api_base``.
        api_key_env: environment variable with the key for ``base_url`` (default ``OPENAI_API_KEY``).
        logs_dir: where each episode's Harbor logs go (``<logs_dir>/<task>__<attempt>``); default a
            temporary directory.
        agent_kwargs: more constructor arguments for the Harbor agent (e.g. ``max_turns``).
    """

    name = "harbor"

    def __init__(self, harbor_agent: str = "terminus-2", model: str | None = None, base_url: str | None = None,
                 api_key_env: str | None = None, logs_dir: str | None = None,
                 agent_kwargs: dict[str, Any] | None = None) -> None:
        if agent_kwargs is not None and not isinstance(agent_kwargs, dict):
            raise ValueError(f"harbor: agent_kwargs must be a mapping, not {type(agent_kwargs).__name__}")
        self.agent = harbor_agent
        self.model = f"openai/{model}" if model and base_url and "/" not in model else model
        self.base_url = base_url
        self.api_key_env = api_key_env or "OPENAI_API_KEY"
        self.logs_dir = Path(logs_dir) if logs_dir else Path(tempfile.mkdtemp(prefix="termgym-harbor-"))
        self.agent_kwargs = dict(agent_kwargs or {})

    def _build(self, logs_dir: Path) -> Any:
        from harbor.agents.factory import AgentFactory
        from harbor.models.agent.name import AgentName

        kwargs = dict(self.agent_kwargs)
        if self.agent == "terminus-2":
            # Recording the session means pip-installing asciinema, which a sandbox without network cannot.
            kwargs.setdefault("record_terminal_session", False)
        if self.base_url:
            kwargs.setdefault("api_base", self.base_url)
        if ":" in self.agent:
            return AgentFactory.create_agent_from_import_path(self.agent, logs_dir=logs_dir, model_name=self.model,
                                                              **kwargs)
        try:
            name = AgentName(self.agent)
        except ValueError:
            known = ", ".join(n.value for n in AgentName)
            raise ValueError(f"harbor: unknown agent {self.agent!r}; Harbor knows: {known}") from None
        return AgentFactory.create_agent_from_name(name, logs_dir=logs_dir, model_name=self.model, **kwargs)

    async def start(self, episode: Episode) -> None:
        _require_harbor()
        import os

        from harbor.models.agent.context import AgentContext

        env = episode.env
        if env.protocol.name == "terminus":
            raise ValueError("the harbor agent runs shell commands through env.step, not keystrokes: use the "
                             "minisweagent (default) or toolcall protocol, not terminus (Harbor's Terminus-2 "
                             "keeps its own tmux session)")
        if self.base_url:  # litellm reads the key from the environment for openai/ models
            os.environ.setdefault("OPENAI_API_KEY", os.environ.get(self.api_key_env, "EMPTY"))
        logs_dir = self.logs_dir / f"{episode.task_id}__{episode.attempt}"
        channel = StepChannel(workdir=getattr(env.task, "workdir", None) or env.sandbox.workdir)
        environment = TermgymSandboxEnvironment(channel=channel, logs_dir=logs_dir, environment_name=episode.task_id)
        agent = self._build(environment.trial_paths.agent_dir)
        context = AgentContext()
        instruction = env.task.instruction

        async def drive() -> None:
            await agent.setup(environment)
            await agent.run(instruction, environment, context)

        episode.state.update(channel=channel, context=context, logs_dir=logs_dir, finished=False,
                             run=asyncio.create_task(drive(), name=f"harbor-{episode.task_id}"))

    async def act(self, episode: Episode) -> Reply:
        state = episode.state
        channel: StepChannel = state["channel"]
        protocol = episode.env.protocol
        if channel.pending is not None:  # the last step ran the agent's command: hand it the result
            result = episode.env.last_exec
            if result is None:  # the step ran nothing (the env refused the message): say what it said
                channel.deliver(str(episode.messages[-1].get("content") or ""), 1)
            else:
                channel.deliver(result.output, 124 if result.timed_out else result.exit_code)
        if not state["finished"]:
            request = asyncio.ensure_future(channel.requests.get())
            done, _ = await asyncio.wait({request, state["run"]}, return_when=asyncio.FIRST_COMPLETED)
            if request in done:
                kind, command, future = request.result()
                channel.pending = future
                return Reply(message=_command_message(protocol, command, f"Harbor {self.agent}: {kind}"),
                             meta={"harbor_agent": self.agent, "harbor_call": kind})
            request.cancel()
            state["finished"] = True
            state["run"].result()  # the agent's own failure comes out here (an agent error)
        context = state["context"]
        usage = {k: int(v) for k, v in (("prompt_tokens", context.n_input_tokens),
                                        ("completion_tokens", context.n_output_tokens)) if v}
        meta = {"harbor_agent": self.agent, "harbor_logs_dir": str(state["logs_dir"]), "harbor_calls": channel.calls}
        if context.cost_usd:
            meta["cost"] = context.cost_usd
        reply = Reply(message=protocol.submit_message(""), usage=usage, meta=meta)
        if state.get("context_reported"):  # terminus asks to confirm: usage belongs to one step only
            reply.usage = {}
        state["context_reported"] = True
        return reply

    async def end(self, episode: Episode) -> None:
        """Stop the Harbor agent when the env ended the episode first (max_steps, time limit)."""
        run = episode.state.get("run")
        if run is not None and not run.done():
            run.cancel()
            try:
                await asyncio.wait_for(run, timeout=30)
            except (asyncio.CancelledError, Exception):  # noqa: S110 - the episode is over either way
                pass

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "agent": self.agent, "model": self.model, "base_url": self.base_url}


def _command_message(protocol: Any, command: str, note: str) -> str | dict[str, Any]:
    """An assistant message in the env's protocol that runs ``command`` (for the episode's record)."""
    if protocol.name == "minisweagent":
        return f"THOUGHT: {note}\n\n```bash\n{command}\n```"
    return protocol.oracle_message(command)


__all__ = ["HarborAgent", "StepChannel", "TermgymSandboxEnvironment"]
