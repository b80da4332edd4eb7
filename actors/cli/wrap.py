"""``paneward wrap [--harness NAME] [--pass-status] -- COMMAND...``: a transparent PTY wrapper.

Runs COMMAND in a new PTY and relays bytes both ways unchanged (raw mode, window size, job
control), except that it

- recovers OSC 7501 program-status records from the output (tmux drops them) and strips them
  from what reaches the outer terminal unless ``--pass-status``;
- answers Claude Code's ``ESC ] 7501 ; ?`` probe when the outer terminal does not: at once when
  ``$TMUX`` is set or stdin is not a terminal (nobody else will), otherwise just before the outer
  terminal's answer to the DA1 query that follows the probe (a terminal answers in order, so a
  DA1 reply with no 7501 reply before it means "not understood"), or after
  :data:`PROBE_WAIT_S` when neither arrives;
- reports ``PtySpawned``, ``ProgramStatus`` and ``PtyExit`` to the daemon as newline-delimited
  JSON over the Unix socket ``actors.core.paths.socket_path()`` — best effort: non-blocking, bounded
  (:data:`MAX_QUEUED_FRAMES`), reconnecting at most once a second, so with no daemon it is just
  a wrapper;
- exits with the child's exit status, or ``128 + N`` when a signal N killed it (like a shell).

The relay is a plain ``select.poll`` loop (no event loop: fewer wakeups and syscalls per chunk,
see ``bench/RESULTS.md``), reading 64 KiB at a time; plain output goes through the parser's
``bytes.find`` fast path untouched. Signals arrive through ``signal.set_wakeup_fd``.

Session key of the wrapped program: ``SessionKey(harness, f"pty-{pid}-{start_token}")``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import signal
import socket
import sys
import termios
import time
import tty
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import msgspec

import messages
from actors.core import paths
from actors.core.clock import now_ms
from actors.core.ingress.osc import PROBE_ANSWER, OscParser, OscProbe, StatusRecord
from actors.core.procstat import parse_stat
from actors.harnesses import catalog
from actors.sources.pty_status import program_status

__all__ = [
    "MAX_QUEUED_FRAMES",
    "PROBE_WAIT_S",
    "Reporter",
    "ReporterStatistics",
    "WrapOptions",
    "aliases",
    "exit_status",
    "infer_harness",
    "parse_args",
    "session_key",
    "usage",
    "wrap_main",
]

READ_SIZE: Final = 64 * 1024
#: How long a probe waits for the outer terminal when neither its answer nor DA1 arrives.
PROBE_WAIT_S: Final = 0.15
MAX_QUEUED_FRAMES: Final = 1024
RECONNECT_S: Final = 1.0
#: At exit, how long the last frames may take to reach a connected daemon.
EXIT_FLUSH_S: Final = 1.0

_DA1_REPLY_START: Final = b"\x1b[?"
_OUTER_PROBE_REPLY: Final = b"\x1b]7501;?"
_FORWARDED_SIGNALS: Final = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT)

def usage() -> str:
    """What ``paneward wrap --help`` prints: the harnesses and commands from the catalog."""
    commands = ", ".join(catalog.wrap_commands())
    return f"""\
usage: paneward wrap [--harness NAME] [--pass-status] -- COMMAND [ARG...]
       paneward wrap --aliases

Run COMMAND in a PTY, relay it transparently and report its OSC 7501 program status
and exit to the paneward daemon. Exits with COMMAND's status (128+N if killed by signal N).

  --harness NAME   {" | ".join(catalog.wrap_choices())}
                   (default: from the command name: {commands}, else {catalog.TERMINAL})
  --pass-status    keep OSC 7501 records in the output (default: strip them)
  --aliases        print shell aliases that wrap {commands}
