"""The local sandbox's isolation guarantees, each checked against a real bubblewrap sandbox."""

from __future__ import annotations

import contextlib
import gc
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from termgym import CommandTask, ListSuite
from termgym.env import TerminalEnv
from termgym.sandbox import Limits, SandboxSpec, make_sandbox


@pytest.fixture
def box():
    sandbox = make_sandbox("local", SandboxSpec(limits=Limits(memory_mb=256, pids=64)))
    sandbox.start()
    yield sandbox
    sandbox.close()


def _processes_in_pidns(pidns: str) -> list[int]:
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.readlink(f"/proc/{entry.name}/ns/pid") == pidns:
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


@contextlib.contextmanager
def _pinned_pidns(pid: int):
    """The pid namespace of ``pid`` by name, kept allocated while the block runs.

    The kernel hands a freed namespace's number to the next namespace made anywhere on the
    machine (parallel jobs make sandboxes all the time), so a check after close could find a
    stranger's processes under the old name. An open handle on the namespace keeps its number
    taken without keeping any process alive.
    """
    fd = os.open(f"/proc/{pid}/ns/pid", os.O_RDONLY)
    try:
        yield os.readlink(f"/proc/{pid}/ns/pid")
    finally:
        os.close(fd)


def test_outbound_network_is_refused(box):
    result = box.exec("python3 -c \"import socket; socket.create_connection(('93.184.216.34', 80), timeout=3)\"")
    assert result.exit_code != 0
    assert "Network is unreachable" in result.output or "unreachable" in result.output.lower()


def test_host_loopback_services_are_unreachable(box):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted: list[bool] = []

    def accept():
        server.settimeout(3)
        try:
            server.accept()
            accepted.append(True)
        except OSError:
            pass

    thread = threading.Thread(target=accept)
    thread.start()
    result = box.exec(f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)\"")
    thread.join()
    server.close()
    assert result.exit_code != 0 and "Connection refused" in result.output
    assert not accepted


def test_system_is_read_only_and_writes_outside_workspace_fail(box):
    result = box.exec("touch /usr/bin/termgym-evil; echo $?; echo x >> /etc/ld.so.cache; echo $?")
    assert result.output.split()[0] != "0" and "Read-only file system" in result.output
    assert not Path("/usr/bin/termgym-evil").exists()
    assert box.exec("echo data > /workspace/ok.txt && cat /workspace/ok.txt").output == "data\n"


def test_mount_and_remount_are_refused(box):
    result = box.exec("mount -o remount,rw /usr; echo rc=$?; mount -t tmpfs none /mnt; echo rc=$?")
    assert "rc=0" not in result.output
    assert box.exec("touch /usr/x").exit_code != 0


def test_host_home_and_task_store_are_invisible(box, tmp_path):
    secret = Path("/root/.termgym-test-secret")
    secret.write_text("TOP-SECRET")
    try:
        result = box.exec("ls /root; cat /root/.termgym-test-secret; ls /work /home; grep -r TOP-SECRET / "
                          "--exclude-dir=proc --exclude-dir=sys --exclude-dir=usr 2>/dev/null | head -1")
        assert "TOP-SECRET" not in result.output
        assert "No such file" in result.output
    finally:
        secret.unlink()


def test_grading_material_is_not_readable_by_the_agent():
    task = CommandTask("secret", "Pass the hidden test.", grade_command="sh hidden_test.sh",
                       grade_files={"hidden_test.sh": "# REFERENCE-ANSWER-42\ngrep -q 42 answer.txt\n"},
                       oracle=["echo 42 > answer.txt"])
    env = TerminalEnv(ListSuite([task]))
    env.reset(seed=0)
    obs, *_ = env.step("```bash\ngrep -rs REFERENCE-ANSWER /workspace /tmp /root /etc /var /run /opt /srv /mnt 2>/dev/null | head; ls -a\n```")
    assert "REFERENCE-ANSWER-42" not in obs
    obs, reward, terminated, truncated, info = env.step("```bash\necho 42 > answer.txt\n```")
    obs, reward, terminated, truncated, info = env.step(env.protocol.submit_message())
    assert terminated and reward == 1.0
    env.close()


def test_fork_bomb_is_contained_and_the_sandbox_stays_usable(box):
    box.exec(":(){ :|:& };:", timeout=5)
    time.sleep(0.5)
    for _ in range(3):  # the sandbox notices it is at its process limit and clears it
        box.exec("true", timeout=10)
    result = box.exec("echo alive; ps -e --no-headers | wc -l", timeout=10)
    assert "alive" in result.output
    assert int(result.output.split()[-1]) < 10


