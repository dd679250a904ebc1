"""The shell session every backend runs commands through: one protocol over a small transport.

A sandbox keeps one bash process, the shell, running :data:`SHELL_LOOP`. Its first stdin line is a
random token (never in argv or the environment, so no command can read it from ``/proc``); then each
command arrives NUL-terminated and is ``eval``-ed with stdin from ``/dev/null``: in the loop's own
shell in ``persistent`` mode (``cd`` and variables survive), in a fresh subshell started in the
workdir in ``stateless`` mode. The shell answers with control lines:

* ``READY <pid>`` once it runs in the workdir;
* ``RC <exit code> <processes in the sandbox, or ->`` after each command;
* ``FULL 0 <processes>`` instead of running a command when the sandbox is at its process limit
  (a background fork bomb would make the command hang in fork retries): the session clears the
  sandbox and sends the command once more;
* ``EXIT <code>`` when the shell itself exits (``exit`` in persistent mode).

A backend carries the control lines either on a pipe of their own (local: nothing a command prints
can look like one) or in band after the token (Docker's exec socket has a single stream), as a
:class:`ShellChannel`; :class:`InBandChannel` does the in-band framing for any byte stream.

:class:`ShellSession` is the protocol's host side, the same for every backend: the deadline, then
kill the command's processes and give the shell a grace period to report; a shell that still does
not report (a builtin loop) is killed and a new one started (``restarted``); ``on_timeout=
"kill_shell"`` kills the shell at once; output past ``Limits.output_bytes`` stops the command and
keeps head and tail; a sandbox at its process limit is cleared. What only a backend knows how to do
(start a shell, kill processes, count them) is the abstract part of :class:`ShellSandbox`.
"""

from __future__ import annotations

import secrets
import threading
import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Protocol

from termgym.sandbox.base import ExecResult, Sandbox, SandboxError, check_on_timeout
from termgym.sandbox.output import OutputBuffer

if TYPE_CHECKING:
    from termgym.sandbox.base import Mode, OnTimeout, SandboxSpec

# The shell loop. argv: mode, workdir, the process count at which the sandbox is full (empty: the
# backend checks from outside), the control fd (empty: control lines go in band, after the token).
# __TG_CLOSE__ becomes a redirection that closes the control fd for the command, so neither it nor
# its children hold (or can write) the control pipe.
SHELL_LOOP = r"""
exec 2>&1
IFS= read -r __tg_tok || exit 1
__tg_mode=$1 __tg_wd=$2 __tg_max=$3 __tg_fd=$4
if [ -n "$__tg_fd" ]; then
  __tg_say() { printf '%s\n' "$*" >&"$__tg_fd"; }
else
  __tg_say() { printf '\n__TG_%s_%s\n' "$__tg_tok" "$*"; }
fi
__tg_pids() {
  __tg_n=-
  { read -r __tg_n </sys/fs/cgroup/pids/pids.current || read -r __tg_n </sys/fs/cgroup/pids.current; } 2>/dev/null
}
[ -d "$__tg_wd" ] || mkdir -p -- "$__tg_wd"
cd -- "$__tg_wd" || exit 1
trap '__tg_say "EXIT $?"' EXIT
__tg_say "READY $$"
while IFS= read -r -d '' __tg_cmd; do
  if [ -n "$__tg_max" ]; then
    __tg_pids
    if [ "$__tg_n" -ge "$__tg_max" ] 2>/dev/null; then
      __tg_say "FULL 0 $__tg_n"
      continue
    fi
  fi
  # bash reports jobs killed since the last command at the next one it runs: swallow those notices
  # here (the host returns only once every killed process is a zombie, so none comes later).
  jobs >/dev/null 2>&1
  if [ "$__tg_mode" = stateless ]; then
    ( cd -- "$__tg_wd" && eval "$__tg_cmd" ) </dev/null __TG_CLOSE__
  else
    eval "$__tg_cmd" </dev/null __TG_CLOSE__
  fi
  __tg_rc=$?
  __tg_pids
  __tg_say "RC $__tg_rc $__tg_n"
done
"""

#: Seconds a shell has to start and say READY.
START_TIMEOUT = 120.0
#: After a timeout's kill, seconds the shell has to report before it counts as stuck.
GRACE = 2.0
#: After a flood's kill, the most seconds the command may still take.
FLOOD_GRACE = 5.0
#: How often a command the shell refused (``FULL``) is sent again after clearing the sandbox.
FULL_RESENDS = 3
#: While a killed command has not ended, kill again this often (the rest of a command list runs on).
REKILL_INTERVAL = 0.1


