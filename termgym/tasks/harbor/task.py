"""One Harbor (or Terminal-Bench) task folder as a termgym :class:`~termgym.tasks.base.Task`.

Run semantics follow Harbor's trial:

1. The sandbox starts from the task's image (``environment/Dockerfile`` built with
   :func:`termgym.sandbox.images.build_image` within ``build_timeout_sec``, or
   ``[environment] docker_image``), in ``[environment] workdir`` or else the image's ``WORKDIR``,
   with only the resource limits the task sets, and ``allow_internet``/``network_mode`` as the
   network setting. ``/logs/agent`` and ``/logs/verifier`` exist; ``/tests`` and ``/solution`` do not.
2. The agent works under the agent timeout (``[agent] timeout_sec``, exposed as
   :attr:`HarborTask.time_limit`; the env enforces it as a deadline, also inside a command), as
   ``[agent] user`` (:attr:`HarborTask.agent_user`; the terminus protocol and the oracle honour it).
3. :meth:`HarborTask.grade` — also after an agent timeout — removes old reward files, copies
   ``tests/`` to ``/tests``, makes ``test.sh`` executable and runs it directly (its shebang picks the
   interpreter) in the workdir as ``[verifier] user`` with ``[verifier.env]``, output to
   ``/logs/verifier/test-stdout.txt``, under the verifier timeout, and reads
   ``/logs/verifier/reward.json`` / ``reward.txt`` (see :mod:`termgym.tasks.harbor.verifier`).
"""

from __future__ import annotations

import base64
import dataclasses
import logging
import re
import shlex
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from termgym.tasks.base import Grade, GradingContext, Task
from termgym.tasks.harbor.config import HarborTaskConfig, StepConfig, resolve_env
from termgym.tasks.harbor.dockerfile import DockerfileInfo, executable_files
from termgym.tasks.harbor.network import NetworkNeed, network_needs
from termgym.tasks.harbor.verifier import TB_PASSING, RewardError, combine_rewards, parse_pytest_summary

if TYPE_CHECKING:
    from termgym.sandbox.base import Sandbox, SandboxSpec

TESTS_DIR = "/tests"
SOLUTION_DIR = "/solution"
VERIFIER_LOGS = "/logs/verifier"
AGENT_LOGS = "/logs/agent"
#: Where an agent publishes files for a separate verifier (Harbor's convention artifacts dir).
ARTIFACTS_DIR = "/logs/artifacts"
#: What the verifier's output is cut to in ``Grade.details["output"]``.
OUTPUT_TAIL = 4000

_build_lock = threading.Lock()
_log = logging.getLogger(__name__)
#: Images whose build failed in this process, with the error: the nop trial does not rebuild them.
_failed_builds: dict[str, str] = {}
#: Prebuilt images whose pull failed in this process, with the error.
_failed_pulls: dict[str, str] = {}


def as_user(command: str, user: str | None) -> str:
    """``command`` run by bash as ``user`` (``None``: unchanged, i.e. root). A numeric uid works too."""
    if not user:
        return command
    who = f"#{user}" if user.isdigit() else user
    return f"runuser -u {shlex.quote(who)} -- bash -c {shlex.quote(command)}"


@dataclasses.dataclass
class TaskStep:
    """One step of a multi-step task: its settings and its files under ``steps/<name>/``."""

    config: StepConfig
    instruction: str
    tests_dirs: list[Path]  # uploaded to /tests in order (shared tests/, then the step's tests/)
    solution_dir: Path | None = None  # steps/<name>/solution with solve.sh
    workdir_dir: Path | None = None  # steps/<name>/workdir: copied into the workdir before the step

    @property
    def name(self) -> str:
        return self.config.name


