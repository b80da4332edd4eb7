"""Answering Claude Code's OSC 7501 probe from a tmux control client: does it work, is it safe?

    .venv/bin/python bench/bench_claude_probe.py [--starts 1000] [--jobs 3] [--extras 10]
                                                 [--json PATH]

Claude Code 2.1.332 writes ``ESC ] 7501 ; ? BEL`` once at start and emits its OSC 7501 status
records only if the terminal answers it. Inside tmux nothing answers. This benchmark measures
the one answer a tmux bridge could give: a control client (``tmux -C``, attached to the session
whose windows run Claude) sees the probe in ``%output`` and at once writes
``send-keys -t <pane> -H 1b 5d 37 35 30 31 3b 3f 07`` (the reply Claude accepts,
``actors.core.ingress.osc.PROBE_ANSWER``).

Each start is a new window of one private tmux server (``tmux -L pw-probe-<random>``) running
the real Claude (``$PANEWARD_AGENT_PREFIX/node_modules/.bin/claude``) against the loopback
Anthropic mock (tests/support/mock_apis.py), in a fresh ``HOME``. After Claude exits, the
pane's shell runs a reader that puts the terminal in raw mode (without flushing, as a shell's
line editor does) and keeps every byte that reaches it for :data:`SHELL_READ_S`. Variants
(``--starts`` is split among the first five in :data:`MIX`):

- ``normal``: start, type a prompt, Enter, the mock's answer, ``/exit``;
- ``typing``: a user types a line one key every 25 ms from the moment the window opens
  (before, during and after the probe), then Enter, the answer, ``/exit``;
- ``exit-decline``: a folder never trusted; Enter on the preselected "No, exit" of the trust
  dialog arrives together with the answer (Enter first), and again every 0.3 s until Claude
  has exited: a start that exits at once by itself;
- ``exit-term`` / ``exit-kill``: Claude gets SIGTERM / SIGKILL the moment its probe is seen,
  the answer is sent right after: a start that exits (or dies) at once.

``--extras`` more starts each of two tmux states the bridge does not control, outside the
counted starts: ``copy-mode`` (the pane is in copy mode when the probe comes) and ``sync``
(``synchronize-panes`` on, a second pane in the window reads raw input for the whole run).

Audit, per start: the reply's text (``7501``) anywhere on the pane's screen or history
(``capture-pane -p -J -S - -E -``, while Claude runs and after it exits); in the pane's output
stream outside an ``ESC ] 7501`` sequence (an echo or a redraw of typed text); and bytes that
reached the shell. Claude's records after the answer: ``idle``, then ``working``/``done``
during the turn, ``clear`` at exit. And whether tmux read the probe and the DA1 query that
follows it (``CSI c``) in the same chunk: tmux answers DA1 itself while parsing that chunk,
before any control client sees the probe, and Claude decides "no reply" when the DA1 answer
comes back before a 7501 answer.

``--answer paste`` answers before the probe, when Claude turns bracketed paste on (its first
output after it set raw mode; the exit variants act at that moment instead).

Baseline: ``--answer never`` runs the same starts and audit without answering, so what Claude
and tmux do anyway (tmux's own replies to Claude's other queries, keys Claude drops while it
starts) is told apart from what the answer causes. The figures are counts (docs/tmux.md,
bench/RESULTS.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.core.ingress.osc import PROBE_ANSWER, OscParser, OscProbe, StatusRecord
from actors.core.tmux.protocol import quote
from tests.support.mock_apis import MockServer, anthropic_server

API_KEY: Final = "sk-ant-dummy-key-for-mock-0123456789"
#: Counted variants and their share of ``--starts``.
MIX: Final = (("normal", 0.3), ("typing", 0.25), ("exit-decline", 0.15), ("exit-term", 0.15),
              ("exit-kill", 0.15))
EXTRAS: Final = ("copy-mode", "sync")
INTERACTIVE: Final = frozenset({"normal", "typing"})
#: How long the shell's reader keeps what reaches it after Claude exits.
SHELL_READ_S: Final = 1.0
#: What a user types during start (``typing``) and the prompt of ``normal``.
TYPED: Final = "hello from a fast typist"
PROMPT: Final = "hello there"
#: The mock's answer to any other prompt (tests/support/mock_apis.py).
ANSWER_TEXT: Final = "Hello from the mock"
STEP_S: Final = 60.0
REPLY_HEX: Final = " ".join(f"{b:02x}" for b in PROBE_ANSWER)
#: Bytes of the reply whose appearance as text means it leaked.
LEAK_MARK: Final = b"7501"
#: Bracketed paste on: Claude's first output once its terminal is in raw mode.
PASTE_ON: Final = b"\x1b[?2004h"

_OCTAL: Final = re.compile(rb"\\([0-7]{3})")

READER_SOURCE: Final = """\
import os, select, sys, termios, time, tty
fd = 0
old = termios.tcgetattr(fd)
# No flush (TCSANOW): bytes already queued, echoed or not, are read as a shell would.
tty.setraw(fd, termios.TCSANOW)
data = b""
try:
    end = time.monotonic() + float(sys.argv[2])
    while (left := end - time.monotonic()) > 0:
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
finally:
    termios.tcsetattr(fd, termios.TCSANOW, old)