def shell_argv(mode: Mode, workdir: str, *, full_at: int | None = None, control_fd: int | None = None) -> list[str]:
    """The command line that starts a sandbox shell (see the module docstring)."""
    close = f" {control_fd}>&-" if control_fd is not None else ""
    script = SHELL_LOOP.replace(" __TG_CLOSE__", close)
    return ["bash", "--noprofile", "--norc", "-c", script, "bash", mode, workdir,
            "" if full_at is None else str(full_at), "" if control_fd is None else str(control_fd)]


def parse_control(line: bytes) -> tuple[str, int | None, int | None]:
    """A control line as ``(kind, value, processes)``; numbers the line lacks are None."""
    fields = line.decode("ascii", errors="replace").split()
    numbers = [int(f) if f.lstrip("-").isdigit() else None for f in fields[1:3]]
    numbers += [None] * (2 - len(numbers))
    return (fields[0] if fields else ""), numbers[0], numbers[1]


class ShellChannel(ABC):
    """One running shell as the session sees it: bytes in; output and control lines out."""

    eof = False  # the shell is gone (its stream ended or the channel was closed)

    @abstractmethod
    def send(self, data: bytes) -> None:
        """Write to the shell's stdin; raises ``EOFError`` when the shell is gone."""

    @abstractmethod
    def receive(self, timeout: float) -> tuple[bytes, bytes | None] | None:
        """Wait up to ``timeout`` s for ``(output, control line or None)``; None if nothing came.

        Output the shell printed before a control line comes with it. Raises ``EOFError`` once the
        shell is gone and everything it printed was returned.
        """

    @abstractmethod
    def close(self) -> None:
        """Stop talking to the shell (the backend kills it). Safe to call twice."""


class ByteStream(Protocol):
    """What :class:`InBandChannel` frames: a duplex byte stream (Docker's exec socket)."""

    eof: bool

    def send(self, data: bytes) -> None: ...

    def recv(self, timeout: float) -> bytes | None: ...  # None: nothing in time; b"": end of stream

    def close(self) -> None: ...


class InBandChannel(ShellChannel):
    """Control lines in the shell's output stream, each after a newline and ``__TG_<token>_``."""

    def __init__(self, stream: ByteStream, token: bytes) -> None:
        self.stream = stream
        self.mark = b"\n__TG_" + token + b"_"
        self._pending = bytearray()
        self._ended = False

    @property
    def eof(self) -> bool:  # type: ignore[override]
        return self.stream.eof

    def send(self, data: bytes) -> None:
        self.stream.send(data)

    def receive(self, timeout: float) -> tuple[bytes, bytes | None] | None:
        taken = self._take()
        if taken is not None:
            return taken
        if self._ended:
            raise EOFError("the shell's stream ended")
        chunk = self.stream.recv(timeout)
        if chunk is None:
            return None
        if chunk == b"":
            self._ended = True
            rest = bytes(self._pending)
            self._pending.clear()
            if rest:
                return rest, None
            raise EOFError("the shell's stream ended")
        self._pending += chunk
        return self._take() or (b"", None)

    def _take(self) -> tuple[bytes, bytes | None] | None:
        """Output up to a complete control line (and the line), else all output that cannot start one."""
        at = self._pending.find(self.mark)
        if at >= 0:
            end = self._pending.find(b"\n", at + len(self.mark))
            if end >= 0:
                output, line = bytes(self._pending[:at]), bytes(self._pending[at + len(self.mark):end])
                del self._pending[: end + 1]
                return output, line
            cut = at  # the marker's line is not complete yet: hold it back
        else:
            cut = len(self._pending) - len(self.mark)  # the tail might be the start of a marker
        if cut <= 0:
            return None
        output = bytes(self._pending[:cut])
        del self._pending[:cut]
        return output, None

    def close(self) -> None:
        self.stream.close()