"""


class UsageError(messages.PanewardError):
    """Bad ``paneward wrap`` arguments."""


@dataclass(frozen=True, slots=True)
class WrapOptions:
    command: tuple[str, ...]
    harness: messages.Harness
    pass_status: bool = False
    aliases: bool = False


def infer_harness(command: str) -> messages.Harness:
    """The harness whose spec lists ``command``'s base name in ``wrap_commands`` (``claude`` ->
    ``claude-code``, ``codex`` -> ``codex``), anything else ``terminal``."""
    return catalog.wrap_harness(os.path.basename(command))


def parse_args(argv: Sequence[str]) -> WrapOptions:
    """Parse ``paneward wrap`` arguments; raise :class:`UsageError` with the reason."""
    harness: str | None = None
    pass_status = False
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--":
            break
        if arg == "--aliases":
            return WrapOptions(command=(), harness="terminal", aliases=True)
        if arg == "--pass-status":
            pass_status = True
        elif arg == "--harness" or arg.startswith("--harness="):
            if "=" in arg:
                harness = arg.partition("=")[2]
            elif args:
                harness = args.pop(0)
            else:
                raise UsageError("--harness needs a value")
            choices = catalog.wrap_choices()
            if harness not in choices:
                raise UsageError(f"unknown harness {harness!r} (one of: {', '.join(choices)})")
        elif arg in ("-h", "--help"):
            raise UsageError("")
        elif arg.startswith("-"):
            raise UsageError(f"unknown option {arg!r}")
        else:
            args.insert(0, arg)
            break
    if not args:
        raise UsageError("no COMMAND given")
    return WrapOptions(
        command=tuple(args),
        harness=harness if harness is not None else infer_harness(args[0]),  # type: ignore[arg-type]
        pass_status=pass_status,
    )


def aliases() -> str:
    """Shell aliases that run every spec's ``wrap_commands`` (claude, codex) under the
    wrapper."""
    return "".join(
        f"alias {name}='paneward wrap -- {name}'\n" for name in catalog.wrap_commands()
    )


def session_key(harness: messages.Harness, pid: int, start_token: str) -> messages.SessionKey:
    return messages.SessionKey(harness, f"pty-{pid}-{start_token}")


def exit_status(wait_status: int) -> tuple[int, int | None, int | None]:
    """``(wrapper exit code, child code, child signal)`` from a ``waitpid`` status."""
    if os.WIFSIGNALED(wait_status):
        sig = os.WTERMSIG(wait_status)
        return 128 + sig, None, sig
    code = os.waitstatus_to_exitcode(wait_status)
    return code, code, None


def start_token(pid: int) -> str:
    """The start token of ``pid`` (field 22 of ``/proc/<pid>/stat``; psutil off Linux)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = parse_stat(f.read())
    except OSError:
        stat = None
    if stat is not None:
        return stat.start_token
    # Not Linux (or /proc hidden): procfs knows the psutil fallback (imported only then: the
    # wrapper stays light).
    from actors.sources.procfs import start_token as portable_start_token

    token = portable_start_token(pid)
    return token if token is not None else "0"


def _socket_path() -> Path:
    return Path(paths.socket_path())


class ReporterStatistics(msgspec.Struct, kw_only=True):
    """Counters of one :class:`Reporter`: one record it keeps, copied by ``statistics()``
    (``queued`` and ``connected`` are filled in then)."""

    sent: int = 0
    queued: int = 0
    #: Frames dropped because the queue was full (the daemon was away too long).
    dropped: int = 0
    #: Messages that failed validation and were never queued.
    rejected: int = 0
    connects: int = 0
    connected: bool = False