def test_memory_hog_is_killed_and_the_sandbox_stays_usable(box):
    result = box.exec("python3 -c \"x = bytearray(1 << 30); print('allo' + 'cated')\"", timeout=60)
    assert "allocated" not in result.output and result.exit_code != 0
    assert box.exec("echo still here").output == "still here\n"


def test_output_flood_is_capped(box):
    start = time.monotonic()
    result = box.exec("yes | head -c 1G; yes", timeout=60)
    assert result.truncated
    assert len(result.output.encode()) < 2 * box.spec.limits.output_bytes
    assert "elided" in result.output
    assert time.monotonic() - start < 30
    assert box.exec("echo next").output == "next\n"


def test_timeout_kills_the_command_and_its_children(box):
    start = time.monotonic()
    result = box.exec("sleep 1000 & sleep 1000 & sleep 1000", timeout=1)
    assert result.timed_out and result.exit_code == 124
    assert time.monotonic() - start < 5
    assert box.exec("pgrep -c sleep || true").output.strip() == "0"


def test_a_stuck_shell_is_restarted(box):
    box.exec("cd /tmp && export X=1")
    result = box.exec("while true; do :; done", timeout=1)
    assert result.timed_out and result.restarted
    after = box.exec("pwd; echo X=$X")
    assert after.output == "/workspace\nX=\n"


def test_no_process_is_left_after_close():
    box = make_sandbox("local", SandboxSpec())
    box.start()
    box.exec("sleep 600 & (setsid sleep 601 &) ; nohup sleep 602 >/dev/null 2>&1 &")
    with _pinned_pidns(box._init_pid) as pidns:
        assert pidns == box._pidns
        assert len(_processes_in_pidns(pidns)) >= 4
        host_dir = box.host_dir
        box.close()
        assert _processes_in_pidns(pidns) == []
    assert not host_dir.exists()


def test_garbage_collected_env_leaves_nothing_running(hello_suite):
    env = TerminalEnv(hello_suite)
    env.reset(seed=1)
    env.step("```bash\nsleep 700 &\n```")
    with _pinned_pidns(env.sandbox._init_pid) as pidns:
        assert pidns == env.sandbox._pidns
        del env
        gc.collect()
        assert _processes_in_pidns(pidns) == []


def test_exception_mid_episode_leaves_nothing_running(tmp_path):
    script = tmp_path / "crash.py"
    script.write_text(
        "from termgym import CommandTask, ListSuite\nfrom termgym.env import TerminalEnv\n"
        "env = TerminalEnv(ListSuite([CommandTask('t', 'x', grade_command='true')]))\n"
        "env.reset(seed=0)\nenv.step('```bash\\nsleep 703 &\\n```')\n"
        "import sys\nprint(env.sandbox._init_pid, flush=True)\nsys.stdin.readline()\n"
        "raise RuntimeError('boom')\n"
    )
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    init_pid = int(proc.stdout.readline())
    # Pin the namespace while the crashing program still holds it open, then let it crash.
    with _pinned_pidns(init_pid) as pidns:
        _, stderr = proc.communicate("go\n", timeout=60)
        assert "boom" in stderr
        # The sandbox dies with its parent process (the kernel tears the pid namespace down after the
        # interpreter is gone): give that a moment on a loaded machine, but it must happen.
        deadline = time.monotonic() + 10
        while _processes_in_pidns(pidns) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _processes_in_pidns(pidns) == []


def test_invalid_utf8_is_decoded_safely(box):
    result = box.exec("printf 'ok \\xff\\xfe\\x00 end'")
    assert result.output.startswith("ok ") and result.output.endswith(" end")
    result.output.encode("utf-8")  # always valid text


def test_symlink_planted_by_agent_does_not_redirect_host_writes(box, tmp_path):
    target = tmp_path / "host-file.txt"
    target.write_text("host data")
    box.exec(f"ln -s {target} /workspace/tests.py")
    box.write_file("tests.py", "grader data")
    assert target.read_text() == "host data"
    assert box.read_file("tests.py") == b"grader data"


def test_missing_bubblewrap_gives_an_actionable_error(monkeypatch):
    import termgym.sandbox.local as local
    from termgym.sandbox import BackendUnavailable

    monkeypatch.setattr(local.shutil, "which", lambda name: None)
    with pytest.raises(BackendUnavailable, match="apt-get install bubblewrap"):
        make_sandbox("local", SandboxSpec()).start()