class HarborTask(Task):
    """A task read from a Harbor or Terminal-Bench folder (see :func:`~termgym.tasks.harbor.loader.load_task`).

    ``local_ok`` says whether the local backend can run it (its Dockerfile adds nothing the host
    lacks; :attr:`local_blocker` says why not). ``time_limit`` is the agent timeout in seconds or
    ``None``.
    """

    def __init__(
        self,
        task_id: str,
        instruction: str,
        *,
        task_dir: Path,
        config: HarborTaskConfig,
        dockerfile: DockerfileInfo | None,
        tests_dir: Path,
        test_script: str,
        solution_dir: Path | None = None,
        solution_script: str | None = None,
        solution_commands: list[str] | None = None,
        solution_files: list[Path] | None = None,
        run_tests_script: bytes | None = None,
        backend: str | None = None,
        steps: list[TaskStep] | None = None,
    ) -> None:
        metadata: dict[str, Any] = dict(config.metadata)
        metadata.update(layout=config.layout, schema_version=config.schema_version, task_dir=str(task_dir))
        if config.agent_timeout_sec is not None:
            metadata["agent_timeout_sec"] = config.agent_timeout_sec
        super().__init__(task_id, instruction, metadata)
        self.task_dir = task_dir
        self.config = config
        self.dockerfile = dockerfile
        self.tests_dir = tests_dir
        self.test_script = test_script  # relative to tests_dir: "test.sh" or "run-tests.sh"
        self.solution_dir = solution_dir
        self.solution_script = solution_script
        self.solution_commands = solution_commands
        # Which solution files go to /solution (default: all of solution_dir).
        self.solution_files = solution_files
        # Terminal-Bench: the run-tests.sh that is copied to /tests beside the tests.
        self.run_tests_script = run_tests_script
        self._workdir: str | None = None
        #: The steps of a multi-step task (``[[steps]]``), run by :func:`~termgym.tasks.harbor.trial.run_trial`.
        self.steps: list[TaskStep] = list(steps or [])
        #: A hint from the suite: with "local", tasks that need Docker fail fast instead of building.
        self.backend = backend
        self._image: str | None = None
        #: How this run treats the task (set by the suite, as Harbor's job flags): see :meth:`configure_run`.
        self.force_build = False
        self.timeout_multiplier = 1.0
        self.network_policy = "task"
        self.source: str | None = None

    def configure_run(self, *, force_build: bool = False, timeout_multiplier: float = 1.0, network: str = "task",
                      source: str | None = None) -> None:
        """Harbor's job options for this task: build even with a ``docker_image`` (``--force-build``),
        scale every timeout (``--timeout-multiplier``), turn the network off (``network="off"``: tasks
        that need it are refused), and the registered dataset the task came from (``source``)."""
        self.force_build = bool(force_build)
        self.timeout_multiplier = float(timeout_multiplier)
        self.network_policy = network
        self.source = source
        if source:
            self.metadata["source"] = source
        if self.timeout_multiplier != 1.0:
            self.metadata["timeout_multiplier"] = self.timeout_multiplier

    # -- what the agent's sandbox starts as --------------------------------------------------

    @property
    def time_limit(self) -> float | None:
        """The agent timeout (``[agent] timeout_sec`` / ``max_agent_timeout_sec``) times the run's
        ``timeout_multiplier``, or ``None``."""
        limit = self.config.agent_timeout_sec
        return None if limit is None else limit * self.timeout_multiplier

    @property
    def verifier_timeout(self) -> float:
        """``[verifier] timeout_sec`` times the run's ``timeout_multiplier``."""
        return self.config.verifier_timeout_sec * self.timeout_multiplier

    @property
    def build_timeout(self) -> float:
        """``[environment] build_timeout_sec`` times the run's ``timeout_multiplier`` (also bounds a pull)."""
        return self.config.build_timeout_sec * self.timeout_multiplier

    @property
    def uses_prebuilt_image(self) -> bool:
        """Whether the sandbox starts from ``docker_image`` (pulled) rather than the Dockerfile (built)."""
        return bool(self.config.docker_image) and not (self.force_build and self.dockerfile is not None)

    def network_needs(self, phases: tuple[str, ...] = ("verifier", "build")) -> list[NetworkNeed]:
        """Why this task needs the internet at run time (its verifier, its image build), from its files."""
        built = self.dockerfile is not None and not self.uses_prebuilt_image and not self.local_ok
        return network_needs(self.task_dir, tests_dirs=[self.tests_dir, *(d for s in self.steps for d in s.tests_dirs)],
                             built_dockerfile=self.dockerfile.path if built else None,
                             solution_dir=self.solution_dir, phases=phases)

    @property
    def agent_user(self) -> str | None:
        """``[agent] user``: who the agent's shell runs as (``None``: the image's user, root)."""
        return self.config.agent_user

    @property
    def local_blocker(self) -> str | None:
        """Why the local backend cannot run this task, or ``None`` if it can."""
        if self.uses_prebuilt_image:
            return f"uses the prebuilt image {self.config.docker_image}"
        users = [f"[{w}] user" for w, u in (("agent", self.config.agent_user), ("verifier", self.config.verifier_user)) if u]
        users += [f"[[steps]] {s.name!r} user" for s in self.steps if s.config.agent_user or s.config.verifier_user]
        if users:
            # bubblewrap maps only root into the sandbox: no process there can switch to another uid.
            return f"sets {', '.join(users)} (the local backend cannot switch users)"
        if self.dockerfile is None:
            return "has no Dockerfile"
        return self.dockerfile.blocker

    @property
    def local_ok(self) -> bool:
        return self.local_blocker is None

    @property
    def workdir(self) -> str:
        """``[environment] workdir``, else the image's WORKDIR (from the Dockerfile, or asked of Docker)."""
        if self.config.workdir:
            return self.config.workdir
        if self._workdir is None:
            if self.uses_prebuilt_image:
                image = self.image()  # pulled if missing (a failed pull may fall back to the Dockerfile)
            if self.uses_prebuilt_image:
                from termgym.sandbox.images import docker_client

                attrs = docker_client().images.get(image).attrs
                self._workdir = (attrs.get("Config") or {}).get("WorkingDir") or "/"
            else:
                self._workdir = self.dockerfile.workdir if self.dockerfile else "/"
        return self._workdir

    def image(self) -> str:
        """The Docker image the agent's sandbox starts from, building it if needed (cached by content)."""
        if self._image:
            return self._image
        if self.uses_prebuilt_image:  # Harbor prefers a prebuilt image over building
            self._image = self._pull()
        elif self.local_ok:
            # The Dockerfile is FROM the base image plus WORKDIR/ENV/COPY, which sandbox_spec()
            # reproduces on top of the base image itself: no build, same result on both backends.
            assert self.dockerfile and self.dockerfile.base_image
            self._image = self.dockerfile.base_image
        elif self.dockerfile is not None:
            from termgym.sandbox.images import build_image

            slug = re.sub(r"[^a-z0-9_.-]+", "-", self.task_id.lower()).strip("-.") or "task"
            from termgym.sandbox.base import BackendUnavailable

            key = str(self.dockerfile.path)
            with _build_lock:  # two episodes of one task must not race on the same tag
                if key in _failed_builds:  # e.g. the nop trial after the oracle's build failed
                    raise BackendUnavailable(f"Harbor task {self.task_id!r}: {_failed_builds[key]} (not rebuilt)")
                try:
                    _check_copy_from(self.dockerfile.path)
                    stand_in = _warn_stand_in_base(self.task_id, self.dockerfile.path)
                    if stand_in:  # carried into every grade's task metadata and `harbor check` output
                        self.metadata["scores_not_comparable"] = stand_in
                    self._image = _build_within(
                        self.build_timeout,
                        lambda: build_image(self.dockerfile.path.parent, self.dockerfile.path.name,
                                            f"termgym/harbor-{slug}:latest", log=lambda _line: None),
                    )
                except Exception as exc:
                    message = f"its image build failed: {exc}"
                    _failed_builds[key] = message
                    # No mention of the local backend here: this is the docker backend's build.
                    raise BackendUnavailable(
                        f"Harbor task {self.task_id!r}: building its image from {self.dockerfile.path} failed: {exc}"
                    ) from exc
        return self._image

    def _pull(self) -> str:
        """The task's ``docker_image``, pulled when the Docker host lacks it; falls back to the Dockerfile.

        As Harbor: a prebuilt image is used when named (``force_build`` builds instead). When the
        pull fails and the task has a Dockerfile, that is built (with a warning); otherwise the
        error names the image, the task and what the registry said.
        """
        from termgym.sandbox.base import BackendUnavailable
        from termgym.sandbox.images import pull_image

        image = str(self.config.docker_image)
        with _build_lock:
            why = _failed_pulls.get(image)  # a pull that failed in this process is not tried again
            if why is None:
                try:
                    return _build_within(self.build_timeout, lambda: pull_image(image, log=lambda _line: None))
                except Exception as exc:
                    why = _failed_pulls[image] = str(exc)
        if self.dockerfile is None:
            raise BackendUnavailable(
                f"Harbor task {self.task_id!r}: cannot pull its prebuilt image {image} ([environment] docker_image "
                f"in {self._config_file}) and it has no environment/Dockerfile to build instead: {why}")
        _log.warning("Harbor task %r: cannot pull %s (%s); building %s instead", self.task_id, image, why,
                     self.dockerfile.path)
        self.metadata["image_pull_failed"] = f"{image}: {why}"[:500]
        self.force_build = True  # from here on the task is its Dockerfile's
        self._workdir = None
        if self.local_ok:
            assert self.dockerfile and self.dockerfile.base_image
            return self.dockerfile.base_image
        self._image = None
        return self.image()

    def sandbox_spec(self) -> SandboxSpec:
        from termgym.sandbox.base import DEFAULT_CPUS, BackendUnavailable, Limits, SandboxSpec

        if self.network_policy == "off" and self.config.allow_internet:
            needs = self.network_needs(("verifier",))
            if needs:
                raise BackendUnavailable(
                    f"Harbor task {self.task_id!r} needs the internet, which this run turned off (network='off'): "
                    + "; ".join(str(n) for n in needs)
                    + ". Its score offline would not be comparable with Harbor's: run it with the network "
                    "(network='task'), or pre-provision what it downloads (docs/harbor.md, 'Grading offline')."
                )

        if self.backend == "local" and not self.local_ok:
            raise ValueError(
                f"Harbor task {self.task_id!r} needs the docker backend: it {self.local_blocker}. "
                "Run it with backend='docker' (the local backend only runs tasks whose Dockerfile is "
                "FROM termgym/base plus WORKDIR/ENV/COPY)."
            )
        cfg = self.config
        # Only what the task sets (Harbor imposes no memory, process or file limits of its own), but a
        # CPU quota always (the task's, else termgym's default): one trial's busy loops must not starve
        # another's verifier on the same machine.
        limits = Limits(memory_mb=cfg.memory_mb, cpus=cfg.cpus if cfg.cpus is not None else DEFAULT_CPUS,
                        storage_mb=cfg.storage_mb, pids=None,
                        cpu_seconds=None, file_size_mb=None, open_files=None)
        image = self.image()  # first: a prebuilt image that cannot be pulled may fall back to the Dockerfile
        env = dict(self.dockerfile.env) if self.dockerfile and self.local_ok else {}
        env.update(resolve_env(cfg.environment_env, self._config_file, "environment"))
        spec = SandboxSpec(
            workdir=self.workdir,
            image=image,
            env=env,
            network=cfg.allow_internet and self.network_policy != "off",
            limits=limits,
            setup_commands=[f"mkdir -p {AGENT_LOGS} {VERIFIER_LOGS} {ARTIFACTS_DIR} && "
                            f"chmod 777 {AGENT_LOGS} {VERIFIER_LOGS} {ARTIFACTS_DIR}"
                            + (f" && mkdir -p {shlex.quote(self.workdir)}" if cfg.workdir else "")],
        )
        if self.local_ok and self.dockerfile:
            self._emulate_copies(spec)
        return spec

    def _emulate_copies(self, spec: SandboxSpec) -> None:
        """Reproduce the Dockerfile's COPY lines as spec files and directories (local-eligible tasks)."""
        assert self.dockerfile is not None
        executables: list[str] = []
        for copy in self.dockerfile.copies:
            for src in copy.sources:
                if src.is_dir():
                    dest = copy.dest.rstrip("/") or "/"
                    spec.copy_dirs[str(src)] = dest
                    executables += [f"{dest}/{p.relative_to(src).as_posix()}" for p in executable_files([src])]
                else:
                    dest = copy.dest + src.name if copy.dest.endswith("/") else copy.dest
                    spec.files[dest] = src.read_bytes()
                    if executable_files([src]):
                        executables.append(dest)
        if executables:
            # spec.files carries no mode bits; COPY keeps them.
            spec.setup_commands.append("chmod +x " + " ".join(shlex.quote(p) for p in executables))

    @property
    def _config_file(self) -> Path:
        return self.task_dir / ("task.yaml" if self.config.layout == "terminal-bench" else "task.toml")

    def setup(self, sandbox: Sandbox) -> None:
        if self.steps:
            raise ValueError(
                f"Harbor task {self.task_id!r} has {len(self.steps)} [[steps]]: a TerminalEnv episode serves one "
                "instruction, so multi-step tasks run with `termgym harbor check` (run_trial) only"
            )
        if getattr(sandbox, "backend", None) == "local" and not self.local_ok:
            raise ValueError(f"Harbor task {self.task_id!r} needs the docker backend: it {self.local_blocker}")
        # The terminus protocol starts its shell as this user ([agent] user), as Harbor's agent runs.
        sandbox.agent_user = self.agent_user

    # -- the verifier ------------------------------------------------------------------------

    def grade(self, ctx: GradingContext) -> Grade:
        """Run the verifier, in the agent's sandbox or (``separate`` mode) a fresh one, and read the reward."""
        details: dict[str, Any] = {"reason": ctx.reason}
        if "scores_not_comparable" in self.metadata:
            details["scores_not_comparable"] = self.metadata["scores_not_comparable"]
        if not self.config.verifier_separate:
            return self._verify(ctx.sandbox, details, upload_tests=True, workdir=self.workdir)
        details["verifier_environment"] = "separate"
        try:
            spec, bundled, workdir = self._verifier_spec()
            box = ctx.new_sandbox(spec)
            self._copy_artifacts(ctx.sandbox, box)
        except Exception as exc:  # the separate verifier could not start: Harbor records no reward
            return _no_reward(details, f"the separate verifier environment failed: {type(exc).__name__}: {exc}")
        return self._verify(box, details, upload_tests=not bundled, workdir=workdir)

    def _verifier_spec(self) -> tuple[SandboxSpec, bool, str]:
        """The separate verifier's sandbox: ``(spec, tests bundled in its image, workdir)``.

        As Harbor resolves it: ``[verifier.environment] docker_image``, else ``tests/Dockerfile``
        (both carry ``/tests`` themselves), else a fresh copy of the task's own environment.
        """
        from termgym.sandbox.base import SandboxSpec
        from termgym.sandbox.images import build_image, docker_client

        cfg = self.config
        setup = [f"mkdir -p {VERIFIER_LOGS} {ARTIFACTS_DIR} && chmod 777 {VERIFIER_LOGS}"]
        if cfg.verifier_docker_image or (self.tests_dir / "Dockerfile").is_file():
            if cfg.verifier_docker_image:
                image = cfg.verifier_docker_image
            else:
                slug = re.sub(r"[^a-z0-9_.-]+", "-", self.task_id.lower()).strip("-.") or "task"
                image = _build_within(self.build_timeout, lambda: build_image(
                    self.tests_dir, "Dockerfile", f"termgym/harbor-{slug}-verifier:latest", log=lambda _line: None))
            workdir = cfg.verifier_workdir or (
                (docker_client().images.get(image).attrs.get("Config") or {}).get("WorkingDir") or "/")
            spec = SandboxSpec(workdir=workdir, image=image, network=cfg.allow_internet and self.network_policy != "off",
                               setup_commands=setup)
            return spec, True, workdir
        spec = self.sandbox_spec()
        if cfg.verifier_workdir:
            spec = dataclasses.replace(spec, workdir=cfg.verifier_workdir)
        spec.setup_commands = [*spec.setup_commands, *setup]
        return spec, False, spec.workdir

    def _copy_artifacts(self, source: Sandbox, target: Sandbox) -> None:
        """Carry ``/logs/artifacts`` and the task's ``artifacts`` paths from the agent's sandbox over."""
        import tempfile

        for path in [ARTIFACTS_DIR, *self.config.artifacts]:
            with tempfile.TemporaryDirectory() as tmp:
                try:
                    source.get_dir(path, tmp)
                except NotADirectoryError:
                    target.write_file(path, source.read_file(path))
                    continue
                except FileNotFoundError:
                    continue
                target.exec(f"mkdir -p {shlex.quote(path)}", timeout=60)
                target.put_dir(tmp, path)

    def _verify(self, sandbox: Sandbox, details: dict[str, Any], *, upload_tests: bool, workdir: str,
                step: TaskStep | None = None) -> Grade:
        tests_dirs = step.tests_dirs if step else [self.tests_dir]
        step_timeout = step.config.verifier_timeout_sec if step else None
        timeout = step_timeout * self.timeout_multiplier if step_timeout else self.verifier_timeout
        user = (step.config.verifier_user if step else None) or self.config.verifier_user
        env_table = {**self.config.verifier_env, **(step.config.verifier_env if step else {})}
        # Harbor removes only the old reward files (the verifier may read other logs); /tests is
        # emptied too, so a test the agent planted or doctored there cannot run.
        if upload_tests:
            prep = sandbox.exec(
                f"rm -rf {TESTS_DIR} && rm -f {VERIFIER_LOGS}/reward.txt {VERIFIER_LOGS}/reward.json && "
                f"mkdir -p {TESTS_DIR} {VERIFIER_LOGS} && chmod 777 {VERIFIER_LOGS}",
                timeout=60,
            )
            if prep.exit_code != 0:
                return _no_reward(details, f"could not prepare {TESTS_DIR}: {prep.output.strip()[-500:]}")
            for tests_dir in tests_dirs:  # a step's own tests/ goes over the shared one
                sandbox.put_dir(tests_dir, TESTS_DIR)
            if self.run_tests_script is not None:
                sandbox.write_file(f"{TESTS_DIR}/{self.test_script}", self.run_tests_script, 0o755)

        try:
            env = resolve_env(env_table, self._config_file, "verifier")
        except ValueError as exc:
            return _no_reward(details, str(exc))
        if self.config.layout == "terminal-bench":
            env.setdefault("TEST_DIR", TESTS_DIR)
        exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in env.items())
        script = f"{TESTS_DIR}/{self.test_script}"
        # Run the script itself, as Harbor does (chmod +x, then exec): its shebang picks the
        # interpreter (a script without one is run by bash). A subshell keeps cd and exports out
        # of the agent's persistent shell.
        # Terminal-Bench 1 types `bash /tests/run-tests.sh` instead, whatever the shebang says.
        run = f"bash {script}" if self.config.layout == "terminal-bench" else script
        inner = f"cd {shlex.quote(workdir)} && {exports}({run}) > {VERIFIER_LOGS}/test-stdout.txt 2>&1"
        command = f"chmod +x {script} && ( {as_user(inner, user)} ); echo \"exit=$?\""
        result = sandbox.exec(command, timeout=timeout)
        try:
            output = sandbox.read_file(f"{VERIFIER_LOGS}/test-stdout.txt").decode("utf-8", errors="replace")
        except FileNotFoundError:
            output = result.output
        exit_match = re.search(r"exit=(\d+)\s*$", result.output)
        exit_code = int(exit_match.group(1)) if exit_match else result.exit_code
        details.update(
            exit_code=exit_code,
            timed_out=result.timed_out,
            duration=round(result.duration, 3),
            output=output[-OUTPUT_TAIL:],
        )

        if self.config.layout == "terminal-bench":
            return self._grade_terminal_bench(output, exit_code, details, result.timed_out)
        if result.timed_out:
            # Harbor cancels the verifier (VerifierTimeoutError): a reward written before counts not.
            return _no_reward(details, f"the verifier timed out after {timeout:g} s")

        def read(name: str) -> str | None:
            try:
                return sandbox.read_file(f"{VERIFIER_LOGS}/{name}").decode("utf-8", errors="replace")
            except FileNotFoundError:
                return None

        files = {name: read(name) for name in ("reward.json", "reward.txt")}
        # What the verifier wrote, verbatim (cut), so a grade can be re-judged, e.g. by Harbor's parser.
        details["reward_files"] = {k: v[:2000] for k, v in files.items() if v is not None}
        try:
            reward = combine_rewards(files["reward.json"], files["reward.txt"])
        except RewardError as exc:
            return _no_reward(details, str(exc))
        details.update(reward_valid=True, reward_source=reward.source, rewards=reward.rewards)
        return Grade(reward.score, reward.score >= 1.0, details)

    def _grade_terminal_bench(self, output: str, exit_code: int, details: dict[str, Any], timed_out: bool) -> Grade:
        """Terminal-Bench 1: a test timeout leaves the task unresolved; else every parsed test must pass."""
        details["reward_valid"] = True
        if timed_out:
            # Terminal-Bench 1 marks a test timeout as a failure (unresolved), not an unparsed run.
            return Grade(0.0, False, details, error=f"the tests timed out after {self.verifier_timeout:g} s (unresolved)")
        if self.config.parser_name == "exit_code":
            passed = exit_code == 0
            return Grade(float(passed), passed, details)
        results = parse_pytest_summary(output)
        if results is None:
            return Grade(0.0, False, details, error="no pytest short test summary in the run-tests.sh output "
                         "(run pytest with -rA so the short test summary lists every test)")
        # As Terminal-Bench 1: resolved when every listed test passed (also when none is listed).
        n_passed = sum(1 for status in results.values() if status in TB_PASSING)
        details.update(tests=results, tests_passed=n_passed, tests_total=len(results))
        passed = n_passed == len(results)
        return Grade(float(passed), passed, details)

    # -- multi-step tasks -------------------------------------------------------------------------

    def prepare_step(self, sandbox: Sandbox, step: TaskStep, first: bool) -> str | None:
        """Before a step's agent: clear the last verifier's files, copy ``workdir/`` in, run its ``setup.sh``.

        Returns an error text when ``setup.sh`` failed (Harbor then goes on with a warning; so does this).
        """
        if not first:
            sandbox.exec(f"rm -rf {TESTS_DIR} {VERIFIER_LOGS}/* {AGENT_LOGS}/*", timeout=60)
        if step.workdir_dir is None:
            return None
        sandbox.put_dir(step.workdir_dir, self.workdir)
        if not (step.workdir_dir / "setup.sh").is_file():
            return None
        script = f"{self.workdir.rstrip('/')}/setup.sh"
        user = step.config.agent_user or self.agent_user
        result = sandbox.exec(as_user(f"cd {shlex.quote(self.workdir)} && bash {shlex.quote(script)}", user), timeout=600)
        return None if result.exit_code == 0 else f"step {step.name!r} setup.sh exited with {result.exit_code}"

    def grade_step(self, sandbox: Sandbox, step: TaskStep, reason: str) -> Grade:
        """Run one step's verifier in the agent's sandbox (shared mode)."""
        return self._verify(sandbox, {"reason": reason, "step": step.name}, upload_tests=True,
                            workdir=self.workdir, step=step)

    def step_oracle_commands(self, step: TaskStep) -> list[str] | None:
        """The step's reference solution, run as the oracle runs ``solve.sh``."""
        if step.solution_dir is None:
            return None
        files = sorted(p for p in step.solution_dir.rglob("*") if p.is_file())
        writes = [_write_file_command(f"{SOLUTION_DIR}/{p.relative_to(step.solution_dir).as_posix()}", p) for p in files]
        env = {"DEBIAN_FRONTEND": "noninteractive", **resolve_env(self.config.solution_env, self._config_file, "solution")}
        exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in env.items())
        script = f"{SOLUTION_DIR}/solve.sh"
        inner = f"cd {shlex.quote(self.workdir)} && {exports}({script}) > {AGENT_LOGS}/oracle.txt 2>&1"
        user = step.config.agent_user or self.agent_user
        return [f"rm -rf {SOLUTION_DIR} && mkdir -p {SOLUTION_DIR}\n" + "\n".join(writes),
                f"chmod +x {script} && {as_user(inner, user)}"]

    def combine_steps(self, grades: list[Grade | None]) -> Grade:
        """The trial's grade from its steps' grades, as Harbor's multi-step trial derives it.

        ``mean``: per-key mean over the steps that have rewards (a key a step lacks counts 0);
        ``final``: the last step's rewards. The reward is valid only if every step's was.
        """
        ran = [g for g in grades if g is not None]
        with_rewards = [g.details.get("rewards") or {} for g in ran if g.details.get("reward_valid")]
        details: dict[str, Any] = {"steps": [g.to_dict() for g in ran],
                                   "multi_step_reward_strategy": self.config.multi_step_reward_strategy}
        if self.config.multi_step_reward_strategy == "final":
            last = ran[-1] if ran else None
            rewards = (last.details.get("rewards") or {}) if last is not None and last.details.get("reward_valid") else {}
        else:
            keys = list(dict.fromkeys(k for r in with_rewards for k in r))
            rewards = {k: sum(r.get(k, 0.0) for r in with_rewards) / len(with_rewards) for k in keys}
        invalid = [g.details.get("step") for g in ran if not g.details.get("reward_valid")]
        if not rewards or invalid:
            why = f"no valid reward from step(s) {', '.join(map(str, invalid))}" if invalid else "no step has a reward"
            return _no_reward(details, why)
        details.update(reward_valid=True, rewards=rewards)
        score = rewards["reward"] if "reward" in rewards else next(iter(rewards.values()))
        return Grade(score, score >= 1.0, details)

    # -- the oracle ----------------------------------------------------------------------------

    def oracle_commands(self) -> list[str] | None:
        """Copy the solution to ``/solution`` and run it in the WORKDIR (Harbor's oracle agent)."""
        if self.solution_commands is not None:
            return list(self.solution_commands)
        if self.solution_dir is None or self.solution_script is None:
            return None
        files = self.solution_files or sorted(p for p in self.solution_dir.rglob("*") if p.is_file())
        writes = [_write_file_command(f"{SOLUTION_DIR}/{p.relative_to(self.solution_dir).as_posix()}", p)
                  for p in files]
        if self.config.layout == "terminal-bench":  # Terminal-Bench 1 runs `bash solution.sh`
            env = resolve_env(self.config.solution_env, self._config_file, "solution")
            exports = "".join(f"{k}={shlex.quote(v)} " for k, v in env.items())
            run = (f"cd {shlex.quote(self.workdir)} && {'env ' + exports if exports else ''}"
                   f"bash {SOLUTION_DIR}/{self.solution_script}")
            return [f"mkdir -p {SOLUTION_DIR}\n" + "\n".join(writes), run]
        # Harbor's oracle runs the script itself (chmod +x; its shebang decides) with
        # DEBIAN_FRONTEND=noninteractive and [solution.env], as the agent user, output to oracle.txt.
        env = {"DEBIAN_FRONTEND": "noninteractive",
               **resolve_env(self.config.solution_env, self._config_file, "solution")}
        exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in env.items())
        script = f"{SOLUTION_DIR}/{self.solution_script}"
        inner = f"cd {shlex.quote(self.workdir)} && {exports}({script}) > {AGENT_LOGS}/oracle.txt 2>&1"
        run = f"chmod +x {script} && {as_user(inner, self.agent_user)}"
        return [f"mkdir -p {SOLUTION_DIR}\n" + "\n".join(writes), run]


