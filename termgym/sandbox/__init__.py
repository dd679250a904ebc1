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


__all__ = [
    "BACKENDS",
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
