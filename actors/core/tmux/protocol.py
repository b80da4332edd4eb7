"""The tmux control-mode protocol, sans-IO: targets, quoting, the reply/notification parser.

Pure (no event loop, no process): :class:`ControlParser` turns the bytes a ``tmux -C`` client
prints into :class:`Reply` and :class:`TmuxNotification` events, :func:`quote` makes one word of a
tmux command line, :class:`TmuxTarget` names the server. Text from outside (reasons, paths)
reaches each tmux parser in a form it cannot split or expand: :func:`quote` /
:func:`quote_exact` for a command string, :func:`argv_word` / :func:`commands_argv` for a
``tmux`` argv, :func:`format_literal` once per format expansion. The I/O shell around them is
:class:`actors.sinks.tmux_client.ControlClient`.

The protocol (tmux(1), CONTROL MODE): each command line produces exactly one output block,
``%begin <time> <number> <flags>`` ... ``%end``/``%error`` with the same three fields, in the
order the commands were written; notifications (``%layout-change @1 ...``) never occur inside a
block. The block of the ``attach-session`` command given on the command line has flags ``0``;
blocks for commands written on stdin have flags ``1``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Final, NamedTuple

from messages import PanewardError

__all__ = [
    "CLIENT_FLAGS",
    "ControlParser",
    "Event",
    "Exit",
    "TmuxNotification",
    "Reply",
    "TmuxConnectionLost",
    "TmuxError",
    "TmuxTarget",
    "TmuxUnavailable",
    "argv_word",
    "commands_argv",
    "format_literal",
    "quote",
    "quote_exact",
]

#: Client flags for our control client: it never receives pane output (``%output`` would be
#: every byte every pane prints) and its (absent) size never resizes the user's windows.
CLIENT_FLAGS: Final = "no-output,ignore-size"


class TmuxError(PanewardError):
    """Root of the tmux integration's errors."""


class TmuxUnavailable(TmuxError):
    """The control client could not attach (no server, no session, tmux missing)."""


class TmuxConnectionLost(TmuxError):
    """The control client ended (server killed, session closed, ``%exit``) or stopped replying."""


class TmuxTarget(NamedTuple):
    """Which tmux server to talk to: ``-L socket_name``, ``-S socket_path`` or the default.

    With neither set and ``$TMUX`` present (paneward started inside tmux), the server named by
    ``$TMUX`` is used, as a plain ``tmux`` command would.
    """

    socket_name: str | None = None
    socket_path: str | None = None

    def argv(self, environ: dict[str, str] | None = None) -> list[str]:
        """The ``tmux`` argv prefix selecting this server."""
        if self.socket_name is not None and self.socket_path is not None:
            raise TmuxError("give a tmux socket name (-L) or a socket path (-S), not both")
        if self.socket_name is not None:
            return ["tmux", "-L", self.socket_name]
        if self.socket_path is not None:
            return ["tmux", "-S", self.socket_path]
        env = os.environ if environ is None else environ
        inside = env.get("TMUX", "")
        if inside:
            # $TMUX is "<socket path>,<server pid>,<session index>".
            return ["tmux", "-S", inside.split(",", 1)[0]]
        return ["tmux"]

    def describe(self) -> str:
        if self.socket_name is not None:
            return f"tmux -L {self.socket_name}"
        if self.socket_path is not None:
            return f"tmux -S {self.socket_path}"
        return "tmux (default server)"


# quote() runs for every option of every pane written: escape via one str.translate pass.
_QUOTE_TABLE: Final = str.maketrans(
    {
        **{chr(c): " " for c in range(0x20)},
        "\x7f": " ",
        "\\": "\\\\",
        '"': '\\"',
        "$": "\\$",
    }
)


def quote(value: str) -> str:
    """Quote ``value`` as one word of a tmux command line (double quotes).

    Inside double quotes tmux's parser handles backslash escapes and ``$VAR`` expansion, so
    ``\\``, ``"`` and ``$`` are escaped. Line breaks and other C0 controls would end or corrupt
    the command line and are replaced by spaces.
    """
    return '"' + value.translate(_QUOTE_TABLE) + '"'