def _write_file_command(dest: str, source: Path) -> str:
    """A shell command recreating ``source`` at ``dest``: a readable heredoc for text, base64 otherwise."""
    data = source.read_bytes()
    mode = "755" if executable_files([source]) else "644"
    q = shlex.quote(dest)
    mkdir = f"mkdir -p {shlex.quote(str(Path(dest).parent))}"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and text.endswith("\n") and "\r" not in text:
        delimiter = "TERMGYM_EOF"
        while delimiter in text:
            delimiter += "_"
        return f"{mkdir} && cat > {q} <<'{delimiter}'\n{text}{delimiter}\nchmod {mode} {q}"
    encoded = base64.b64encode(data).decode()
    return f"{mkdir} && echo {encoded} | base64 -d > {q} && chmod {mode} {q}"


def _no_reward(details: dict[str, Any], why: str) -> Grade:
    """Harbor's "no valid reward": score 0, marked so means and pass rates can leave it out."""
    details["reward_valid"] = False
    return Grade(0.0, False, details, error=why)


def _build_within(seconds: float, build: Any) -> str:
    """Run ``build`` and fail once ``build_timeout_sec`` has passed (Harbor's EnvironmentStartTimeoutError)."""
    from concurrent.futures import ThreadPoolExecutor
    from concurrent.futures import TimeoutError as FutureTimeout

    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(build)
    try:
        return future.result(timeout=seconds)
    except FutureTimeout:
        raise TimeoutError(f"the image build ran past build_timeout_sec = {seconds:g} s") from None
    finally:
        pool.shutdown(wait=False)


