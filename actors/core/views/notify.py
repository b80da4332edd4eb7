"""Notifications, pure: who to tell when attention opens, how often, and with what text.

Who calls what: the notification sink (:class:`actors.sinks.notify.Notifier`) reads a ``latest``
subscription and feeds every item to :meth:`NotifyBook.opened`, which returns an
:class:`Alert` for each attention item that *opened* (a new kind or a new ``since_ms``) with a
kind the user asked for. The sink drops at once an alert of a session told about within the
window (:meth:`NotifyBook.rate_limited`: under load most edges are, and they must cost nothing
more). For the others it asks tmux which pane each attached client is looking at
(:data:`LIST_CLIENTS_COMMAND`, parsed by :func:`parse_clients`); :func:`watched` says whether
the alert's pane is the active pane of an attached client (then nothing is sent), and
:meth:`NotifyBook.admit` applies the per-session rate limit again as it sends. The texts come
from here too: :func:`message_text` (tmux ``display-message``), :func:`osc_notification` (OSC 9
/ 777 for the outer terminal, wrapped for tmux passthrough), :attr:`Alert.title` /
:attr:`Alert.body` (the desktop notification). Reasons are redacted
(:mod:`actors.core.views.redact`) unless ``full_text``, when a text is made (:attr:`Alert.reason`).

The sink delivers each alert on every channel independently; :class:`ChannelHealth` says
whether a channel is worth a send now (one that keeps timing out is paused, with backoff).

A snapshot (the daemon starting, the sink reconnecting) records what is open without
alerting: only an edge seen live is news. Nothing here does I/O or reads a clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, NamedTuple

import msgspec

from actors.core.backoff import retry_delay
from actors.core.session.reducer import ATTENTION_PRIORITY
from actors.core.text import printable
from actors.core.tmux.protocol import quote
from actors.core.views.attention import ATTENTION_WORDS
from actors.core.views.redact import shown_reason
from messages.activity import Activity, Snapshot, Transition
from messages.common import AttentionKind, SessionKey

__all__ = [
    "CHANNELS",
    "DEFAULT_CHANNELS",
    "LIST_CLIENTS_COMMAND",
    "PAUSE_AFTER_TIMEOUTS",
    "PAUSE_FIRST_S",
    "PAUSE_MAX_S",
    "Alert",
    "ChannelHealth",
    "ChannelStatistics",
    "Client",
    "MARKUP_CAPABILITY",
    "NotifyBook",
    "NotifySettings",
    "NotifyStatistics",
    "desktop_body",
    "display_commands",
    "location_command",
    "message_text",
    "osc_notification",
    "parse_channels",
    "parse_clients",
    "watched",
]

#: Where a notification can go: a tmux message on every attached client, an OSC 9 or OSC 777
#: notification to the outer terminal (through tmux passthrough), the desktop (freedesktop
#: notification service over D-Bus; macOS Notification Center).
CHANNELS: Final = ("tmux", "osc9", "osc777", "desktop")
DEFAULT_CHANNELS: Final = ("tmux", "osc9", "desktop")

#: Every client of the server: control mode or not, its name, the pane it shows (the active
#: pane of its session's current window) and that pane's tty (where passthrough is written).
LIST_CLIENTS_COMMAND: Final = (
    f"list-clients -F {quote('#{client_control_mode}|#{client_name}|#{pane_id}|#{pane_tty}')}"
)
_LOCATION_FORMAT: Final = "#{session_name}:#{window_index}.#{pane_index}"


class NotifySettings(msgspec.Struct, frozen=True, kw_only=True):
    """What the user asked for (``paneward run --notify KINDS --notify-via CHANNELS``)."""

    kinds: tuple[AttentionKind, ...] = ATTENTION_PRIORITY
    channels: tuple[str, ...] = DEFAULT_CHANNELS
    #: At most one notification per session within this window (a session that asks again
    #: and again, e.g. one permission after another, is told about once).
    min_interval_ms: int = 30_000
    #: Show reasons in full (default: redacted, see actors.core.views.redact).
    full_text: bool = False


#: A channel whose sends time out this many times in a row is paused.
PAUSE_AFTER_TIMEOUTS: Final = 2
#: Its first pause; each pause that ends in another timeout doubles it, up to PAUSE_MAX_S.
PAUSE_FIRST_S: Final = 30.0
PAUSE_MAX_S: Final = 600.0


class ChannelStatistics(msgspec.Struct, kw_only=True):
    """One delivery channel of the sink (``tmux``: messages and OSC writes; ``desktop``): its
    entry in :attr:`NotifyStatistics.channels`."""

    waiting: int = 0  # alerts queued for it now
    superseded: int = 0  # waiting alerts a newer alert of their session replaced
    closed: int = 0  # waiting alerts whose item closed before this channel could send them
    dropped: int = 0  # waiting alerts dropped, the oldest first, when too many waited
    timeouts: int = 0  # sends that did not finish within the deadline
    timeouts_in_row: int = 0
    pauses: int = 0  # times it was paused
    skipped: int = 0  # alerts not sent to it because it was paused
    paused_s: float = 0.0  # how long the current pause still lasts (0: not paused)
    next_pause_s: float = PAUSE_FIRST_S  # the next pause's length


class ChannelHealth:
    """Whether one delivery channel is worth a send now (pure: the caller passes its monotonic
    clock's ``now``, in seconds).

    A channel whose sends time out :data:`PAUSE_AFTER_TIMEOUTS` times in a row (a session bus
    that accepts calls and never answers them) is paused for :data:`PAUSE_FIRST_S`; the first
    send after a pause is a probe: another timeout pauses it again at once, for twice as long
    (up to :data:`PAUSE_MAX_S`). Only a send that worked resets the pause length; one the
    channel refused at once (it answered) resets the run of timeouts only.
    """

    def __init__(self) -> None:
        self.stats = ChannelStatistics()
        self._until: float | None = None
        self._pauses_in_row = 0  # pauses since the last send that worked

    def paused(self, now: float) -> bool:
        """The channel is paused at ``now`` (when it is, the caller counts a skip)."""
        if self._until is not None and now >= self._until:
            self._until = None  # over: the next send is the probe
        return self._until is not None

    def answered(self, ok: bool) -> None:
        """A send finished within its deadline: ``ok`` when it worked."""
        self.stats.timeouts_in_row = 0
        if ok:
            self._pauses_in_row = 0
            self.stats.next_pause_s = PAUSE_FIRST_S

    def timed_out(self, now: float) -> None:
        """A send did not finish within its deadline."""
        stats = self.stats
        stats.timeouts += 1
        stats.timeouts_in_row += 1
        if stats.timeouts_in_row >= PAUSE_AFTER_TIMEOUTS:
            # The one retry curve (actors/core/backoff.py): doubling per pause in a row.
            self._pauses_in_row += 1
            self._until = now + retry_delay(self._pauses_in_row, PAUSE_FIRST_S, PAUSE_MAX_S)
            stats.pauses += 1
            stats.next_pause_s = retry_delay(self._pauses_in_row + 1, PAUSE_FIRST_S, PAUSE_MAX_S)

    def statistics(self, now: float) -> ChannelStatistics:
        """A copy of the counters, ``paused_s`` as of ``now``."""
        left = 0.0 if self._until is None else max(0.0, self._until - now)
        return msgspec.structs.replace(self.stats, paused_s=round(left, 1))


class NotifyStatistics(msgspec.Struct, kw_only=True):
    """Counters of a :class:`NotifyBook` (decisions) and of the sink that uses it (deliveries):
    one record, copied by ``statistics()``."""

    opened: int = 0  # attention edges of a wanted kind
    ignored_kind: int = 0  # edges of a kind the user did not ask for
    watched: int = 0  # not sent: the pane is the active pane of an attached client
    rate_limited: int = 0
    alerts: int = 0  # admitted: sent to every channel
    tmux_messages: int = 0
    osc_writes: int = 0
    osc_failures: int = 0
    osc_deferred: int = 0  # waited for our previous tmux message to go (it blocks passthrough)
    desktop_sent: int = 0
    desktop_failures: int = 0
    desktop_unavailable: int = 0  # no session bus / notification service: skipped
    superseded: int = 0  # waiting alerts a newer edge of their session replaced
    closed: int = 0  # waiting alerts whose item closed before they could be sent
    tmux_errors: int = 0
    last_error: str | None = None
    #: Per delivery channel of the sink (filled in by its ``statistics()``).
    channels: dict[str, ChannelStatistics] = msgspec.field(default_factory=dict)


class Alert(NamedTuple):
    """One attention item that opened and may be worth telling the user about."""

    key: SessionKey
    pane: str | None
    kind: AttentionKind
    full_reason: str  # as the reducer gave it: shown only as :attr:`reason`
    since_ms: int
    full_text: bool = False  # NotifySettings.full_text

    @property
    def reason(self) -> str:
        """The reason as shown: redacted unless ``full_text``. Made only when a text is (under
        load most alerts are rate limited and never shown)."""
        return shown_reason(self.full_reason, full_text=self.full_text)

    @property
    def title(self) -> str:
        """``claude-code needs you``."""
        return f"{self.key.harness} {ATTENTION_WORDS[self.kind]}"

    def body(self, location: str | None = None) -> str:
        """``permission: Bash · main:1.0 (%3)``."""
        where = self.pane or ""
        if location and self.pane:
            where = f"{location} ({self.pane})"
        return " · ".join(part for part in (self.reason, where) if part)


class Client(NamedTuple):
    """One row of :data:`LIST_CLIENTS_COMMAND`."""

    control: bool
    name: str
    pane: str
    pane_tty: str


def parse_clients(lines: Iterable[str]) -> list[Client]:
    """Parse :data:`LIST_CLIENTS_COMMAND` output; malformed rows are skipped."""
    clients: list[Client] = []
    for line in lines:
        parts = line.split("|")
        if len(parts) != 4 or parts[0] not in ("0", "1"):
            continue
        clients.append(Client(parts[0] == "1", parts[1], parts[2], parts[3]))
    return clients


def watched(pane: str | None, clients: Iterable[Client]) -> bool:
    """The pane is the active pane of an attached (non control-mode) client: the user sees it."""
    return pane is not None and any(not c.control and c.pane == pane for c in clients)


def location_command(pane: str) -> str:
    """``session:window.pane`` of ``pane`` (for the message texts)."""
    return f"display-message -p -t {quote(pane)} {quote(_LOCATION_FORMAT)}"


def message_text(alert: Alert, location: str | None) -> str:
    """The tmux status-line message: ``paneward: claude-code needs you in main:1.0 (%3):
    permission: Bash``, every control character escaped (:func:`actors.core.text.printable`:
    tmux draws the status line on the user's terminal)."""
    where = ""
    if alert.pane is not None:
        where = f" in {location} ({alert.pane})" if location else f" in {alert.pane}"
    reason = f": {alert.reason}" if alert.reason else ""
    return printable(f"paneward: {alert.title}{where}{reason}")


def display_commands(text: str, clients: Iterable[Client]) -> list[str]:
    """``display-message`` on every attached client that is not in control mode (those have no
    status line). The text is a tmux format: ``#`` is doubled so it is shown as written."""
    escaped = quote(text.replace("#", "##"))
    return [
        f"display-message -c {quote(c.name)} {escaped}" for c in clients if not c.control
    ]


def osc_notification(channel: str, title: str, body: str) -> bytes:
    """The OSC notification for the outer terminal, wrapped for tmux passthrough.

    ``osc9``: ``ESC ] 9 ; title: body BEL`` (iTerm2, WezTerm, kitty, Ghostty, Windows
    Terminal); ``osc777``: ``ESC ] 777 ; notify ; title ; body BEL`` (urxvt, foot, Ghostty).
    Written to the tty of the pane a client shows, tmux passes it to that client's terminal
    when ``allow-passthrough`` is on (``ESC P tmux ; ... ESC \\``, every ESC inside doubled),
    byte for byte. Every control character in the texts is escaped
    (:func:`actors.core.text.printable`): a C0 ``BEL`` or ``ESC`` or a C1 ``ST`` (U+009C)
    would end the sequence, and what follows (a C1 ``OSC`` U+009D ``52;c;…``: a clipboard
    write) would reach the terminal as its own sequence. ``;`` in OSC 777's title, its field
    separator, becomes a space.
    """
    title = printable(title)
    body = printable(body)
    if channel == "osc9":
        inner = f"\x1b]9;{title}: {body}\x07"
    elif channel == "osc777":
        inner = f"\x1b]777;notify;{title.replace(';', ' ')};{body}\x07"
    else:
        raise ValueError(f"not an OSC channel: {channel!r}")
    return b"\x1bPtmux;" + inner.replace("\x1b", "\x1b\x1b").encode() + b"\x1b\\"


#: The freedesktop notification capability of a server that reads bodies as markup (GNOME,
#: KDE, dunst: ``<b>``, ``<i>``, ``<u>``, ``<a href>``, ``<img>``).
MARKUP_CAPABILITY: Final = "body-markup"
_MARKUP: Final = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def desktop_body(body: str, capabilities: Iterable[str] | None) -> str:
    """The desktop notification's body for a server with ``capabilities`` (its
    ``GetCapabilities``; ``None``: not known): where the server reads markup, or may,
    ``&``, ``<`` and ``>`` are escaped, so an agent's ``<b>`` or ``<a href>`` shows as
    written instead of shaping the notification; a server without markup gets the text as
    it is (an escape would show literally)."""
    if capabilities is not None and MARKUP_CAPABILITY not in capabilities:
        return body
    return body.translate(_MARKUP)


def parse_channels(text: str) -> tuple[str, ...]:
    """``tmux,desktop`` -> the channels (``all``: every one; ``none``/empty: none).

    :raises ValueError: naming an unknown channel.
    """
    words = [w.strip() for w in text.split(",") if w.strip()]
    if words == ["all"]:
        return CHANNELS
    if words == ["none"]:
        return ()
    unknown = [w for w in words if w not in CHANNELS]
    if unknown:
        raise ValueError(
            f"unknown notification channel {unknown[0]!r} (expected {', '.join(CHANNELS)},"
            " all or none)"
        )
    return tuple(c for c in CHANNELS if c in words)


# The rate limiter forgets sessions it last told about longer ago than the window once it
# holds this many: memory follows recent alerts, not history.
_RATE_MEMORY: Final = 1024


class NotifyBook:
    """Attention edges in, alerts out: which opened, and which may be sent now."""

    def __init__(self, settings: NotifySettings) -> None:
        self._settings = settings
        self._kinds = frozenset(settings.kinds)
        self._open: dict[SessionKey, tuple[str, int]] = {}
        self._last_sent: dict[SessionKey, int] = {}
        self._stats = NotifyStatistics()

    @property
    def stats(self) -> NotifyStatistics:
        """The live counters (the sink adds its delivery counts to the same record)."""
        return self._stats

    def opened(self, item: object) -> list[Alert]:
        """The attention items ``item`` opened (a Snapshot opens none: it records)."""
        if isinstance(item, Snapshot):
            self._open = {
                a.key: (a.attention.kind, a.attention.since_ms)
                for a in item.activities
                if a.attention is not None
            }
            return []
        if not isinstance(item, Transition):
            return []
        after = item.after
        attention = after.attention
        if attention is None:
            self._open.pop(item.key, None)
            return []
        mark = (attention.kind, attention.since_ms)
        if self._open.get(item.key) == mark:
            return []
        self._open[item.key] = mark
        if attention.kind not in self._kinds:
            self._stats.ignored_kind += 1
            return []
        self._stats.opened += 1
        return [self._alert(after)]

    def _alert(self, activity: Activity) -> Alert:
        attention = activity.attention
        assert attention is not None
        return Alert(
            activity.key,
            activity.pane,
            attention.kind,
            attention.reason,
            attention.since_ms,
            self._settings.full_text,
        )

    def still_open(self, alert: Alert) -> bool:
        """The alert's attention item is still the open one (it may have closed while the
        sink asked tmux where the user looks)."""
        return self._open.get(alert.key) == (alert.kind, alert.since_ms)

    def rate_limited(self, alert: Alert, now_ms: int) -> bool:
        """Whether the per-session rate limit holds ``alert`` back now (counted when it does);
        checked before the sink asks tmux anything, so a busy session costs no round trip."""
        last = self._last_sent.get(alert.key)
        if last is not None and now_ms - last < self._settings.min_interval_ms:
            self._stats.rate_limited += 1
            return True
        return False

    def admit(self, alert: Alert, now_ms: int) -> bool:
        """Whether to send ``alert`` now (the per-session rate limit); records the send."""
        if self.rate_limited(alert, now_ms):
            return False
        if len(self._last_sent) >= _RATE_MEMORY:
            window = self._settings.min_interval_ms
            self._last_sent = {k: t for k, t in self._last_sent.items() if now_ms - t < window}
        self._last_sent[alert.key] = now_ms
        self._stats.alerts += 1
        return True

    def statistics(self) -> NotifyStatistics:
        """A point-in-time copy of the counters."""
        return msgspec.structs.replace(self._stats)