class ShellSession:
    """The host side of the shell protocol for one sandbox (see the module docstring)."""

    def __init__(self, sandbox: ShellSandbox) -> None:
        self.sandbox = sandbox
        self.channel: ShellChannel | None = None
        self.pid: int | None = None  # the shell's pid as the sandbox sees it
        self.halted = False  # halt() ended the shell: the next command starts one without a note

    def start(self) -> None:
        """Start a shell and wait until it runs in the workdir."""
        self.close()
        token = secrets.token_hex(16).encode()
        channel = self.channel = self.sandbox._open_shell(token)
        seen = bytearray()
        deadline = time.monotonic() + START_TIMEOUT
        try:
            channel.send(token + b"\n")
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no answer within {START_TIMEOUT:g} s")
                got = channel.receive(remaining)
                if got is None:
                    continue
                seen += got[0]
                if got[1] is not None and parse_control(got[1])[0] == "READY":
                    self.pid = parse_control(got[1])[1]
                    self.halted = False
                    return
        except (TimeoutError, EOFError) as exc:
            self.close()
            raise SandboxError(f"the sandbox shell did not start in {self.sandbox.workdir} (it needs bash and a "
                               f"workdir it can enter): {exc}; it printed {bytes(seen[-500:])!r}") from exc

    def restart(self) -> None:
        """Replace the shell (killed or gone) with a new one: files stay, cwd and variables reset."""
        self.start()

    def abort(self) -> None:
        """Kill the shell and every process in the sandbox, then start a new shell."""
        self.sandbox._kill_processes(include_shell=True)
        self.restart()

    def halt(self) -> None:
        """Kill the shell and every process in the sandbox; the next command starts a new shell."""
        self.sandbox._kill_processes(include_shell=True)
        self.close()
        self.halted = True

    def close(self) -> None:
        if self.channel is not None:
            self.channel.close()
        self.channel = None
        self.pid = None

    def _send(self, payload: bytes, notes: list[str]) -> bool:
        """Send a command, first starting a new shell if the old one is gone; True if it was restarted."""
        channel = self.channel
        if channel is not None and not channel.eof:
            try:
                channel.send(payload)
                return False
            except EOFError:
                pass  # the shell died between commands (killed from outside): start another
        halted, self.halted = self.halted, False
        self.restart()
        assert self.channel is not None
        try:
            self.channel.send(payload)
        except EOFError as exc:
            raise SandboxError(f"the sandbox shell exited as soon as it started: {exc}") from exc
        if halted:
            return False  # halt() ended the shell on purpose: nothing to report
        notes.append("the previous shell had exited; a new one was started (working directory and variables "
                     "were reset)")
        return True

    def clear(self) -> None:
        """Kill every process but the shell and wait until they are reaped."""
        self.sandbox._kill_processes()
        self.sandbox._await_reaped()

    def run(self, command: str, timeout: float, *, kill_shell: bool = False) -> ExecResult:
        """Run one command (no NUL bytes) and return what it did; see the module docstring."""
        started = time.monotonic()
        notes: list[str] = []
        limits = self.sandbox.spec.limits
        pids_limit = limits.pids
        if self.sandbox._at_process_limit(None):
            self.clear()
            notes.append(f"the sandbox had reached its process limit ({pids_limit}) before this command; "
                         "every background process was killed")
        payload = command.encode("utf-8", errors="surrogateescape") + b"\x00"
        restarted = self._send(payload, notes)
        out = OutputBuffer(limits.output_bytes)
        deadline = started + timeout
        timed_out = flooded = stuck = exited = aborted = False
        resends = 0
        exit_code: int | None = None
        pids_now: int | None = None
        last_kill = 0.0
        while True:
            assert self.channel is not None
            now = time.monotonic()
            remaining = deadline - now
            if remaining <= 0:
                if timed_out:
                    stuck = True  # everything but the shell was killed, still no exit code: a builtin loop
                    break
                timed_out = True
                if kill_shell:
                    aborted = True
                    self.sandbox._kill_processes(include_shell=True)
                    break
                self.sandbox._kill_processes()
                last_kill, deadline = now, now + GRACE
                continue
            if (timed_out or flooded) and now - last_kill > REKILL_INTERVAL:
                self.sandbox._kill_processes()
                last_kill = now
            try:
                got = self.channel.receive(min(remaining, REKILL_INTERVAL if (timed_out or flooded) else 1.0))
            except EOFError:
                exited = True  # no control line at all: the shell was killed (e.g. by the OOM killer)
                break
            if got is None:
                continue
            output, control = got
            out.feed(output)
            if out.overflowed and not flooded:
                flooded = True
                self.sandbox._kill_processes()
                last_kill = time.monotonic()
                deadline = min(deadline, last_kill + FLOOD_GRACE)
            if control is None:
                continue
            kind, value, pids = parse_control(control)
            if kind == "FULL" and resends == FULL_RESENDS:
                notes.append("the sandbox is still at its process limit; the command did not run")
                exit_code = 1
                break
            if kind == "FULL":
                self.clear()
                if not resends:
                    notes.insert(0, f"the sandbox had reached its process limit ({pids_limit}) before this "
                                 "command; every background process was killed")
                # Killed processes count until the sandbox's init has reaped them: give it a moment.
                time.sleep(0.05 * 4**resends)
                resends += 1
                try:
                    self.channel.send(payload)
                except EOFError:
                    exited = True
                    break
            elif kind in ("RC", "EXIT"):
                exit_code, pids_now, exited = value, pids, kind == "EXIT"
                break
        duration = time.monotonic() - started
        if flooded:
            notes.append(f"output exceeded {limits.output_bytes} bytes; the command was stopped")
        if aborted:
            self.restart()
            restarted = True
            notes.append(f"command timed out after {timeout:g} s; it and its shell were killed, so the rest of "
                         "the command line did not run; a new shell was started")
        elif stuck or exited:
            if stuck:
                self.sandbox._kill_processes(include_shell=True)
            self.restart()
            restarted = True
            what = "the shell did not respond" if stuck else "the shell exited"
            notes.append(f"{what}; the sandbox shell was restarted: working directory and variables were reset")
        else:
            if timed_out or flooded:
                # One more sweep: a child forked while the last kill ran can escape it.
                self.clear()
            if self.sandbox._at_process_limit(pids_now):
                # A fork bomb (or a runaway spawner) left the sandbox unable to start anything.
                self.clear()
                notes.append(f"the sandbox reached its process limit ({pids_limit}); every background process "
                             "was killed")
        if timed_out:
            if not aborted:
                notes.append(f"command timed out after {timeout:g} s and was killed")
            exit_code = 124
        if exit_code is None:
            exit_code = 137 if exited else 1
        text = out.text() + "".join(f"\n[{note}]" for note in notes)
        return ExecResult(output=text, exit_code=exit_code, timed_out=timed_out, duration=duration,
                          truncated=flooded, restarted=restarted)