with open(sys.argv[1], "wb") as out:
    out.write(data)
print(f"[shell read {len(data)} bytes]")
"""


@dataclass
class PaneState:
    """What the control client saw of one pane; written by the reader thread only."""

    pane: str
    variant: str
    shell_pid: int
    started: float
    parser: OscParser = field(default_factory=OscParser)
    output: bytearray = field(default_factory=bytearray)
    probe_at: float | None = None
    probes: int = 0
    probe_with_da1: bool = False
    answered_at: float | None = None
    acted_at: float | None = None
    claude_pid: int | None = None
    records: list[tuple[float, str, str | None]] = field(default_factory=list)


@dataclass
class StartResult:
    index: int
    variant: str
    pane: str
    probed: bool = False
    probe_ms: float | None = None
    probe_with_da1: bool = False
    answered: bool = False
    states: list[str] = field(default_factory=list)
    records_on: bool = False
    turn_records: bool = False
    clear_at_exit: bool = False
    answer_seen: bool = False
    typed_intact: bool | None = None
    #: Claude's input line when the typed text did not show intact.
    input_line: str = ""
    screen_leak: int = 0
    stream_leak: int = 0
    shell_reply_bytes: int = 0
    shell_other_bytes: int = 0
    sibling_reply_bytes: int = 0
    #: The screen lines and output-stream excerpts where the reply's text showed.
    leaks: list[str] = field(default_factory=list)
    exit_line: str = ""
    seconds: float = 0.0
    hung: bool = False
    error: str = ""


@dataclass
class _Pending:
    done: threading.Event = field(default_factory=threading.Event)
    ok: bool = False
    lines: list[bytes] = field(default_factory=list)
    then: Callable[[_Pending], None] | None = None


class Control:
    """One ``tmux -C attach`` client: commands in order, ``%output`` dispatched per pane.

    The probe is answered in the reader thread, as soon as its ``%output`` line is read.
    """

    def __init__(self, argv: list[str], env: dict[str, str], session: str, *,
                 answer: str = "probe") -> None:
        #: ``probe``: answer the probe when it is seen; ``paste``: answer before it, when
        #: Claude turns bracketed paste on (its first output after raw mode); ``never``.
        self.answer = answer
        self.proc = subprocess.Popen(
            [*argv, "-C", "attach-session", "-t", session], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, env=env, bufsize=0,
        )
        self.panes: dict[str, PaneState] = {}
        self.changed = threading.Condition()
        self.errors = 0
        #: Set when the block of the attach command itself (flags 0) has ended.
        self.attached = threading.Event()
        self._write_lock = threading.Lock()
        self._pending: deque[_Pending] = deque()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def send(self, command: str, then: Callable[[_Pending], None] | None = None) -> _Pending:
        pending = _Pending(then=then)
        assert self.proc.stdin is not None
        with self._write_lock:
            self._pending.append(pending)
            self.proc.stdin.write(command.encode() + b"\n")
        return pending

    def run(self, command: str, timeout: float = 10.0) -> list[bytes]:
        pending = self.send(command)
        if not pending.done.wait(timeout):
            raise TimeoutError(f"tmux did not answer {command!r}")
        if not pending.ok:
            raise RuntimeError(f"tmux {command!r}: {b' '.join(pending.lines).decode()}")
        return pending.lines

    def wait(self, predicate: Callable[[], bool], timeout: float) -> bool:
        with self.changed:
            return self.changed.wait_for(predicate, timeout)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(10)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        block: tuple[bytes, bytes, bytes] | None = None
        lines: list[bytes] = []
        for raw in self.proc.stdout:
            line = raw.rstrip(b"\n")
            if block is not None:
                parts = line.split(b" ")
                if len(parts) == 4 and parts[0] in (b"%end", b"%error") \
                        and tuple(parts[1:]) == block:
                    if block[2] != b"0":
                        self._finish(parts[0] == b"%end", lines)
                    else:
                        self.attached.set()
                    block, lines = None, []
                else:
                    lines.append(line)
                continue
            if line.startswith(b"%begin "):
                parts = line.split(b" ")
                block = (parts[1], parts[2], parts[3])
            elif line.startswith(b"%output "):
                _, pane, data = line.split(b" ", 2)
                self._output(pane.decode(), _OCTAL.sub(lambda m: bytes([int(m[1], 8)]), data))

    def _finish(self, ok: bool, lines: list[bytes]) -> None:
        pending = self._pending.popleft()
        pending.ok, pending.lines = ok, lines
        if not ok:
            self.errors += 1
        if pending.then is not None:
            pending.then(pending)
        pending.done.set()

    def _output(self, pane: str, data: bytes) -> None:
        state = self.panes.get(pane)
        if state is None:
            return
        now = time.monotonic()
        state.output += data
        _, events = state.parser.feed(data)
        with self.changed:
            if self.answer == "paste" and state.acted_at is None \
                    and PASTE_ON in state.output[-len(data) - len(PASTE_ON):]:
                self._act(state)
            for event in events:
                if isinstance(event, OscProbe):
                    state.probes += 1
                    if state.probe_at is None:  # Claude probes once
                        state.probe_at = now
                        state.probe_with_da1 = b"\x1b]7501;?" in data and b"\x1b[c" in \
                            data[data.index(b"\x1b]7501;?"):]
                        if state.acted_at is None:
                            self._act(state)
                elif isinstance(event, StatusRecord):
                    state.records.append((now, event.state, event.child_id))
            self.changed.notify_all()

    def _act(self, state: PaneState) -> None:
        """The moment of the answer: the exit variants' kill or Enter, then the answer."""
        state.acted_at = time.monotonic()
        state.claude_pid = _child(state.shell_pid)
        if state.variant in ("exit-term", "exit-kill") and state.claude_pid is not None:
            sig = signal.SIGTERM if state.variant == "exit-term" else signal.SIGKILL
            with contextlib.suppress(ProcessLookupError):
                os.kill(state.claude_pid, sig)
        if state.variant == "exit-decline":
            self.send(f"send-keys -t {state.pane} Enter")
        if self.answer != "never":
            self.send(f"send-keys -t {state.pane} -H {REPLY_HEX}")
            state.answered_at = time.monotonic()