def _check_copy_from(dockerfile: Path) -> None:
    """``COPY --from=<image>`` needs that image on the host; say so plainly instead of Docker's DNS error."""
    import docker.errors

    from termgym.sandbox.base import BackendUnavailable
    from termgym.sandbox.images import docker_client

    text = re.sub(r"\\\r?\n", " ", dockerfile.read_text(encoding="utf-8"))
    stages = {m.lower() for m in re.findall(r"^\s*FROM\s+\S+\s+AS\s+(\S+)", text, re.IGNORECASE | re.MULTILINE)}
    sources = re.findall(r"^\s*COPY\s+.*?--from=(\S+)", text, re.IGNORECASE | re.MULTILINE)
    client = None
    for source in sources:
        if source.lower() in stages or source.isdigit():
            continue
        client = client or docker_client()
        try:
            client.images.get(source)
        except docker.errors.ImageNotFound:
            raise BackendUnavailable(
                f"{dockerfile} copies from the image {source} (COPY --from={source}), which is not on the Docker "
                f"host, and no registry is reachable: `docker load` it or build and tag it as {source}"
            ) from None


def _warn_stand_in_base(task_id: str, dockerfile: Path) -> str | None:
    """Warn (and return why) when a task's FROM image is termgym's Debian base re-tagged (e.g. as ubuntu:24.04)."""
    import docker.errors

    from termgym.sandbox.images import DEFAULT_BASE_IMAGE, docker_client, dockerfile_bases

    client = docker_client()
    try:
        base_id = client.images.get(DEFAULT_BASE_IMAGE).id
    except docker.errors.ImageNotFound:
        return None
    for name in dockerfile_bases(dockerfile.read_text(encoding="utf-8")):
        if name.split(":")[0] == DEFAULT_BASE_IMAGE.split(":")[0]:
            continue
        try:
            image = client.images.get(name)
        except docker.errors.ImageNotFound:
            continue
        if image.id == base_id:
            why = (f"its base image {name} is termgym's {DEFAULT_BASE_IMAGE} re-tagged, a stand-in with another OS "
                   "and Python than the task was written for; its scores are not comparable with Harbor's")
            _log.warning("Harbor task %r: %s", task_id, why)
            return why
    return None
