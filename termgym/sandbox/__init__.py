"""Sandbox backends. ``make_sandbox("local"|"docker", spec)`` picks one by name."""

from __future__ import annotations

from termgym.sandbox.base import (
    BackendUnavailable,
    ExecResult,
    Limits,
    Mode,
    OnTimeout,
    Sandbox,
    SandboxError,
    SandboxSpec,
    ServicePort,
    run_blocking,
)

BACKENDS = ("local", "docker")


def make_sandbox(backend: str, spec: SandboxSpec | None = None, *, mode: Mode = "persistent", **options) -> Sandbox:
    """Create (not start) a sandbox of the named backend.

    ``options`` go to the backend's constructor (e.g. ``docker_host=`` or ``pool=`` for docker).
    """
    if backend == "local":
        from termgym.sandbox.local import BubblewrapSandbox

        return BubblewrapSandbox(spec, mode=mode, **options)
    if backend == "docker":
        from termgym.sandbox.docker import DockerSandbox

        return DockerSandbox(spec, mode=mode, **options)
    raise ValueError(f"unknown sandbox backend {backend!r}; choose one of {', '.join(BACKENDS)}")


class FreshSandboxes:
    """Starts sandboxes of one backend on demand and closes every one of them at the end.

    Graders get one as ``GradingContext.new_sandbox`` (a fresh sandbox per grade, never the agent's)::

        with FreshSandboxes("local") as new_sandbox:
            details = task.grade_patch(patch, new_sandbox)
    """

    def __init__(self, backend: str = "local", *, mode: Mode = "persistent", **options) -> None:
        self.backend, self.mode, self.options = backend, mode, options
        self.opened: list[Sandbox] = []

    def __call__(self, spec: SandboxSpec) -> Sandbox:
        box = make_sandbox(self.backend, spec, mode=self.mode, **self.options)
        self.opened.append(box)  # before start: a sandbox that fails half-way is closed too
        box.start()
        return box

    def close(self) -> None:
        while self.opened:
            self.opened.pop().close()

    def __enter__(self) -> FreshSandboxes:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


__all__ = [
    "BACKENDS",
    "FreshSandboxes",
    "BackendUnavailable",
    "ExecResult",
    "Limits",
    "Mode",
    "OnTimeout",
    "Sandbox",
    "SandboxError",
    "SandboxSpec",
    "ServicePort",
    "make_sandbox",
    "run_blocking",
]
