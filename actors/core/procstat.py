"""Process identity, pure: the one ``/proc/<pid>/stat`` parser.

Start token (docs/design.md §5): field 22 of ``/proc/<pid>/stat`` (``starttime``, clock ticks since
boot) as a decimal string, exactly what Claude Code writes as ``procStart``. The stat line is
split after the LAST ``)`` because the comm field (field 2) may itself contain spaces and
parentheses.

Standard library only, and not even :mod:`typing` at run time: ``paneward hook`` reads its
owner's start token with :func:`parse_stat` on the agent's hot path. The readers are
:mod:`actors.sources.procfs` (the daemon), :mod:`actors.cli.hook_client` and
:mod:`actors.cli.wrap`.
"""

from __future__ import annotations

__all__ = ["StatFields", "parse_stat"]


class StatFields:
    """The fields of ``/proc/<pid>/stat`` paneward uses (a plain class: a ``NamedTuple`` or a
    dataclass would import :mod:`typing` / :mod:`collections` on the hook's path)."""

    __slots__ = ("comm", "ppid", "start_token", "state")

    def __init__(self, comm: str, state: str, ppid: int, start_token: str) -> None:
        self.comm = comm
        self.state = state
        self.ppid = ppid
        self.start_token = start_token

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StatFields) and (
            self.comm, self.state, self.ppid, self.start_token
        ) == (other.comm, other.state, other.ppid, other.start_token)

    __hash__ = None  # type: ignore[assignment]  # mutable slots: not hashable

    def __repr__(self) -> str:
        return (
            f"StatFields(comm={self.comm!r}, state={self.state!r}, ppid={self.ppid!r}, "
            f"start_token={self.start_token!r})"
        )


def parse_stat(data: bytes) -> StatFields | None:
    """Parse a ``/proc/<pid>/stat`` line (bytes, as read); ``None`` if it has not that shape.

    Fields after the comm come from the text after the LAST ``)``: field 3 is the state, 4 the
    ppid, 22 the starttime. Only the first 20 of them are split (the line has 52).
    """
    open_paren = data.find(b"(")
    close_paren = data.rfind(b")")
    if open_paren < 0 or close_paren < open_paren:
        return None
    rest = data[close_paren + 1 :].split(None, 20)
    # rest[0] is field 3 (state); field n is rest[n - 3].
    if len(rest) < 20:
        return None
    ppid, start = rest[1], rest[19]
    if not (start.isdigit() and ppid.lstrip(b"-").isdigit()):
        return None
    return StatFields(
        data[open_paren + 1 : close_paren].decode("utf-8", "surrogateescape"),
        rest[0].decode("ascii", "replace"),
        int(ppid),
        start.decode("ascii"),
    )
