"""Program status from PTY bytes, for hosts that own their PTYs (library entry point).

A multiplexer that runs programs in PTYs it owns feeds each PTY's output through a
:class:`PtyStatusFeed`; the feed emits ``messages.ProgramStatus`` evidence through the
sink (``inject_nowait``) and returns the answer to Claude Code's OSC 7501 probe, which the
host writes back to the PTY (a host that understands OSC 7501 is the terminal that answers).
``paneward wrap`` (:mod:`actors.cli.wrap`) and the tmux output reader
(:mod:`actors.sinks.tmux_output`) produce the same evidence through :func:`program_status`.

Example::

    feed = PtyStatusFeed(SessionKey("claude-code", "pty-4242-98765"), pane="%3", sink=sup)
    answer = feed.feed(chunk)      # every chunk read from the PTY master, in order
    if answer is not None:
        os.write(master_fd, answer)
"""

from __future__ import annotations

from typing import Literal, Protocol

import msgspec

import messages
from actors.core.clock import now_ms
from actors.core.ingress.osc import (
    PROBE_ANSWER,
    OscParser,
    OscProbe,
    OscStatistics,
    StatusRecord,
    Title,
)

__all__ = ["PtyStatusSink", "PtyStatusFeed", "PtyStatusStatistics", "program_status"]


class PtyStatusSink(Protocol):
    """Where evidence goes (the supervisor, or a test list)."""

    def inject_nowait(self, message: messages.Inbound) -> None: ...


def program_status(
    record: StatusRecord,
    *,
    key: messages.SessionKey | None,
    pane: str | None,
    at_ms: int,
    source: Literal["pty_status", "tmux_output"] = "pty_status",
) -> messages.ProgramStatus:
    """The ``ProgramStatus`` evidence for one parsed OSC 7501 record (seen at ``at_ms``):
    ``source`` ``pty_status`` from a PTY's bytes (``paneward wrap``, a host's feed),
    ``tmux_output`` from tmux's output stream (:mod:`actors.sinks.tmux_output`)."""
    return messages.ProgramStatus(
        source=source,
        serial=record.serial,
        state=record.state,
        at_ms=at_ms,
        observed_at_ms=at_ms,
        key=key,
        pane=pane,
        kind=record.kind,
        app=record.app,
        message=record.message,
        child_id=record.child_id,
        title=record.title,
    )


class PtyStatusStatistics(msgspec.Struct, kw_only=True):
    """Counters of one :class:`PtyStatusFeed`: one record it keeps, copied by
    ``statistics()`` (``parser`` is its parser's, filled in then)."""

    emitted: int = 0
    #: Records the sink refused (``MessageError``): counted, nothing else changes.
    rejected: int = 0
    probes_answered: int = 0
    last_title: str | None = None
    parser: OscStatistics = msgspec.field(default_factory=OscStatistics)


class PtyStatusFeed:
    """Turns one PTY's output into ``ProgramStatus`` evidence for ``key`` / ``pane``.

    Sans-IO apart from ``sink.inject_nowait`` (which never blocks): safe to call from the
    host's read loop, on or off an event loop. ``feed`` never raises on any input.
    """

    def __init__(
        self,
        key: messages.SessionKey | None,
        pane: str | None,
        sink: PtyStatusSink,
        *,
        answer_probe: bool = True,
    ) -> None:
        if key is None and pane is None:
            raise ValueError("PtyStatusFeed needs a session key or a pane")
        self._key = key
        self._pane = pane
        self._sink = sink
        self._answer_probe = answer_probe
        self._parser = OscParser()
        self._stats = PtyStatusStatistics()

    def feed(self, data: bytes) -> bytes | None:
        """Parse the next output chunk; return the probe answer to write back, if any."""
        _, events = self._parser.feed(data)
        if not events:
            return None
        answer = None
        at_ms = now_ms()
        for event in events:
            if isinstance(event, StatusRecord):
                message = program_status(event, key=self._key, pane=self._pane, at_ms=at_ms)
                try:
                    self._sink.inject_nowait(message)
                except messages.MessageError:
                    self._stats.rejected += 1
                else:
                    self._stats.emitted += 1
            elif isinstance(event, OscProbe) and self._answer_probe:
                self._stats.probes_answered += 1
                answer = PROBE_ANSWER
            elif isinstance(event, Title):
                self._stats.last_title = event.text
        return answer

    def statistics(self) -> PtyStatusStatistics:
        """A point-in-time copy of the counters (see :class:`PtyStatusStatistics`)."""
        return msgspec.structs.replace(self._stats, parser=self._parser.statistics())
