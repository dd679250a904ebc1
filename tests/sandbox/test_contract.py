"""The sandbox contract, run against every backend (``local`` and ``docker``).

Each test states one promise of :class:`termgym.sandbox.Sandbox`; a backend passes only if it
keeps all of them.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from termgym.sandbox import Limits, SandboxError, SandboxSpec, make_sandbox


def host_processes_matching(text: str) -> list[int]:
    """Host pids whose command line contains ``text`` (sandboxed processes are visible to root)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmdline and str(os.getpid()) != entry.name:
                found.append(int(entry.name))
    return found


def host_addresses() -> list[str]:
    """IPv4 addresses of this host: every one must be unreachable from a sandbox without network."""
    addresses = {"127.0.0.1", "172.17.0.1"}
    for line in Path("/proc/net/fib_trie").read_text().splitlines() if Path("/proc/net/fib_trie").exists() else []:
        line = line.strip()
        if line.startswith("|-- "):
            addr = line[4:]
            if addr.count(".") == 3 and not addr.endswith((".0", ".255")):
                addresses.add(addr)
    return sorted(addresses)


@pytest.fixture
def tcp_server():
    """A TCP server on all host interfaces that counts connections: (port, counter list)."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", 0))
    server.listen(16)
    server.settimeout(0.2)
    hits: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, addr = server.accept()
            except (TimeoutError, OSError):
                continue
            hits.append(addr[0])
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], hits
    stop.set()
    thread.join()
    server.close()


# -- exec ----------------------------------------------------------------------------------------


def test_exec_returns_interleaved_output_and_exit_code(make):
    sb = make()
    result = sb.exec("echo out; echo err >&2; echo out2; exit_with() { return $1; }; exit_with 7")
    assert result.output == "out\nerr\nout2\n"
    assert result.exit_code == 7
    assert not result.timed_out and not result.truncated
    assert result.duration >= 0
    assert sb.exec("true").exit_code == 0
    assert sb.exec("false").exit_code == 1
    assert sb.exec("printf 'no newline'").output == "no newline"


def test_invalid_utf8_is_replaced_not_raised(make):
    result = make().exec(r"printf 'ok \xff\xfe done\n'; printf 'caf\xc3\xa9\n'")
    assert result.output == "ok \ufffd\ufffd done\ncafé\n"


def test_commands_read_no_stdin(make):
    # A command waiting for input must not hang (stdin is /dev/null) nor eat the next command.
    sb = make()
    result = sb.exec("cat; read -r x; echo got:$x", timeout=10)
    assert result.exit_code == 0 and result.output == "got:\n"
    assert sb.exec("echo next").output == "next\n"


def test_nul_byte_in_command_is_refused(make):
    result = make().exec("echo a\x00b")
    assert result.exit_code == 2 and "NUL" in result.output


def test_workdir_and_env_from_spec(make):
    sb = make(SandboxSpec(workdir="/app", env={"TERMGYM_TEST_VAR": "hello world"}))
    assert sb.exec("pwd; echo $TERMGYM_TEST_VAR").output == "/app\nhello world\n"
    assert sb.exec("touch made-here && ls /app").output == "made-here\n"


def test_read_only_binds_are_shared_and_cannot_be_written(make, tmp_path):
    shared = tmp_path / "deps"
    (shared / "pkg").mkdir(parents=True)
    (shared / "pkg" / "__init__.py").write_text("VALUE = 42\n")
    os.chmod(tmp_path, 0o755)
    box = make(SandboxSpec(ro_binds={str(shared): "/opt/deps"}, env={"PYTHONPATH": "/opt/deps"}))
    out = box.exec("python3 -c 'import pkg; print(pkg.VALUE)'; touch /opt/deps/x; echo rc=$?")
    assert "42" in out.output and "rc=1" in out.output, out.output
    assert not (shared / "x").exists()


@pytest.mark.parametrize("binds, problem", [({"/no/such/dir": "/opt/x"}, "does not exist"),
                                            ({"/tmp": "relative/x"}, "absolute"),
                                            ({"/tmp": "/usr"}, "outside")])
def test_bad_read_only_binds_are_refused_by_name(make, binds, problem):
    with pytest.raises(SandboxError, match=problem):
        make(SandboxSpec(ro_binds=binds))


def test_persistent_mode_keeps_cwd_and_variables(make):
    sb = make()
    sb.exec("mkdir -p sub && cd sub && export EXPORTED=1 && PLAIN=2 && f() { echo fn; }")
    result = sb.exec('pwd; echo "$EXPORTED $PLAIN"; f')
    assert result.output == f"{sb.workdir}/sub\n1 2\nfn\n"


def test_stateless_mode_runs_each_command_fresh_in_workdir(make):
    sb = make(mode="stateless")
    sb.exec("mkdir -p sub && cd sub && export EXPORTED=1 && touch ../file-persists")
    result = sb.exec('pwd; echo "[$EXPORTED]"; ls')
    assert result.output == f"{sb.workdir}\n[]\nfile-persists\nsub\n"
    # `exit` only ends that command's subshell
    assert sb.exec("exit 5").exit_code == 5
    assert sb.exec("echo alive").output == "alive\n"


def test_exit_in_persistent_mode_reports_its_code_and_a_new_shell_takes_over(make):
    sb = make()
    sb.exec("cd /tmp && export TG_GONE=1")
    result = sb.exec("echo bye; exit 3")
    assert result.exit_code == 3 and result.restarted and result.output.startswith("bye\n")
    assert "the shell exited" in result.output
    assert sb.exec('pwd; echo "<$TG_GONE>"').output == f"{sb.workdir}\n<>\n"


@pytest.mark.parametrize("mode", ["persistent", "stateless"])
def test_output_that_looks_like_a_control_line_is_only_output(make, mode):
    """The shell's control lines (exit codes, READY, EXIT) cannot be forged by printing them."""
    sb = make(mode=mode)
    fake = "\\n__TG_0123_RC 0 1\\nRC 0 1\\nEXIT 0\\nREADY 1\\n"
    result = sb.exec(f"printf '{fake}'; echo after; (exit 7)")
    assert result.exit_code == 7 and not result.restarted
    assert result.output == "\n__TG_0123_RC 0 1\nRC 0 1\nEXIT 0\nREADY 1\nafter\n"


