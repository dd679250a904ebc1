"""A bubblewrap sandbox whose start is not reported in time fails its start, and never hangs.

Under a load of 170 (256 concurrent SWE-SYNTH episodes on 2 cores) bubblewrap once took longer than
the info timeout to report its sandbox started; the error path then read bubblewrap's output with a
blocking read while the sandbox's shell held the pipe open, and 25 episode threads waited for ever.
"""

from __future__ import annotations

import threading

from termgym.sandbox import SandboxError, SandboxSpec, local
from termgym.sandbox.local import BubblewrapSandbox


def live_bubblewraps() -> set[int]:
    import psutil

    return {c.pid for c in psutil.Process().children() if c.name() == "bwrap" and c.status() != psutil.STATUS_ZOMBIE}


def test_a_start_bubblewrap_never_reports_fails_at_once_and_leaves_no_process(monkeypatch):
    before = live_bubblewraps()
    real_read_info = local._read_info

    def times_out(fd, timeout=None):
        real_read_info(fd, 0.0)  # what a timeout returns: nothing read yet ({}), bubblewrap still running
        return {}

    monkeypatch.setattr(local, "_read_info", times_out)
    sandbox = BubblewrapSandbox(SandboxSpec())
    outcome: list[BaseException | None] = []

    def start() -> None:
        try:
            sandbox.start()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - inspected below
            outcome.append(exc)

    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    thread.join(30)
    try:
        assert not thread.is_alive(), "the start hung reading bubblewrap's output"
        assert isinstance(outcome[0], SandboxError) and "failed to start" in str(outcome[0]), outcome
        assert live_bubblewraps() <= before, "bubblewrap still runs after the failed start"
    finally:
        if not thread.is_alive():  # a hung start holds the sandbox's lock: close would wait for it too
            sandbox.close()

