"""OSC 7501 from tmux's own output stream: the pure decisions of the tmux output reader.

A program writes its OSC 7501 status records into its pane; tmux drops them for display, but a
control-mode client that receives pane output gets them raw in ``%output`` (or, with the
``pause-after`` client flag, ``%extended-output``). The I/O shell is
:mod:`actors.sinks.tmux_output`; this module decides, without I/O:

- which panes need their output read (:func:`needs_output`): a pane that shows a live session
  of a harness that writes OSC 7501 (the pane mapper bound it: its process tree runs that
  agent), and a pane whose process tree runs a transport that carries a remote program's bytes
  unchanged (:func:`transport_of`: ``ssh``, ``docker``/``podman exec``, ``kubectl exec``; not
  ``mosh``, which re-renders the screen and drops the records); no other pane;
- the commands that turn one pane's output on, off, or on again after tmux paused it
  (:func:`output_command`; tmux(1), ``refresh-client -A``);
- what a line of the output client says (:class:`OutputParser`: ``%output`` /
  ``%extended-output`` with tmux's octal escapes undone by :func:`unescape_output`, ``%pause``,
  ``%continue``; every other line goes to :class:`~actors.core.tmux.protocol.ControlParser`);
- whom a record is about (:func:`record_target`): the session the pane shows, else a session of
  its own for the transport the record came through (:func:`remote_key`), which the record binds
  to its pane (proof :data:`PROOF`) and whose presence is the transport's process.

The records themselves are parsed by the one OSC parser
(:class:`actors.core.ingress.osc.OscParser`), one per pane, and become evidence through
:func:`actors.sources.pty_status.program_status`, as under ``paneward wrap`` and a host's PTY
feed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, cast

from actors.core.tmux.protocol import ControlParser, Event, quote
from messages.common import Harness, SessionKey

__all__ = [
    "COMMANDS_SUBSCRIPTION",
    "COMMANDS_SUBSCRIPTION_COMMAND",
    "MAX_VISIT",
    "OUTPUT_CLIENT_FLAGS",
    "PANE_COMMANDS_COMMAND",
    "PAUSE_AFTER_S",
    "PROOF",
    "TRANSPORTS",
    "OutputEvent",
    "OutputParser",
    "PaneOutput",
    "PanePaused",
    "RecordTarget",
    "Transport",
    "find_transport",
    "needs_output",
    "output_command",
    "pane_sessions",
    "record_target",
    "remote_key",
    "transport_of",
    "unescape_output",
]

#: ``PaneBound.proof`` of a pane bound by a record read from its own output.
PROOF: Final = "tmux_output"
#: Seconds of output tmux may hold for the output client before it pauses that pane
#: (``%pause``): a reader that falls behind never builds a backlog; it turns the pane on again
#: (``continue``) and the next record is the truth again.
PAUSE_AFTER_S: Final = 1
#: The output client's flags: pane output (no ``no-output``), tmux's pause after
#: :data:`PAUSE_AFTER_S`, and its (absent) size never resizes the user's windows.
OUTPUT_CLIENT_FLAGS: Final = f"ignore-size,pause-after={PAUSE_AFTER_S}"
#: Programs whose pane shows a remote program's output byte for byte (its OSC 7501 records
#: too), by process name; ``docker``, ``podman`` and ``kubectl`` only for their ``exec``.
TRANSPORTS: Final = frozenset({"ssh", "docker", "podman", "kubectl"})
_EXEC_ONLY: Final = frozenset({"docker", "podman", "kubectl"})
#: Processes visited at most per pane walk (as the pane mapper's walk).
MAX_VISIT: Final = 256


@dataclass(frozen=True, slots=True)
class Transport:
    """A process in a pane that carries a remote program's output: its name (``ssh``, ...),
    pid and start token."""

    kind: str
    pid: int
    token: str


def transport_of(comm: str, argv: Sequence[str]) -> str | None:
    """The transport a process named ``comm`` and run as ``argv`` is (``None``: none). Pure.

    ``ssh``; ``docker``/``podman``/``kubectl`` only with ``exec`` among their arguments before a
    ``--`` (``docker exec``, ``docker container exec``, ``kubectl -n ns exec``).
    """
    if comm not in TRANSPORTS:
        return None
    if comm in _EXEC_ONLY:
        args = list(argv[1:])
        if "--" in args:
            args = args[: args.index("--")]
        if "exec" not in args:
            return None
    return comm


def find_transport(
    root: int,
    children: Callable[[int], Sequence[int]],
    identity: Callable[[int], tuple[str, str] | None],
    argv: Callable[[int], Sequence[str] | None],
    max_visit: int = MAX_VISIT,
) -> Transport | None:
    """The nearest transport process below ``root`` (breadth-first, ``root`` first, at most
    ``max_visit`` processes). ``identity(pid)`` is ``(comm, start token)`` or ``None`` (gone);
    ``argv`` is read only for a process named like a transport."""
    level = [root]
    seen = {root}
    visited = 0
    while level:
        following: list[int] = []
        for pid in level:
            if visited >= max_visit:
                return None
            visited += 1
            ident = identity(pid)
            if ident is None:
                continue
            comm, token = ident
            if comm in TRANSPORTS:
                args = argv(pid)
                kind = transport_of(comm, args) if args is not None else None
                if kind is not None:
                    return Transport(kind, pid, token)
            for child in children(pid):
                if child not in seen:
                    seen.add(child)
                    following.append(child)
        level = following
    return None


def needs_output(
    live: Iterable[str], transports: Iterable[str]
) -> frozenset[str]:
    """The panes whose output is read: those that show a live session of a harness that writes
    OSC 7501 (``live``) and those whose process tree runs a transport (``transports``)."""
    return frozenset(live) | frozenset(transports)


def output_command(pane: str, action: str) -> str:
    """``refresh-client -A`` for ``pane``: ``on``, ``off`` or ``continue`` (after ``%pause``)."""
    if action not in ("on", "off", "continue"):
        raise ValueError(f"not an output action: {action!r}")
    return f"refresh-client -A {quote(f'{pane}:{action}')}"


def remote_key(harness: Harness, transport: Transport) -> SessionKey:
    """The session of an agent behind ``transport``: named by the harness its records name and
    the transport's process (``codex:ssh-<pid>-<start token>``), the one process here that
    proves it present."""
    return SessionKey(harness, f"{transport.kind}-{transport.pid}-{transport.token}")


@dataclass(frozen=True, slots=True)
class RecordTarget:
    """Whom a record read from a pane is about: ``key``; ``bind`` says the record binds the pane
    to it (a transport's own session, the first time), ``owner`` is the process that proves
    that session present (``(pid, token)``; ``None``: the session has its own proof)."""

    key: SessionKey
    bind: bool = False
    owner: tuple[int, str] | None = None


def record_target(
    app: str | None,
    *,
    shown: SessionKey | None,
    transport: Transport | None,
    bound: SessionKey | None,
    harnesses: frozenset[str],
) -> RecordTarget | None:
    """Whom a record with ``app`` read from a pane is about (``None``: nobody; counted).

    ``shown`` is the live session the pane shows (its own proof bound it: the pane mapper);
    ``transport`` the transport its process tree runs; ``bound`` the transport session this
    reader bound to the pane already; ``harnesses`` the harness ids that write OSC 7501 (a record
    names one in ``app``; any other app is the ``terminal`` harness's).
    """
    if shown is not None:
        return RecordTarget(shown)
    if transport is None:
        return None
    # A record's app is its harness's id (``codex``, ``claude-code``): checked against the ids.
    harness = cast(Harness, app) if app in harnesses else "terminal"
    key = remote_key(harness, transport)
    if key == bound:
        return RecordTarget(key)
    return RecordTarget(key, bind=True, owner=(transport.pid, transport.token))


# ------------------------------------------------------------------ the output client's lines


@dataclass(frozen=True, slots=True)
class PaneOutput:
    """Bytes ``pane`` wrote (tmux's escapes undone); ``age_ms``: how long tmux held them
    (``%extended-output`` only)."""

    pane: str
    data: bytes
    age_ms: int | None = None


@dataclass(frozen=True, slots=True)
class PanePaused:
    """tmux paused ``pane`` for this client (``%pause``; ``continued``: ``%continue``)."""

    pane: str
    continued: bool = False


OutputEvent = PaneOutput | PanePaused | Event

_OCTAL: Final = re.compile(rb"\\([0-7]{3})")
_BYTES: Final = {b"%03o" % i: bytes([i]) for i in range(256)}


def _octal(match: re.Match[bytes]) -> bytes:
    return _BYTES[match.group(1)]


def unescape_output(data: bytes) -> bytes:
    """Undo tmux's escaping of pane output: a byte below 0x20 and ``\\`` are written as
    ``\\ooo`` (octal); every other byte as is. ESC, most of a TUI's escapes, goes by one
    ``bytes.replace``: a ``\\`` in the escaped text always opens an escape, so ``\\033`` can
    only be ESC."""
    if b"\\" not in data:
        return data
    data = data.replace(b"\\033", b"\x1b")
    if b"\\" not in data:
        return data
    return _OCTAL.sub(_octal, data)


_OUTPUT: Final = b"%output "
_EXTENDED: Final = b"%extended-output "
_PAUSE: Final = b"%pause "
_CONTINUE: Final = b"%continue "


class OutputParser:
    """Sans-IO: the bytes an output client prints -> :class:`PaneOutput`, :class:`PanePaused`
    and, for every other line, the :class:`~actors.core.tmux.protocol.ControlParser` events
    (replies, notifications, ``%exit``). A line never holds a raw line feed (tmux escapes it),
    so lines are split on it; a partial line waits for the next chunk."""

    __slots__ = ("_buffer", "_control", "bad_lines", "lines")

    def __init__(self) -> None:
        self._buffer = b""
        self._control = ControlParser()
        self.lines = 0
        self.bad_lines = 0

    def feed(self, data: bytes) -> list[OutputEvent]:
        buffer = self._buffer + data if self._buffer else data
        *complete, self._buffer = buffer.split(b"\n")
        events: list[OutputEvent] = []
        for raw in complete:
            self.lines += 1
            line = raw[:-1] if raw.endswith(b"\r") else raw
            if line.startswith(_EXTENDED):
                # %extended-output %PANE AGE ... : DATA (fields before " : " may grow)
                head, sep, value = line[len(_EXTENDED) :].partition(b" : ")
                fields = head.split(b" ")
                if not sep or len(fields) < 2 or not fields[1].isdigit():
                    self.bad_lines += 1
                    continue
                events.append(
                    PaneOutput(fields[0].decode("ascii", "replace"), unescape_output(value),
                               int(fields[1]))
                )
            elif line.startswith(_OUTPUT):
                pane, _, value = line[len(_OUTPUT) :].partition(b" ")
                events.append(PaneOutput(pane.decode("ascii", "replace"), unescape_output(value)))
            elif line.startswith(_PAUSE):
                events.append(PanePaused(line[len(_PAUSE) :].decode("ascii", "replace")))
            elif line.startswith(_CONTINUE):
                events.append(
                    PanePaused(line[len(_CONTINUE) :].decode("ascii", "replace"), continued=True)
                )
            else:
                events.extend(self._control.feed(line + b"\n"))
        return events


def pane_sessions(rows: Iterable[str]) -> Mapping[str, tuple[str, int, str]]:
    """Parse :data:`PANE_COMMANDS_COMMAND` rows: pane -> (session id, pane pid, command). A
    pane in several sessions (a linked window) is read through the first; bad rows are
    skipped."""
    out: dict[str, tuple[str, int, str]] = {}
    for row in rows:
        parts = row.split("|", 3)
        if len(parts) != 4 or not parts[2].isdigit():
            continue
        session, pane, pid, command = parts
        out.setdefault(pane, (session, int(pid), command))
    return out


#: Every pane's session, process and foreground program (parsed by :func:`pane_sessions`).
PANE_COMMANDS_COMMAND: Final = (
    "list-panes -a -F "
    + quote("#{session_id}|#{pane_id}|#{pane_pid}|#{s/[^A-Za-z0-9_.+-]/_/:pane_current_command}")
)
#: The subscription that tells the bridge a pane's foreground program changed (tmux evaluates
#: it at most once a second and reports only a change): the panes are then listed again with
#: :data:`PANE_COMMANDS_COMMAND`.
COMMANDS_SUBSCRIPTION: Final = "paneward-commands"
COMMANDS_SUBSCRIPTION_COMMAND: Final = "refresh-client -B " + quote(
    COMMANDS_SUBSCRIPTION + "::#{S:#{W:#{P:#{pane_id}=#{pane_current_command} }}}"
)