class Reporter:
    """Best-effort, non-blocking frame sender to the daemon's Unix socket.

    ``PtySpawned`` is the hello frame: it is sent first on every (re)connection, so a daemon
    that starts after the program still learns of the session. Other frames wait in a bounded
    queue; when it is full the oldest is dropped and counted.
    """

    def __init__(self, path: Path, *, max_frames: int = MAX_QUEUED_FRAMES) -> None:
        self._path = str(path)
        self._sock: socket.socket | None = None
        self._hello: bytes | None = None
        self._queue: deque[bytes] = deque()
        self._out = b""  # the frame being written (partially sent)
        self._max = max_frames
        self._next_attempt = 0.0
        self._stats = ReporterStatistics()

    def statistics(self) -> ReporterStatistics:
        """A point-in-time copy of the counters (see :class:`ReporterStatistics`)."""
        return msgspec.structs.replace(
            self._stats,
            queued=len(self._queue) + (1 if self._out else 0),
            connected=self._sock is not None,
        )

    @property
    def fileno(self) -> int | None:
        return self._sock.fileno() if self._sock is not None else None

    @property
    def wants_write(self) -> bool:
        return self._sock is not None and bool(self._out or self._queue)

    def _encode(self, message: messages.Inbound) -> bytes | None:
        try:
            return messages.encode(messages.revalidate(message)) + b"\n"
        except messages.MessageError:
            self._stats.rejected += 1
            return None

    def hello(self, message: messages.PtySpawned) -> None:
        self._hello = self._encode(message)
        if self._sock is not None and self._hello is not None:
            self._queue.appendleft(self._hello)

    def send_nowait(self, message: messages.Inbound) -> None:
        frame = self._encode(message)
        if frame is None:
            return
        if len(self._queue) >= self._max:
            self._queue.popleft()
            self._stats.dropped += 1
        self._queue.append(frame)

    def poll_timeout(self, now: float) -> float | None:
        """Seconds until the next connection attempt is due (``None``: none needed)."""
        if self._sock is not None:
            return None
        return max(0.0, self._next_attempt - now)

    def maybe_connect(self, now: float) -> None:
        if self._sock is not None or now < self._next_attempt:
            return
        self._next_attempt = now + RECONNECT_S
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        sock.setblocking(False)
        try:
            sock.connect(self._path)
        except OSError:
            # No daemon (ENOENT/ECONNREFUSED) or a full backlog (EAGAIN): try again later.
            sock.close()
            return
        self._sock = sock
        self._stats.connects += 1
        self._out = b""
        if self._hello is not None:
            self._queue.appendleft(self._hello)

    def _disconnect(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock = None
        if self._out:
            self._queue.appendleft(self._out)  # resend whole on the next connection
            self._out = b""

    def on_writable(self) -> None:
        sock = self._sock
        if sock is None:
            return
        while True:
            if not self._out:
                if not self._queue:
                    return
                self._out = self._queue.popleft()
            try:
                n = sock.send(self._out)
            except BlockingIOError:
                return
            except OSError:
                self._disconnect()
                return
            if n == len(self._out):
                self._out = b""
                self._stats.sent += 1
            else:
                # Partial frames are resent whole after a reconnect; the daemon drops the
                # broken line it got.
                self._out = self._out[n:]

    def on_readable(self) -> None:
        """The daemon never writes to us; readable means EOF (it went away) or junk."""
        sock = self._sock
        if sock is None:
            return
        try:
            data = sock.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._disconnect()

    def flush(self, deadline: float) -> None:
        """Try to deliver what is queued until ``deadline`` (monotonic); never longer."""
        self.maybe_connect(time.monotonic())
        while self.wants_write:
            remaining = deadline - time.monotonic()
            sock = self._sock
            if remaining <= 0 or sock is None:
                return
            _, writable, _ = select.select([], [sock], [], remaining)
            if writable:
                self.on_writable()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _write_all(fd: int, data: bytes) -> None:
    try:
        n = os.write(fd, data)
    except BlockingIOError:
        n = 0
    if n == len(data):
        return
    view = memoryview(data)[n:]
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            select.select([], [fd], [])
            continue
        view = view[n:]


def _get_winsize(fd: int) -> bytes | None:
    try:
        return fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8)
    except OSError:
        return None