class ShellSandbox(Sandbox):
    """A sandbox whose commands run through a :class:`ShellSession`.

    A backend implements making and freeing the sandbox (:meth:`_create`, :meth:`_destroy`), the
    transport (:meth:`_open_shell`) and what only it can do to processes; the lifecycle,
    :meth:`exec` and :meth:`abort` are the same for all.
    """

    def __init__(self, spec: SandboxSpec | None = None, *, mode: Mode = "persistent") -> None:
        super().__init__(spec, mode=mode)
        self._lock = threading.RLock()
        self._started = False
        self._session = ShellSession(self)

    @abstractmethod
    def _create(self) -> None:
        """Make the sandbox and start its shell (``self._session.start()``), files and services in
        place; :meth:`start` runs the setup commands after it, and :meth:`close` cleans up what a
        failure left half made."""

    @abstractmethod
    def _destroy(self) -> None:
        """Kill everything in the sandbox and free what :meth:`_create` made (any part of it)."""

    @abstractmethod
    def _open_shell(self, token: bytes) -> ShellChannel:
        """Start a new shell process running :func:`shell_argv` (any old one is dead or killed)."""

    @abstractmethod
    def _kill_processes(self, *, include_shell: bool = False) -> None:
        """Kill every process in the sandbox but the shell (and the backend's own); with
        ``include_shell`` the shell too, first, so it runs nothing more of its command line."""

    def _await_reaped(self) -> None:
        """Return once every process :meth:`_kill_processes` killed is dead (a zombie or reaped), so
        the shell's notices of them cannot reach a later command. Backends whose kill already waits
        for that need not override it."""

    def _at_process_limit(self, reported: int | None) -> bool:
        """Whether the sandbox is full of processes. ``reported``: the count the shell read after a
        command (None before a command, or when the shell could not read it)."""
        limit = self.spec.limits.pids
        return bool(limit) and reported is not None and reported >= int(limit) - 2

    def start(self) -> None:
        with self._lock:
            if self._started:
                return
            if self.closed:
                raise SandboxError("this sandbox is closed")
            try:
                self._create()
                self._started = True
                self.run_setup_commands()
            except BaseException:
                self.close()
                raise

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._session.close()
            self._destroy()

    def exec(self, command: str, timeout: float | None = None, *,
             on_timeout: OnTimeout = "kill_command") -> ExecResult:
        check_on_timeout(on_timeout)
        if "\x00" in command:
            return ExecResult(output="command contains a NUL byte, which a shell cannot run", exit_code=2)
        with self._lock:
            if self.closed:
                raise SandboxError("this sandbox is closed")
            if not self._started:
                self.start()
            timeout = self.spec.limits.command_timeout if timeout is None else timeout
            return self._session.run(command, timeout, kill_shell=on_timeout == "kill_shell")

    def abort(self) -> None:
        with self._lock:
            if self._started and not self.closed:
                self._session.abort()

    def stop_commands(self) -> None:
        with self._lock:
            if self._started and not self.closed:
                self._session.clear()

    def halt(self) -> None:
        with self._lock:
            if self._started and not self.closed:
                self._session.halt()