def test_syntax_error_is_a_failed_command_not_a_dead_shell(make):
    sb = make()
    sb.exec("cd /tmp")
    result = sb.exec("echo 'unterminated")
    assert result.exit_code != 0 and not result.restarted
    assert sb.exec("pwd").output == "/tmp\n"


# -- timeouts ------------------------------------------------------------------------------------


def test_timeout_kills_the_whole_process_tree(make):
    sb = make()
    tag = f"{300 + uuid.uuid4().int % 600}.{uuid.uuid4().int % 1000}"
    started = time.monotonic()
    result = sb.exec(f"sleep {tag} & (sleep {tag}; echo never) & bash -c 'sleep {tag}'; echo never", timeout=1)
    assert time.monotonic() - started < 8
    assert result.timed_out and result.exit_code == 124
    deadline = time.monotonic() + 5
    while host_processes_matching(f"sleep {tag}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert host_processes_matching(f"sleep {tag}") == []
    assert sb.exec("echo still usable").output.endswith("still usable\n")


def test_timeout_of_a_builtin_loop_restarts_the_shell(make):
    sb = make()
    sb.exec("cd /tmp")
    started = time.monotonic()
    result = sb.exec("while :; do :; done", timeout=1)
    assert time.monotonic() - started < 10
    assert result.timed_out and result.exit_code == 124 and result.restarted
    after = sb.exec("pwd")
    assert after.exit_code == 0 and after.output == f"{sb.workdir}\n"


def test_timeout_kill_command_keeps_the_shell_and_the_rest_of_the_line_runs(make):
    """The default on_timeout: only the running program dies; cwd, variables and the line go on."""
    sb = make()
    sb.exec("cd /tmp && export TG_KEPT=yes")
    result = sb.exec("sleep 30; echo rest > /tmp/after.txt", timeout=1)
    assert result.timed_out and result.exit_code == 124 and not result.restarted
    after = sb.exec('pwd; echo "$TG_KEPT"; cat /tmp/after.txt')
    assert after.output == "/tmp\nyes\nrest\n"


@pytest.mark.parametrize("mode", ["persistent", "stateless"])
def test_timeout_kill_shell_runs_nothing_more_of_the_line(make, mode):
    """on_timeout="kill_shell" (an episode deadline): the shell dies too, a fresh one takes over."""
    sb = make(mode=mode)
    tag = f"{300 + uuid.uuid4().int % 600}.{uuid.uuid4().int % 1000}"
    sb.exec("echo kept > before.txt; cd /tmp && export TG_KEPT=yes")
    started = time.monotonic()
    result = sb.exec(f"sleep {tag} & sleep 20; echo ok > {sb.workdir}/hello.txt", timeout=2, on_timeout="kill_shell")
    assert time.monotonic() - started < 15, "the command must end at its timeout, not after the sleep"
    assert result.timed_out and result.exit_code == 124 and result.restarted
    assert "rest of the command line did not run" in result.output
    time.sleep(1)  # a shell still alive would write hello.txt right after its sleep was killed
    after = sb.exec('test -e hello.txt && echo present || echo absent; pwd; echo "<$TG_KEPT>"; cat before.txt')
    assert after.output == f"absent\n{sb.workdir}\n<>\nkept\n"
    assert host_processes_matching(f"sleep {tag}") == []


def test_abort_kills_every_process_and_keeps_the_files(make):
    sb = make()
    tag = f"{300 + uuid.uuid4().int % 600}.{uuid.uuid4().int % 1000}"
    sb.exec(f"echo kept > before.txt; (sleep {tag}; echo late > late.txt) > /dev/null 2>&1 &")
    deadline = time.monotonic() + 10
    while not host_processes_matching(f"sleep {tag}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_processes_matching(f"sleep {tag}")
    sb.abort()
    assert host_processes_matching(f"sleep {tag}") == []
    after = sb.exec("cat before.txt; test -e late.txt || echo no-late")
    assert after.output == "kept\nno-late\n"


def test_stop_commands_kills_every_command_and_keeps_the_shell(make):
    sb = make()
    tag = f"{300 + uuid.uuid4().int % 600}.{uuid.uuid4().int % 1000}"
    sb.exec(f"export TG_KEPT=yes; cd /tmp; echo kept > before.txt; "
            f"(sleep {tag}; echo late > late.txt) > /dev/null 2>&1 & "
            f"setsid sh -c 'sleep {tag}' > /dev/null 2>&1 < /dev/null &")
    deadline = time.monotonic() + 10
    while len(host_processes_matching(f"sleep {tag}")) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(host_processes_matching(f"sleep {tag}")) >= 2  # the subshell's sleep, the new session's
    sb.stop_commands()
    assert host_processes_matching(f"sleep {tag}") == []
    after = sb.exec('cat before.txt; test -e late.txt || echo no-late; pwd; echo "<$TG_KEPT>"')
    assert after.output == "kept\nno-late\n/tmp\n<yes>\n" and not after.restarted, after


def test_unknown_on_timeout_is_refused(make):
    sb = make()
    with pytest.raises(ValueError, match="on_timeout must be one of .*'kill_shell'.*not 'kill_all'"):
        sb.exec("true", on_timeout="kill_all")


def test_default_timeout_comes_from_limits(make):
    sb = make(SandboxSpec(limits=Limits(command_timeout=1)))
    result = sb.exec("sleep 30")
    assert result.timed_out and result.exit_code == 124 and result.duration < 8


# -- output cap ----------------------------------------------------------------------------------


def test_output_cap_stops_a_flood_and_keeps_head_and_tail(make):
    sb = make(SandboxSpec(limits=Limits(output_bytes=20_000)))
    started = time.monotonic()
    result = sb.exec("echo FIRST-LINE; yes 0123456789", timeout=60)
    assert time.monotonic() - started < 20, "a flood must be stopped at the cap, not at the timeout"
    assert result.truncated and not result.timed_out
    assert result.output.startswith("FIRST-LINE\n")
    assert "elided" in result.output
    assert len(result.output.encode()) < 20_000 + 1_000
    small = sb.exec("seq 1 1000")
    assert not small.truncated and small.output == "".join(f"{i}\n" for i in range(1, 1001))


# -- limits --------------------------------------------------------------------------------------


def test_memory_hog_is_killed_and_sandbox_survives(make):
    sb = make(SandboxSpec(limits=Limits(memory_mb=128)))
    result = sb.exec("python3 -c \"b = bytearray(768 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]); "
                     "print('SURV' + 'IVED')\"", timeout=60)
    assert result.exit_code != 0
    assert "SURVIVED" not in result.output
    assert sb.exec("echo ok").output.endswith("ok\n")


def test_fork_bomb_is_contained_and_sandbox_stays_usable(make):
    sb = make(SandboxSpec(limits=Limits(pids=64)))
    sb.exec(":(){ :|:& };:", timeout=5)
    # The bomb may still be running in the background: the sandbox must clear it by itself.
    deadline = time.monotonic() + 60
    result = None
    while time.monotonic() < deadline:
        result = sb.exec("ls / > /dev/null && echo usable", timeout=15)
        if result.exit_code == 0 and result.output.endswith("usable\n"):
            break
    assert result is not None and result.output.endswith("usable\n"), result
    # the host is not affected: it can still fork
    assert os.system("true") == 0


def test_pids_limit_caps_processes(make):
    sb = make(SandboxSpec(limits=Limits(pids=32)))
    script = (
        "import os, time\n"
        "children = []\n"
        "for _ in range(100):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(20)\n"
        "        os._exit(0)\n"
        "    children.append(pid)\n"
        "print('forked', len(children))\n"
        "for pid in children:\n"
        "    os.kill(pid, 9)\n"
    )
    sb.write_file("forker.py", script)
    result = sb.exec("python3 forker.py", timeout=60)
    count = int(result.output.split("forked", 1)[1].split()[0])
    assert 5 < count < 32
    assert sb.exec("echo ok").output == "ok\n"


# -- network -------------------------------------------------------------------------------------


PROBE = "for a in {addrs}; do if timeout 3 bash -c \"echo > /dev/tcp/$a/{port}\" 2>/dev/null; then echo reached $a; fi; done; echo done"


def test_no_network_by_default(make, tcp_server):
    port, hits = tcp_server
    sb = make()
    result = sb.exec(PROBE.format(addrs=" ".join(host_addresses()), port=port), timeout=60)
    assert "reached" not in result.output and result.output.endswith("done\n")
    assert hits == []
    interfaces = sb.exec("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '").output.split()
    assert interfaces == ["lo"]


def test_network_when_asked_reaches_the_host(make, tcp_server):
    # The positive control for test_no_network_by_default: the probe does detect a network.
    port, hits = tcp_server
    sb = make(SandboxSpec(network=True))
    result = sb.exec(PROBE.format(addrs=" ".join(host_addresses()), port=port), timeout=60)
    assert "reached" in result.output
    # The kernel completes the handshake from the listen backlog; the server thread's accept (which
    # counts the hit) may run a moment later on a loaded machine.
    deadline = time.monotonic() + 10
    while not hits and time.monotonic() < deadline:
        time.sleep(0.05)
    assert hits


# -- files ---------------------------------------------------------------------------------------


def test_file_write_read_roundtrip(make):
    sb = make()
    sb.write_file("notes/a.txt", "hello\n")
    sb.write_file("/opt/data/blob.bin", b"\x00\xff\x01binary")
    sb.write_file("run.sh", "#!/bin/sh\necho ran\n", mode=0o755)
    assert sb.exec("cat notes/a.txt; ./run.sh").output == "hello\nran\n"
    assert sb.read_file("notes/a.txt") == b"hello\n"
    assert sb.read_file(f"{sb.workdir}/notes/a.txt") == b"hello\n"
    assert sb.read_file("/opt/data/blob.bin") == b"\x00\xff\x01binary"
    sb.exec("printf 'from shell' > made.txt")
    assert sb.read_file("made.txt") == b"from shell"
    sb.write_file("notes/a.txt", "replaced")
    assert sb.read_file("notes/a.txt") == b"replaced"
    with pytest.raises(FileNotFoundError):
        sb.read_file("does/not/exist")


def test_directory_transfer_roundtrip(make, tmp_path):
    src = tmp_path / "src"
    (src / "pkg" / "deep").mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("X = 1\n")
    (src / "pkg" / "deep" / "data.bin").write_bytes(bytes(range(256)))
    (src / "top.txt").write_text("top\n")
    sb = make()
    sb.put_dir(src, "project")
    listing = sb.exec("(cd project && find . -type f | sort)").output
    assert listing == "./pkg/__init__.py\n./pkg/deep/data.bin\n./top.txt\n"
    sb.exec("(cd project && echo added > pkg/new.txt && rm top.txt)")
    out = tmp_path / "out"
    sb.get_dir("project", out)
    assert (out / "pkg" / "new.txt").read_text() == "added\n"
    assert (out / "pkg" / "deep" / "data.bin").read_bytes() == bytes(range(256))
    assert not (out / "top.txt").exists()
    with pytest.raises(FileNotFoundError):
        sb.get_dir("no-such-dir", tmp_path / "x")


def test_get_dir_never_writes_outside_the_target(make, tmp_path):
    sb = make()
    outside = tmp_path / "outside"
    outside.mkdir()
    # A symlink planted by the agent must come back as a link, never be followed on the host.
    sb.exec(f"mkdir -p d && ln -s {outside} d/escape && echo x > d/file")
    sb.get_dir("d", tmp_path / "copy")
    assert (tmp_path / "copy" / "file").read_text() == "x\n"
    assert list(outside.iterdir()) == []


def test_spec_files_copy_dirs_and_setup_commands(make, tmp_path):
    src = tmp_path / "repo"
    src.mkdir()
    (src / "module.py").write_text("VALUE = 41\n")
    spec = SandboxSpec(
        workdir="/work",
        files={"config.ini": "[a]\nb = 1\n", "/etc/termgym-test.conf": b"abs\n"},
        copy_dirs={str(src): "/work/repo"},
        setup_commands=["echo setup-ran > marker", "python3 -c 'import sys; sys.exit(0)'"],
    )
    sb = make(spec)
    assert sb.exec("cat config.ini /etc/termgym-test.conf marker repo/module.py").output == (
        "[a]\nb = 1\nabs\nsetup-ran\nVALUE = 41\n"
    )
    # a copy, not a bind: the host directory is untouched by the agent's edits
    sb.exec("echo changed > repo/module.py")
    assert (src / "module.py").read_text() == "VALUE = 41\n"


def test_failing_setup_command_raises_and_cleans_up(backend):
    tag = f"{uuid.uuid4().int % 900 + 100}.5"
    sandbox = make_sandbox(backend, SandboxSpec(setup_commands=[f"sleep {tag} &", "exit 3"]))
    with pytest.raises(SandboxError, match="exit 3"):
        sandbox.start()
    assert sandbox.closed
    time.sleep(0.3)
    assert host_processes_matching(f"sleep {tag}") == []


# -- cleanup -------------------------------------------------------------------------------------


def test_a_workdir_that_cannot_exist_is_a_clear_error(backend):
    sandbox = make_sandbox(backend, SandboxSpec(workdir="/dev/null/x"))
    with pytest.raises(SandboxError, match="/dev/null/x"):
        sandbox.start()
    assert sandbox.closed


def _three_background_sleeps(sb, tries: int = 3, wait: float = 20) -> str:
    """Start a plain, a nohup and a setsid background sleep in ``sb``; return their tag once all three run.

    Twice in fresh-clone CI runs (lane A starting Ray clusters beside this lane) one of the three was
    gone for good within the wait, 20 s included, before the sandbox was closed; what took it is not
    proven (Ray's process-group cleanup, which would fit, is off by default). This test is about what
    close leaves, so the three are started again under a new tag; a sandbox that cannot start them
    fails every try.
    """
    seen = []
    for _ in range(tries):
        tag = f"{uuid.uuid4().int % 900 + 100}.25"
        sb.exec(f"sleep {tag} & nohup sleep {tag} >/dev/null 2>&1 & (setsid sleep {tag} &)")
        deadline = time.monotonic() + wait  # the setsid sleep may still be starting when exec returns
        while len(host_processes_matching(f"sleep {tag}")) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        found = host_processes_matching(f"sleep {tag}")
        if len(found) == 3:
            return tag
        seen.append((tag, found))
    raise AssertionError(f"never three background sleeps running at once: {seen}")


def test_close_leaves_nothing_running(make):
    sb = make()
    tag = _three_background_sleeps(sb)
    sb.close()
    sb.close()  # idempotent
    deadline = time.monotonic() + 5
    while host_processes_matching(f"sleep {tag}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert host_processes_matching(f"sleep {tag}") == []
    with pytest.raises(SandboxError):
        sb.exec("echo after close")


def test_sabotage_a_sandbox_that_drops_the_setsid_sleep_fails_the_three_sleeps_precondition():
    """The retry of test_close_leaves_nothing_running cannot hide a sandbox that never runs a setsid
    process: with the setsid sleep taken out of the command, every try comes up one short."""
    sb = make_sandbox("local", SandboxSpec())
    sb.start()
    real_exec = sb.exec
    sb.exec = lambda command, *args, **kwargs: real_exec(command.replace("(setsid sleep", "(true sleep"), *args, **kwargs)
    try:
        with pytest.raises(AssertionError, match="never three background sleeps"):
            _three_background_sleeps(sb, tries=2, wait=1)
    finally:
        sb.close()


def test_context_manager_closes(backend):
    with make_sandbox(backend, SandboxSpec()) as sb:
        assert sb.exec("echo in").output == "in\n"
    assert sb.closed


# -- concurrency ---------------------------------------------------------------------------------


def test_sixteen_sandboxes_at_once_are_isolated(backend):
    def episode(i: int) -> tuple[str, str]:
        with make_sandbox(backend, SandboxSpec()) as sb:
            sb.exec(f"echo {i} > mine.txt; X={i}; touch /tmp/private-{i}")
            time.sleep(0.2)
            return sb.exec("cat mine.txt; echo $X; ls").output, sb.exec("ls /tmp").output

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(episode, range(16)))
    for i, (output, tmp) in enumerate(results):
        assert output == f"{i}\n{i}\nmine.txt\n"
        assert tmp == f"private-{i}\n"  # /tmp is private too


def test_async_exec_does_not_block_the_event_loop(backend):
    async def main() -> list[str]:
        boxes = [make_sandbox(backend, SandboxSpec()) for _ in range(4)]
        try:
            await asyncio.gather(*(b.astart() for b in boxes))
            started = time.monotonic()
            results = await asyncio.gather(*(b.aexec(f"sleep 1; echo {i}") for i, b in enumerate(boxes)))
            assert time.monotonic() - started < 3.5  # concurrent, not 4 x 1 s
            return [r.output for r in results]
        finally:
            await asyncio.gather(*(b.aclose() for b in boxes))

    assert asyncio.run(main()) == ["0\n", "1\n", "2\n", "3\n"]