def _spawn(
    command: Sequence[str], termios_attrs: list[Any] | None, winsize: bytes | None
) -> tuple[int, int]:
    """Fork ``command`` on a new PTY as a session leader; return ``(pid, master fd)``.

    Exec failures come back through a close-on-exec pipe, so the parent can exit 127/126 with
    the reason like a shell would, instead of a child exiting mysteriously.
    """
    master, slave = os.openpty()
    if termios_attrs is not None:
        with contextlib.suppress(termios.error):
            termios.tcsetattr(slave, termios.TCSANOW, termios_attrs)
    if winsize is not None:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, winsize)
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(err_r)
            os.close(master)
            os.setsid()
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
            for fd in (0, 1, 2):
                os.dup2(slave, fd)
            if slave > 2:
                os.close(slave)
            # exec resets caught signals; Python's own SIG_IGN for these would survive it.
            for sig in (signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(sig, signal.SIG_DFL)
            os.execvp(command[0], list(command))
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.write(err_w, str(exc.errno).encode())
        finally:
            os._exit(127)
    os.close(slave)
    os.close(err_w)
    failure = b""
    while True:
        try:
            chunk = os.read(err_r, 64)
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            continue
        if not chunk:
            break
        failure += chunk
    os.close(err_r)
    if failure:
        os.waitpid(pid, 0)
        os.close(master)
        code = int(failure)
        raise _ExecError(code, f"paneward wrap: {command[0]}: {os.strerror(code)}")
    return pid, master


class _ExecError(Exception):
    def __init__(self, errno_: int, text: str) -> None:
        super().__init__(text)
        self.errno = errno_


class _Relay:
    """The poll loop: one instance per ``wrap_main`` run."""

    def __init__(self, options: WrapOptions) -> None:
        self.options = options
        self.stdin = sys.stdin.fileno()
        self.stdout = sys.stdout.fileno()
        self.stdin_tty = os.isatty(self.stdin)
        self.in_tmux = bool(os.environ.get("TMUX"))
        self.pane = os.environ.get("TMUX_PANE") or None
        self.parser = OscParser(
            strip_status=not options.pass_status, strip_probe=self.in_tmux or not self.stdin_tty
        )
        self.reporter = Reporter(_socket_path())
        self.saved_termios: list[Any] | None = None
        self.key: messages.SessionKey | None = None
        self.pid = 0
        self.master = -1
        self.probe_deadline: float | None = None
        self.to_child = bytearray()
        self.stdout_open = True

    # -- terminal modes --------------------------------------------------------------
    def enter_raw(self) -> None:
        if self.stdin_tty:
            with contextlib.suppress(termios.error):
                self.saved_termios = termios.tcgetattr(self.stdin)
                tty.setraw(self.stdin, termios.TCSANOW)

    def leave_raw(self) -> None:
        if self.saved_termios is not None:
            with contextlib.suppress(termios.error):
                termios.tcsetattr(self.stdin, termios.TCSAFLUSH, self.saved_termios)

    def sync_winsize(self) -> None:
        if self.stdin_tty:
            size = _get_winsize(self.stdin)
            if size is not None:
                # Setting the master's size makes the kernel send SIGWINCH to the child's
                # foreground process group, exactly as a terminal resize would.
                with contextlib.suppress(OSError):
                    fcntl.ioctl(self.master, termios.TIOCSWINSZ, size)

    # -- the run -----------------------------------------------------------------------
    def run(self) -> int:
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        handled = (
            *_FORWARDED_SIGNALS,
            signal.SIGWINCH,
            signal.SIGCHLD,
            signal.SIGCONT,
            signal.SIGTSTP,
        )
        previous = {sig: signal.getsignal(sig) for sig in handled}
        old_wakeup = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        for sig in handled:
            # The numbers arrive on wake_r; the handler itself has nothing to do.
            signal.signal(sig, _ignore_signal)
        try:
            attrs = termios.tcgetattr(self.stdin) if self.stdin_tty else None
            size = _get_winsize(self.stdin) if self.stdin_tty else None
            try:
                self.pid, self.master = _spawn(self.options.command, attrs, size)
            except _ExecError as exc:
                print(exc, file=sys.stderr)
                return 126 if exc.errno in (errno.EACCES, errno.EPERM, errno.ENOEXEC) else 127
            self.enter_raw()
            try:
                return self._loop(wake_r)
            finally:
                self.leave_raw()
                os.close(self.master)
        finally:
            signal.set_wakeup_fd(old_wakeup)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            os.close(wake_r)
            os.close(wake_w)
            self.reporter.close()

    def _report_spawn(self) -> None:
        at = now_ms()
        token = start_token(self.pid)
        self.key = session_key(self.options.harness, self.pid, token)
        self.reporter.hello(
            messages.PtySpawned(
                key=self.key,
                pid=self.pid,
                start_token=token,
                at_ms=at,
                observed_at_ms=at,
                pane=self.pane,
            )
        )
        self.reporter.maybe_connect(time.monotonic())

    def _answer_probe(self) -> None:
        self.probe_deadline = None
        self.to_child[:0] = PROBE_ANSWER

    def _on_output(self, data: bytes) -> None:
        out, events = self.parser.feed(data)
        if out and self.stdout_open:
            try:
                _write_all(self.stdout, out)
            except OSError:
                # The outer terminal is gone; keep serving the child until it exits.
                self.stdout_open = False
        if not events:
            return
        at = now_ms()
        for event in events:
            if isinstance(event, StatusRecord):
                self.reporter.send_nowait(
                    program_status(event, key=self.key, pane=self.pane, at_ms=at)
                )
            elif isinstance(event, OscProbe):
                if self.in_tmux or not self.stdin_tty:
                    self._answer_probe()
                else:
                    self.probe_deadline = time.monotonic() + PROBE_WAIT_S

    def _eof_char(self) -> bytes:
        """The child's PTY EOF character (VEOF, normally Ctrl-D)."""
        try:
            eof = termios.tcgetattr(self.master)[6][termios.VEOF]
        except (OSError, termios.error, IndexError):
            return b"\x04"
        return eof if isinstance(eof, bytes) and eof else b"\x04"

    def _on_input(self, data: bytes) -> None:
        if self.probe_deadline is not None:
            # Between the probe and the outer terminal's answers: did it answer 7501 itself,
            # or did its DA1 reply come first (it does not know 7501)?
            if _OUTER_PROBE_REPLY in data:
                self.probe_deadline = None
            else:
                da1 = data.find(_DA1_REPLY_START)
                if da1 >= 0:
                    self.probe_deadline = None
                    self.to_child += data[:da1] + PROBE_ANSWER
                    data = data[da1:]
        self.to_child += data

    def _loop(self, wake_r: int) -> int:
        os.set_blocking(self.master, False)
        self._report_spawn()
        stdin_open = True
        status: int | None = None
        IN, OUT = select.POLLIN, select.POLLOUT
        ERR = select.POLLERR | select.POLLHUP | select.POLLNVAL
        poller = select.poll()
        poller.register(wake_r, IN)
        # Registered event masks; poll() is only re-told when one changes.
        masks: dict[int, int] = {}

        def want(fd: int, mask: int) -> None:
            if masks.get(fd) != mask:
                if mask:
                    poller.register(fd, mask)  # register() also modifies
                    masks[fd] = mask
                elif fd in masks:
                    poller.unregister(fd)
                    del masks[fd]

        sock_fd: int | None = None
        while True:
            if status is not None and not self._child_may_write():
                return self._finish(status, wake_r)
            want(self.master, IN | OUT if self.to_child else IN)
            # Only read more keystrokes once the child has taken the previous ones.
            want(self.stdin, IN if stdin_open and len(self.to_child) < READ_SIZE else 0)
            sock = self.reporter.fileno
            if sock != sock_fd and sock_fd is not None:
                want(sock_fd, 0)
            sock_fd = sock
            if sock is not None:
                want(sock, IN | OUT if self.reporter.wants_write else IN)
            timeout_ms: int | None = None
            if sock is None or self.probe_deadline is not None:
                now = time.monotonic()
                timeouts = [
                    t
                    for t in (
                        self.reporter.poll_timeout(now),
                        None if self.probe_deadline is None else self.probe_deadline - now,
                    )
                    if t is not None
                ]
                timeout_ms = max(0, int(min(timeouts) * 1000) + 1)
            ready = poller.poll(timeout_ms)
            if timeout_ms is not None:
                now = time.monotonic()
                if self.probe_deadline is not None and now >= self.probe_deadline:
                    self._answer_probe()
                self.reporter.maybe_connect(now)
            for fd, mask in ready:
                if fd == self.master:
                    if mask & IN or mask & ERR:
                        # A busy child refills the PTY while we write: read again a few
                        # times before going back to poll (fewer syscalls per byte).
                        for _ in range(8):
                            try:
                                data = os.read(self.master, READ_SIZE)
                            except BlockingIOError:
                                break
                            except OSError:  # EIO: every slave fd is closed
                                data = b""
                            if not data:
                                return self._finish(status, wake_r)
                            self._on_output(data)
                    if mask & OUT and self.to_child:
                        try:
                            n = os.write(self.master, self.to_child)
                        except BlockingIOError:
                            n = 0
                        except OSError:
                            n = len(self.to_child)  # the child is gone; drop its input
                        del self.to_child[:n]
                elif fd == self.stdin:
                    try:
                        data = os.read(self.stdin, READ_SIZE)
                    except OSError:
                        data = b""
                    if not data:
                        # Our stdin ended: stop reading it, keep relaying the child's output.
                        stdin_open = False
                        if not self.stdin_tty:
                            # A pipe ended: tell the child the way a terminal user would,
                            # with its EOF character (like `script`), so it can finish.
                            self.to_child += self._eof_char()
                            self._flush_to_child()
                    else:
                        self._on_input(data)
                        self._flush_to_child()
                elif fd == wake_r:
                    status = self._on_signals(wake_r, status)
                elif fd == sock:
                    if mask & (IN | ERR):
                        self.reporter.on_readable()
                    if mask & OUT:
                        self.reporter.on_writable()

    def _flush_to_child(self) -> None:
        try:
            n = os.write(self.master, self.to_child)
        except BlockingIOError:
            return
        except OSError:
            n = len(self.to_child)
        del self.to_child[:n]

    def _child_may_write(self) -> bool:
        """After the child is reaped: is output still pending on the master?"""
        ready = select.select([self.master], [], [], 0)[0]
        return bool(ready)

    def _on_signals(self, wake_r: int, status: int | None) -> int | None:
        try:
            signums = os.read(wake_r, 512)
        except BlockingIOError:
            return status
        for sig in set(signums):
            if sig == signal.SIGCHLD:
                pid, wait_status = os.waitpid(self.pid, os.WNOHANG)
                if pid == self.pid:
                    status = wait_status
            elif sig == signal.SIGWINCH:
                self.sync_winsize()
            elif sig == signal.SIGTSTP:
                # Someone stopped us from outside (the tty is raw, so ^Z goes to the child):
                # give the terminal back, stop for real, and take it again when continued.
                self.leave_raw()
                os.kill(os.getpid(), signal.SIGSTOP)
            elif sig == signal.SIGCONT:
                self.enter_raw()
                self.sync_winsize()
            elif sig in _FORWARDED_SIGNALS and status is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, sig)
        return status

    def _finish(self, status: int | None, wake_r: int) -> int:
        # Drain what the child wrote before it exited (background holders of the PTY may
        # keep it open: never wait for them).
        while True:
            try:
                data = os.read(self.master, READ_SIZE)
            except OSError:
                break
            if not data:
                break
            self._on_output(data)
        tail = self.parser.flush()
        if tail and self.stdout_open:
            with contextlib.suppress(OSError):
                _write_all(self.stdout, tail)
        if status is None:
            _, status = os.waitpid(self.pid, 0)
        code, child_code, child_signal = exit_status(status)
        at = now_ms()
        self.reporter.send_nowait(
            messages.PtyExit(
                at_ms=at,
                observed_at_ms=at,
                key=self.key,
                pane=self.pane,
                code=child_code,
                signal=child_signal,
            )
        )
        self.reporter.flush(time.monotonic() + EXIT_FLUSH_S)
        return code


def _ignore_signal(signum: int, frame: object) -> None:
    """Signal numbers are read from the wakeup fd; nothing to do in the handler."""


def wrap_main(argv: list[str]) -> int:
    """Entry point of ``paneward wrap``; returns the process exit code."""
    try:
        options = parse_args(argv)
    except UsageError as exc:
        if str(exc):
            print(f"paneward wrap: {exc}", file=sys.stderr)
            print(usage(), file=sys.stderr, end="")
            return 2
        print(usage(), end="")
        return 0
    if options.aliases:
        print(aliases(), end="")
        return 0
    return _Relay(options).run()


if __name__ == "__main__":
    sys.exit(wrap_main(sys.argv[1:]))