def _child(pid: int) -> int | None:
    """The first child of ``pid`` (the pane shell's Claude), from procfs."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


class Bench:
    def __init__(self, base: Path, mock: MockServer, claude: Path, *, answer: str) -> None:
        self.base = base
        self.mock = mock
        self.claude = claude
        self.name = f"pw-probe-{secrets.token_hex(4)}"
        self.tmux_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                         "TERM": "xterm-256color", "HOME": os.environ.get("HOME", "/root")}
        self.argv = ["tmux", "-u", "-L", self.name, "-f", "/dev/null"]
        (base / "reader.py").write_text(READER_SOURCE)
        subprocess.run(
            [*self.argv, "start-server", ";", "set-option", "-g", "remain-on-exit", "on", ";",
             "new-session", "-d", "-s", "bench", "-x", "160", "-y", "50", "sleep 86400"],
            check=True, env=self.tmux_env, timeout=10)
        self.ctl = Control(self.argv, self.tmux_env, "bench", answer=answer)
        if not self.ctl.attached.wait(10):
            raise SystemExit("the control client did not attach")
        self.ctl.run("refresh-client -C 160x50")

    def close(self) -> None:
        self.ctl.close()
        subprocess.run([*self.argv, "kill-server"], capture_output=True, env=self.tmux_env,
                       timeout=10, check=False)

    # -- one start --------------------------------------------------------------------------

    def start(self, index: int, variant: str) -> StartResult:
        where = self.base / f"s{index}"
        home, work, tmp = where / "home", where / "work", where / "tmp"
        for d in (home, work, tmp):
            d.mkdir(parents=True)
        trusted = str(work) if variant != "exit-decline" else str(where / "elsewhere")
        (home / ".claude.json").write_text(json.dumps({
            "hasCompletedOnboarding": True, "lastOnboardingVersion": "2.1.332",
            "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []},
            "projects": {trusted: {"hasTrustDialogAccepted": True, "allowedTools": []}},
        }))
        env = {
            "HOME": str(home), "TMPDIR": str(tmp), "CLAUDE_CODE_TMPDIR": str(tmp),
            "ANTHROPIC_BASE_URL": self.mock.url, "ANTHROPIC_API_KEY": API_KEY,
            "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TERM": "xterm-256color",
        }
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        reader = shlex.join([sys.executable, str(self.base / "reader.py"), str(where / "shell.bin"),
                             str(SHELL_READ_S)])
        line = (f'cd {shlex.quote(str(work))} && env -i TMUX="$TMUX" TMUX_PANE="$TMUX_PANE" '
                f"{exports} {shlex.quote(str(self.claude))} --permission-mode manual; "
                f'echo "[exit $?]"; exec {reader}')
        result = StartResult(index=index, variant=variant, pane="")
        registered: list[PaneState] = []

        def register(pending: _Pending) -> None:
            # In the reader thread, before any %output of the new pane.
            pane, pid = pending.lines[0].decode().split()
            state = PaneState(pane=pane, variant=variant, shell_pid=int(pid),
                              started=time.monotonic())
            self.ctl.panes[pane] = state
            registered.append(state)

        pending = self.ctl.send(
            f"new-window -d -t bench: -P -F {quote('#{pane_id} #{pane_pid}')} {quote(line)}",
            then=register)
        if not pending.done.wait(10) or not registered:
            result.error = "new-window failed"
            return result
        state = registered[0]
        result.pane = pane = state.pane
        sibling: Path | None = None
        try:
            if variant == "copy-mode":
                self.ctl.run(f"copy-mode -t {pane}")
            if variant == "sync":
                sibling = where / "sibling.bin"
                self.ctl.run(f"split-window -d -t {pane} "
                             + quote(shlex.join([sys.executable, str(self.base / "reader.py"),
                                                 str(sibling), "30"])))
                self.ctl.run(f"set-option -w -t {pane} synchronize-panes on")
            if variant == "typing":
                for ch in TYPED:
                    self.ctl.send(f"send-keys -t {pane} -l {quote(ch)}")
                    time.sleep(0.025)
            # A Claude killed before it probes (``--answer paste``) never will.
            self.ctl.wait(lambda: state.probe_at is not None or (
                state.acted_at is not None and variant in ("exit-term", "exit-kill")), STEP_S)
            result.probed = state.probe_at is not None
            if variant in INTERACTIVE:
                self._interactive(state, result)
            elif variant == "exit-decline":
                # Claude ignores the Enter that comes with the probe's answer while its dialog
                # mounts: the user presses it again until Claude is gone.
                for _ in range(60):
                    if self._wait_dead(pane, 0.3):
                        break
                    self.ctl.run(f"send-keys -t {pane} Enter")
            elif variant in EXTRAS:
                # What the answer did, a moment later; then leave copy mode and end Claude.
                self.ctl.wait(lambda: False, 1.5)
                if variant == "copy-mode" and self._value(pane, "#{pane_in_mode}") == "1":
                    self.ctl.run(f"send-keys -t {pane} -X cancel")
                    self.ctl.wait(lambda: False, 0.5)
                screen = self._screen(pane)
                result.screen_leak += screen.count(LEAK_MARK)
                result.leaks += _leak_lines(screen)
                if state.claude_pid is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(state.claude_pid, signal.SIGTERM)
            result.hung = not self._wait_dead(pane)
            if result.hung:
                result.error = "hung: " + self._screen(pane)[-1500:].decode(errors="replace")
            if result.hung and state.claude_pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(state.claude_pid, signal.SIGKILL)
                self._wait_dead(pane)
            history = self._screen(pane)
            result.screen_leak += history.count(LEAK_MARK)
            result.leaks += _leak_lines(history)
            found = re.search(rb"\[exit (\d+)\]", history)
            result.exit_line = found[0].decode() if found else ""
        except (TimeoutError, RuntimeError) as exc:
            result.error = str(exc)
        finally:
            with self.ctl.changed:
                del self.ctl.panes[pane]
            with contextlib.suppress(RuntimeError, TimeoutError):
                self.ctl.run(f"kill-window -t {pane}")
        self._audit(state, result, where / "shell.bin", sibling)
        result.seconds = round(time.monotonic() - state.started, 2)
        shutil.rmtree(where, ignore_errors=True)
        return result

    def _interactive(self, state: PaneState, result: StartResult) -> None:
        pane = state.pane
        text = TYPED if state.variant == "typing" else PROMPT
        if not self._wait_screen(pane, "manual"):
            raise TimeoutError("Claude's prompt never showed")
        if state.variant == "normal":
            self.ctl.run(f"send-keys -t {pane} -l {quote(text)}")
        self._wait_screen(pane, text, 10.0)
        screen = self._screen(pane)
        result.screen_leak += screen.count(LEAK_MARK)
        result.leaks += _leak_lines(screen)
        result.typed_intact = text.encode() in screen
        if not result.typed_intact:
            result.input_line = " | ".join(
                line.decode(errors="replace") for line in screen.split(b"\n")
                if "\N{HEAVY RIGHT-POINTING ANGLE QUOTATION MARK ORNAMENT}".encode() in line)
        # An Enter right after typed text can be taken as part of a paste: repeat it.
        for _ in range(10):
            self.ctl.run(f"send-keys -t {pane} Enter")
            if self._wait_screen(pane, ANSWER_TEXT, 3.0):
                result.answer_seen = True
                break
        if state.records:
            self.ctl.wait(lambda: any(s == "done" for _, s, _ in state.records), 10.0)
        screen = self._screen(pane)
        result.screen_leak += screen.count(LEAK_MARK)
        result.leaks += _leak_lines(screen)
        self.ctl.run(f"send-keys -t {pane} -l /exit")
        self._wait_screen(pane, "/exit")
        for _ in range(10):
            self.ctl.run(f"send-keys -t {pane} Enter")
            if self._wait_dead(pane, 3.0):
                return

    # -- tmux helpers -----------------------------------------------------------------------

    def _value(self, pane: str, fmt: str) -> str:
        lines = self.ctl.run(f"display-message -p -t {pane} {quote(fmt)}")
        return lines[0].decode() if lines else ""

    def _screen(self, pane: str) -> bytes:
        return b"\n".join(self.ctl.run(f"capture-pane -p -J -S - -E - -t {pane}"))

    def _wait_screen(self, pane: str, text: str, within: float = STEP_S) -> bool:
        end = time.monotonic() + within
        while time.monotonic() < end:
            if text.encode() in self._screen(pane):
                return True
            time.sleep(0.05)
        return False

    def _wait_dead(self, pane: str, within: float = STEP_S) -> bool:
        end = time.monotonic() + within
        while time.monotonic() < end:
            if self._value(pane, "#{pane_dead}") == "1":
                return True
            time.sleep(0.05)
        return False

    def _audit(self, state: PaneState, result: StartResult, shell: Path,
               sibling: Path | None) -> None:
        result.answered = state.answered_at is not None
        result.probe_with_da1 = state.probe_with_da1
        if state.probe_at is not None:
            result.probe_ms = round((state.probe_at - state.started) * 1000, 1)
        result.states = [s for t, s, child in state.records if child is None]
        result.records_on = bool(result.states)
        result.turn_records = any(s in ("working", "done") for s in result.states)
        result.clear_at_exit = bool(result.states) and result.states[-1] == "clear"
        out = bytes(state.output)
        result.stream_leak = out.count(LEAK_MARK) - out.count(b"\x1b]" + LEAK_MARK)
        if result.stream_leak:
            plain = out.replace(b"\x1b]" + LEAK_MARK, b"")
            at = plain.find(LEAK_MARK)
            result.leaks.append("stream: " + repr(plain[max(0, at - 40):at + 20]))
        data = shell.read_bytes() if shell.exists() else b""
        if _reply_bytes(data):
            result.leaks.append("shell: " + repr(data[:80]))
        result.shell_reply_bytes = _reply_bytes(data)
        result.shell_other_bytes = len(data) - result.shell_reply_bytes
        if sibling is not None and sibling.exists():
            result.sibling_reply_bytes = _reply_bytes(sibling.read_bytes())


def _leak_lines(screen: bytes) -> list[str]:
    return ["screen: " + line.decode(errors="replace").strip()
            for line in screen.split(b"\n") if LEAK_MARK in line]


def _reply_bytes(data: bytes) -> int:
    """How many bytes of ``data`` belong to copies of the reply (or its tail after ESC)."""
    count = data.count(PROBE_ANSWER) * len(PROBE_ANSWER)
    rest = data.replace(PROBE_ANSWER, b"")
    tail = PROBE_ANSWER[1:]
    return count + rest.count(tail) * len(tail) + (len(rest) if LEAK_MARK in rest else 0)


def _plan(starts: int, extras: int) -> list[str]:
    plan: list[str] = []
    for variant, share in MIX:
        plan += [variant] * round(starts * share)
    plan = plan[:starts] + ["normal"] * max(0, starts - len(plan))
    for variant in EXTRAS:
        plan += [variant] * extras
    # Interleaved, so every variant meets every load level of the run.
    rng = secrets.SystemRandom()
    rng.shuffle(plan)
    return plan


def _agent() -> Path:
    prefix = os.environ.get("PANEWARD_AGENT_PREFIX") or str(
        Path.home() / ".cache" / "paneward-npm")
    claude = Path(prefix) / "node_modules" / ".bin" / "claude"
    if not claude.exists():
        raise SystemExit(f"claude not installed under {prefix}")
    return claude


def summarize(results: list[StartResult]) -> list[str]:
    rows = [f"{'variant':<13}{'starts':>7}{'probed':>7}{'answered':>9}{'probe+DA1':>10}"
            f"{'rec on':>7}{'turn rec':>9}{'clear':>6}{'screen':>7}{'stream':>7}"
            f"{'shell':>6}{'other':>6}{'sibl':>5}{'hung':>5}{'err':>4}"]
    variants = [v for v, _ in MIX] + list(EXTRAS)
    for variant in [*variants, "all counted"]:
        if variant == "all counted":
            group = [r for r in results if r.variant not in EXTRAS]
        else:
            group = [r for r in results if r.variant == variant]
        if not group:
            continue
        rows.append(
            f"{variant:<13}{len(group):>7}{sum(r.probed for r in group):>7}"
            f"{sum(r.answered for r in group):>9}{sum(r.probe_with_da1 for r in group):>10}"
            f"{sum(r.records_on for r in group):>7}{sum(r.turn_records for r in group):>9}"
            f"{sum(r.clear_at_exit for r in group):>6}"
            f"{sum(r.screen_leak > 0 for r in group):>7}{sum(r.stream_leak > 0 for r in group):>7}"
            f"{sum(r.shell_reply_bytes > 0 for r in group):>6}"
            f"{sum(r.shell_other_bytes > 0 for r in group):>6}"
            f"{sum(r.sibling_reply_bytes > 0 for r in group):>5}"
            f"{sum(r.hung for r in group):>5}{sum(bool(r.error) for r in group):>4}")
    on = [r for r in results if r.records_on]
    off = [r for r in results if r.probed and not r.records_on]
    rows.append(f"records on: {len(on)}, of which probe and DA1 in one chunk: "
                f"{sum(r.probe_with_da1 for r in on)}; records off after a probe: {len(off)}, "
                f"of which in one chunk: {sum(r.probe_with_da1 for r in off)}")
    probes = sorted(r.probe_ms for r in results if r.probe_ms is not None)
    if probes:
        rows.append(f"probe after the window opened: min {probes[0]:.0f} ms, median "
                    f"{probes[len(probes) // 2]:.0f} ms, max {probes[-1]:.0f} ms")
    rows.append("states seen: " + ", ".join(
        f"{' '.join(k)}: {n}" for k, n in Counter(
            tuple(_fold(r.states)) for r in results if r.states).most_common(8)))
    return rows


def _fold(states: list[str]) -> list[str]:
    out: list[str] = []
    for s in states:
        if not out or out[-1] != s:
            out.append(s)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--extras", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--answer", choices=["probe", "paste", "never"], default="probe",
                        help="when to answer: when the probe is seen (default), before it "
                             "(Claude's bracketed-paste-on), never (the baseline)")
    parser.add_argument("--only", choices=[v for v, _ in MIX] + list(EXTRAS), default=None,
                        help="run --starts starts of this variant only")
    args = parser.parse_args()
    claude = _agent()
    plan = [args.only] * args.starts if args.only else _plan(args.starts, args.extras)
    base = Path(tempfile.mkdtemp(prefix="pw-probe-"))
    while LEAK_MARK.decode() in str(base):
        base = Path(tempfile.mkdtemp(prefix="pw-probe-"))
    mock = anthropic_server()
    bench = Bench(base, mock, claude, answer=args.answer)
    results: list[StartResult] = []
    todo = deque(enumerate(plan))
    lock = threading.Lock()
    began = time.monotonic()

    def worker() -> None:
        while True:
            with lock:
                if not todo:
                    return
                index, variant = todo.popleft()
            result = bench.start(index, variant)
            with lock:
                results.append(result)
                if len(results) % 50 == 0:
                    print(f"{len(results)}/{len(plan)} starts, "
                          f"{time.monotonic() - began:.0f} s", file=sys.stderr, flush=True)

    try:
        # SIGTERM ends the run through the same cleanup (the tmux server, the mock, the files).
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        threads = [threading.Thread(target=worker, daemon=True) for _ in range(args.jobs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        bench.close()
        mock.close()
        shutil.rmtree(base, ignore_errors=True)
    results.sort(key=lambda r: r.index)
    print(f"tmux {subprocess.run(['tmux', '-V'], capture_output=True, text=True).stdout.strip()},"
          f" {claude.resolve()}, {len(results)} starts in "
          f"{time.monotonic() - began:.0f} s, {args.jobs} at a time, "
          f"answer on {args.answer}, "
          f"control-client errors {bench.ctl.errors}")
    for row in summarize(results):
        print(row)
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