# quote_exact(): the same escapes, and every C0 control and DEL as an octal escape (tmux's
# parser reads ``\ooo`` inside double quotes back as that byte).
_EXACT_TABLE: Final = str.maketrans(
    {
        **{chr(c): f"\\{c:03o}" for c in range(0x20)},
        "\x7f": "\\177",
        "\\": "\\\\",
        '"': '\\"',
        "$": "\\$",
    }
)


def quote_exact(value: str) -> str:
    """Quote ``value`` as one word of a tmux command line that tmux reads back exactly.

    As :func:`quote`, but line breaks and other controls are kept, as octal escapes: for
    commands whose text must arrive whole (a shell command naming a path, a format).
    """
    return '"' + value.translate(_EXACT_TABLE) + '"'


def format_literal(text: str, expansions: int = 1) -> str:
    """``text`` as tmux format text that reads as written after ``expansions`` format
    expansions.

    Each expansion turns ``##`` into ``#`` and anything else after a ``#`` into what it names
    (``#{…}``, ``#(…)`` runs a shell command, ``#S`` the session name), so every ``#`` is
    doubled once per expansion the text goes through.
    """
    return text.replace("#", "#" * (2**expansions)) if "#" in text else text


def argv_word(word: str) -> str:
    """``word`` as one argument of a ``tmux`` command line (argv, not a command string).

    tmux splits its argv into commands at every argument whose last character is ``;`` (and
    drops that ``;``), whatever else the argument holds; one ending in ``\\;`` keeps a ``;``
    instead. So a final ``;`` is written ``\\;``.
    """
    return word[:-1] + "\\;" if word.endswith(";") else word


def commands_argv(commands: Iterable[Sequence[str]]) -> list[str]:
    """The argv (after ``tmux [-L NAME|-S PATH] [-N]``) that runs ``commands`` in order in one
    process: separated by ``;`` arguments, every word through :func:`argv_word`."""
    argv: list[str] = []
    for command in commands:
        if argv:
            argv.append(";")
        argv += [argv_word(word) for word in command]
    return argv


class Reply(NamedTuple):
    """One ``%begin``...``%end``/``%error`` block: the output of one command."""

    number: int
    ok: bool
    lines: tuple[str, ...]
    from_client: bool


class TmuxNotification(NamedTuple):
    """One ``%name args`` line outside any block (``args`` is the rest of the line)."""

    name: str
    args: str


class Exit(NamedTuple):
    reason: str


Event = Reply | TmuxNotification | Exit


class ControlParser:
    """Sans-IO parser of tmux control-mode output.

    Fed with raw bytes in any chunking; returns complete :class:`Reply` and
    :class:`TmuxNotification` events (``%exit``: an internal exit event). Lines are decoded as
    UTF-8 with replacement: tmux passes through whatever bytes a format expands to.
    """

    def __init__(self) -> None:
        self._buffer = b""
        # (time, number, flags) of the open block, and its lines so far.
        self._open: tuple[str, str, str] | None = None
        self._lines: list[str] = []

    def feed(self, data: bytes) -> list[Event]:
        self._buffer += data
        *complete, self._buffer = self._buffer.split(b"\n")
        events: list[Event] = []
        for raw in complete:
            event = self._line(raw.rstrip(b"\r").decode("utf-8", "replace"))
            if event is not None:
                events.append(event)
        return events

    def _line(self, line: str) -> Event | None:
        if self._open is not None:
            # Inside a block only the matching %end/%error closes it: command output may itself
            # start with '%' (pane ids) or even with "%end ".
            parts = line.split(" ")
            if (
                len(parts) == 4
                and parts[0] in ("%end", "%error")
                and tuple(parts[1:]) == self._open
            ):
                _, number, flags = self._open
                reply = Reply(
                    number=int(number),
                    ok=parts[0] == "%end",
                    lines=tuple(self._lines),
                    from_client=flags != "0",
                )
                self._open = None
                self._lines = []
                return reply
            self._lines.append(line)
            return None
        if line.startswith("%begin "):
            parts = line.split(" ")
            if len(parts) == 4 and parts[2].isdigit():
                self._open = (parts[1], parts[2], parts[3])
                return None
        if line.startswith("%exit"):
            return Exit(line[len("%exit") :].strip())
        if line.startswith("%"):
            name, _, args = line[1:].partition(" ")
            return TmuxNotification(name, args)
        if line.startswith("\x1bP"):
            # -CC's DCS introducer; harmless if tmux ever sends it.
            return None
        return TmuxNotification("", line) if line else None
