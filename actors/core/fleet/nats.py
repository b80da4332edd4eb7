"""NATS JetStream as the fleet's carrier: every decision of the publisher and of the direct
readers (pure).

- **Tokens.** A host name, a harness or a session id becomes one subject token and one KV key
  token by :func:`escape_token`: ASCII letters, digits, ``_`` and ``-`` stay as they are; every
  other byte of its UTF-8 (``.``, ``*``, ``>``, whitespace, ``=`` itself, any non-ASCII) is
  written ``=XX`` (two upper-case hex digits); the empty string is the token ``=``. The mapping
  is one-to-one (:func:`unescape_token` reverses it), so no id can forge another subject, a
  wildcard or an extra token, and every token is also a valid KV key token.
- **Subjects.** ``<prefix>.<host>.<harness>.<session>`` carries one session's transitions
  (:func:`session_subject`); ``<prefix>.<host>.gap`` carries the :class:`~messages.Gap` records
  of transitions the publisher could not keep (:func:`gap_subject`): three tokens, so it never
  meets a session's four.
- **Ids.** :func:`msg_id` (``<identity>:<seq>``) is the ``Nats-Msg-Id`` header: a retry of the
  same transition is de-duplicated by the server within the stream's duplicate window; the
  identity is the daemon's (the id of its seq space, ``daemon-id`` in its state directory), so
  two daemons never share ids.
- **KV keys.** ``s.<host>.<harness>.<session>`` holds a session's last Activity,
  ``h.<host>`` the host's :class:`Heartbeat` (:func:`activity_key`, :func:`heartbeat_key`).
- **Health.** A host whose heartbeat is older than :data:`STALE_AFTER_BEATS` intervals (the
  fleet's one rule) is ``stale`` (:func:`host_health`); the sessions of a stale host show
  ``turn: unknown`` (:func:`as_seen`): nothing turns ``idle`` for lack of news.
- **Buffer.** :class:`PublishBuffer`: what waits for the server's acks, bounded; past the bound
  new transitions are counted and folded into one :class:`~messages.Gap` per lost run.
- **Settings.** :func:`resolve_settings` merges the command line, ``$NATS_URL`` and the config
  file's ``[nats]`` table, and refuses a secret in the URL.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Final, Literal
from urllib.parse import urlsplit

import msgspec

from actors.core.fleet.follow import STALE_AFTER_INTERVALS, lapsed, turn_unknown
from messages import Activity, Gap, Transition

__all__ = [
    "DEFAULT_BUCKET",
    "DEFAULT_BUFFER",
    "DEFAULT_HEARTBEAT_S",
    "DEFAULT_MAX_AGE_S",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_PREFIX",
    "DEFAULT_STREAM",
    "STALE_AFTER_BEATS",
    "Health",
    "Heartbeat",
    "NatsSettings",
    "PublishBuffer",
    "PublishStatistics",
    "SettingsError",
    "as_seen",
    "check_url",
    "escape_token",
    "gap_subject",
    "heartbeat_key",
    "host_health",
    "identity_of",
    "host_of_subject",
    "last_per_session",
    "msg_id",
    "resolve_settings",
    "activity_key",
    "session_subject",
    "unescape_token",
]

DEFAULT_PREFIX: Final = "paneward"
DEFAULT_STREAM: Final = "PANEWARD"
DEFAULT_BUCKET: Final = "paneward"
#: Stream retention when the publisher creates it: a week, 1 GiB (whichever comes first).
DEFAULT_MAX_AGE_S: Final = 7 * 86400.0
DEFAULT_MAX_BYTES: Final = 1 << 30
DEFAULT_HEARTBEAT_S: Final = 5.0
#: Transitions the publisher keeps while the server does not ack (about 1 KiB each).
DEFAULT_BUFFER: Final = 10_000
#: A heartbeat older than this many intervals makes its host stale: the fleet's one rule
#: (:data:`actors.core.fleet.follow.STALE_AFTER_INTERVALS`).
STALE_AFTER_BEATS: Final = STALE_AFTER_INTERVALS

Health = Literal["live", "stale"]

_PLAIN: Final = re.compile(r"[A-Za-z0-9_-]+")
_ESCAPED: Final = re.compile(r"=([0-9A-F]{2})")


def escape_token(text: str) -> str:
    """``text`` as one subject / KV key token (the rule in the module docstring)."""
    if not text:
        return "="
    if _PLAIN.fullmatch(text):
        return text
    out: list[str] = []
    for char in text:
        if _PLAIN.fullmatch(char):
            out.append(char)
        else:
            out.extend(f"={byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
    return "".join(out)


def unescape_token(token: str) -> str:
    """The text :func:`escape_token` made ``token`` from.

    :raises ValueError: ``token`` is not one :func:`escape_token` makes.
    """
    if token == "=":
        return ""
    if not token:
        raise ValueError("not an escaped token: ''")
    raw = bytearray()
    i = 0
    while i < len(token):
        char = token[i]
        if char == "=":
            match = _ESCAPED.match(token, i)
            if match is None:
                raise ValueError(f"not an escaped token: {token!r}")
            raw.append(int(match.group(1), 16))
            i += 3
        elif _PLAIN.fullmatch(char):
            raw.extend(char.encode())
            i += 1
        else:
            raise ValueError(f"not an escaped token: {token!r}")
    try:
        text = raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        raise ValueError(f"not an escaped token: {token!r}") from None
    if escape_token(text) != token:  # e.g. "=41" for "A": not the one spelling
        raise ValueError(f"not an escaped token: {token!r}")
    return text


def session_subject(prefix: str, host: str, harness: str, session_id: str) -> str:
    """The subject of one session's transitions."""
    return f"{prefix}.{escape_token(host)}.{escape_token(harness)}.{escape_token(session_id)}"


def gap_subject(prefix: str, host: str) -> str:
    """The subject of a host's :class:`~messages.Gap` records."""
    return f"{prefix}.{escape_token(host)}.gap"


def host_of_subject(prefix: str, subject: str) -> str | None:
    """The host a subject of :func:`session_subject` / :func:`gap_subject` names (``None``:
    not one of ours)."""
    tokens = subject.split(".")
    if len(tokens) not in (3, 4) or tokens[0] != prefix:
        return None
    try:
        return unescape_token(tokens[1])
    except ValueError:
        return None


def activity_key(host: str, harness: str, session_id: str) -> str:
    """The KV key of a session's last Activity."""
    return f"s.{escape_token(host)}.{escape_token(harness)}.{escape_token(session_id)}"


def heartbeat_key(host: str) -> str:
    """The KV key of a host's heartbeat."""
    return f"h.{escape_token(host)}"


def msg_id(identity: str, seq: int) -> str:
    """The ``Nats-Msg-Id`` of transition ``seq`` of the daemon ``identity``."""
    return f"{identity}:{seq}"


_IDENTITY: Final = re.compile(r"[0-9a-f]{32}")


def identity_of(message_id: str) -> str | None:
    """The daemon identity a ``Nats-Msg-Id`` of :func:`msg_id` names (``None``: not one)."""
    identity = message_id.partition(":")[0]
    return identity if _IDENTITY.fullmatch(identity) else None


class Heartbeat(msgspec.Struct, frozen=True, kw_only=True):
    """A host's heartbeat, put in the KV bucket every ``interval_ms`` by its publisher.

    ``identity`` is the daemon's (its seq space, the fleet's ``daemon-id``), ``run`` new at each
    of its starts and ``version`` paneward's there (both empty from an older publisher): what a
    follower takes as the host's :class:`~messages.Daemon`. ``seq`` is the daemon's last
    transition, ``acked`` the last one the server acked with none missing before it,
    ``buffered`` how many wait for acks, ``dropped`` how many the buffer could not keep since
    the daemon started (each run of them is a Gap on the stream).
    """

    host: str
    identity: str
    at_ms: int
    interval_ms: int
    seq: int = 0
    acked: int = 0
    buffered: int = 0
    dropped: int = 0
    run: str = ""
    version: str = ""


def host_health(beat: Heartbeat, now_ms: int) -> Health:
    """``stale`` once ``beat`` is more than :data:`STALE_AFTER_BEATS` intervals old
    (:func:`actors.core.fleet.follow.lapsed`; the reader's clock against the writer's: hosts
    need clocks within an interval of each other)."""
    return "stale" if lapsed(beat.at_ms, beat.interval_ms, now_ms) else "live"


def as_seen(activity: Activity, health: Health) -> Activity:
    """The activity a reader shows for a host of ``health``: a stale host's sessions keep their
    presence and attention, and their turn is ``unknown`` (never ``idle`` for lack of news:
    :func:`actors.core.fleet.follow.turn_unknown`)."""
    return activity if health == "live" else turn_unknown(activity)


class PublishStatistics(msgspec.Struct, kw_only=True):
    """The publisher's counters (``paneward status --counters``, under ``nats``).

    ``accepted``: transitions taken into the buffer; ``dropped``: transitions the full buffer
    could not keep (each run is one Gap); ``gaps``: those runs; ``acked``: messages the server
    acked (duplicates included); ``duplicates``: acks that said the server had it already (a
    retry after a lost ack); ``retries``: windows sent again; ``buffered``: waiting now;
    ``acked_seq``: every seq up to it is on the stream, as itself or inside a Gap (or was
    never owed to it: the seqs before NATS was turned on);
    ``connected``: a connection is up; ``last_error``: the last failure, in words.
    """

    accepted: int = 0
    dropped: int = 0
    gaps: int = 0
    acked: int = 0
    duplicates: int = 0
    retries: int = 0
    buffered: int = 0
    buffer: int = DEFAULT_BUFFER
    connected: bool = False
    acked_seq: int = 0
    last_error: str | None = None


class PublishBuffer:
    """The transitions (and Gap records) waiting for the server's acks, oldest first, at most
    ``capacity`` of them.

    Fed by :meth:`push` from the hub's subscription (never blocks, never raises); the sender
    takes a window with :meth:`window` and, once all of it is acked, calls :meth:`acked`. When
    full, a new transition is dropped and counted; consecutive drops become one
    :class:`~messages.Gap` (reason ``nats_buffer_full``), queued as soon as there is room again
    (it takes no room of its own while the run is open: it is one record).
    """

    __slots__ = ("_items", "_open_gap", "capacity", "stats")

    def __init__(self, capacity: int = DEFAULT_BUFFER) -> None:
        if capacity < 1:
            raise ValueError(f"the NATS buffer holds at least 1 transition, got {capacity}")
        self.capacity = capacity
        self._items: deque[Transition | Gap] = deque()
        self._open_gap: Gap | None = None
        self.stats = PublishStatistics(buffer=capacity)

    def __len__(self) -> int:
        return len(self._items)

    def push(self, transition: Transition, now_ms: int) -> bool:
        """Queue ``transition``; ``False`` when it was dropped (the buffer is full)."""
        stats = self.stats
        if len(self._items) >= self.capacity:
            stats.dropped += 1
            gap = self._open_gap
            if gap is None:
                stats.gaps += 1
                self._open_gap = Gap(
                    next_seq=transition.seq, dropped=1, reason="nats_buffer_full",
                    noticed_ms=now_ms,
                )
            else:
                self._open_gap = msgspec.structs.replace(gap, dropped=gap.dropped + 1)
            return False
        if self._open_gap is not None:
            self._items.append(self._open_gap)
            self._open_gap = None
        self._items.append(transition)
        stats.accepted += 1
        stats.buffered = len(self._items)
        return True

    def push_gap(self, gap: Gap) -> None:
        """Queue a Gap noticed elsewhere (the hub's subscription overflowed); it is kept even
        when the buffer is full, since it stands for what is lost."""
        if self._open_gap is not None:
            self._items.append(self._open_gap)
            self._open_gap = None
        self._items.append(gap)
        self.stats.gaps += 1
        self.stats.buffered = len(self._items)

    def first_seq(self) -> int | None:
        """The seq of the oldest item waiting (a Gap's first seq), ``None`` when empty."""
        if not self._items:
            return None
        item = self._items[0]
        return item.seq if isinstance(item, Transition) else item.next_seq

    def prepend(self, items: list[Transition | Gap], now_ms: int) -> None:
        """Put ``items`` (older than everything queued, in seq order) in front: what a
        restarted daemon finds missing on the stream, from its journal. Beyond the free room
        the oldest of them are left out, as one Gap (``nats_buffer_full``)."""
        room = max(self.capacity - len(self._items), 1)
        if len(items) > room:
            cut = len(items) - room + 1  # the Gap takes one place
            first, last = items[0], items[cut - 1]
            start = first.seq if isinstance(first, Transition) else first.next_seq
            end = last.seq if isinstance(last, Transition) else last.next_seq + last.dropped - 1
            self.stats.dropped += end - start + 1
            self.stats.gaps += 1
            gap = Gap(next_seq=start, dropped=end - start + 1, reason="nats_buffer_full",
                      noticed_ms=now_ms)
            items = [gap, *items[cut:]]
        self._items.extendleft(reversed(items))
        self.stats.buffered = len(self._items)

    def window(self, limit: int) -> list[Transition | Gap]:
        """The oldest ``limit`` items (they stay queued until :meth:`acked`)."""
        items = self._items
        if limit >= len(items):
            return list(items)
        return [items[i] for i in range(limit)]

    def acked(self, count: int) -> None:
        """The oldest ``count`` items are on the stream: forget them."""
        items = self._items
        stats = self.stats
        for _ in range(min(count, len(items))):
            item = items.popleft()
            last = item.seq if isinstance(item, Transition) else item.next_seq + item.dropped - 1
            stats.acked_seq = max(stats.acked_seq, last)
        if self._open_gap is not None and len(items) < self.capacity:
            # The run of drops ended with no transition after it yet: say so now.
            items.append(self._open_gap)
            self._open_gap = None
        stats.buffered = len(items)


def last_per_session(items: Iterable[Transition | Gap]) -> list[Transition]:
    """The last transition of each session among ``items``, in their order (what the KV
    bucket gets after a window)."""
    last: dict[tuple[str, str], Transition] = {}
    for item in items:
        if isinstance(item, Transition):
            key = (item.key.harness, item.key.session_id)
            last.pop(key, None)
            last[key] = item
    return list(last.values())


class SettingsError(ValueError):
    """The NATS settings cannot be used (the text says which and why)."""


class NatsSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Where and how the publisher and the direct readers reach NATS.

    Credentials are files, by the NATS conventions: ``creds`` (a ``.creds`` file: user JWT and
    nkey seed), ``nkey`` (a file holding an nkey seed), or a TLS client certificate
    (``tls_cert`` + ``tls_key``, ``tls_ca`` for a private CA). Never a secret inline.
    """

    url: str
    host: str
    creds: str | None = None
    nkey: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None
    stream: str = DEFAULT_STREAM
    bucket: str = DEFAULT_BUCKET
    prefix: str = DEFAULT_PREFIX
    max_age_s: float = DEFAULT_MAX_AGE_S
    max_bytes: int = DEFAULT_MAX_BYTES
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    buffer: int = DEFAULT_BUFFER


_NAME: Final = re.compile(r"[A-Za-z0-9_-]+")
_FILE_KEYS: Final = ("creds", "nkey", "tls_cert", "tls_key", "tls_ca")
_TABLE_KEYS: Final = frozenset(
    ("url", "host", *_FILE_KEYS, "stream", "bucket", "prefix", "max_age", "max_bytes",
     "heartbeat", "buffer")
)


def check_url(url: str, where: str) -> str:
    """``url`` if it names NATS servers (comma-separated) with no secret in it.

    :raises SettingsError: another scheme, no host, or a user, password or token in it
        (``where`` says whose setting it is; the secret is never echoed).
    """
    for server in url.split(","):
        parts = urlsplit(server.strip() if "://" in server else f"nats://{server.strip()}")
        if parts.scheme not in ("nats", "tls", "ws", "wss"):
            raise SettingsError(f"{where}: {server!r} is not a NATS URL (nats://HOST:PORT)")
        if parts.username is not None or parts.password is not None:
            raise SettingsError(
                f"{where}: the URL carries a user or token; give credentials as a file "
                "(--nats-creds, --nats-nkey or a TLS client certificate), never in the URL"
            )
        if not parts.hostname:
            raise SettingsError(f"{where}: {server!r} names no server")
    return url


def _number(table: Mapping[str, object], key: str, kind: type, minimum: float) -> object:
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SettingsError(f"[nats] {key}: a number, got {value!r}")
    if value < minimum:
        raise SettingsError(f"[nats] {key}: at least {minimum:g}, got {value!r}")
    return kind(value)


def resolve_settings(
    *,
    cli: Mapping[str, object],
    env: Mapping[str, str],
    table: Mapping[str, object] | None,
    default_host: str,
) -> NatsSettings | None:
    """The settings in force: each value from the command line (``cli``, argparse names
    without the ``nats_`` prefix; ``None`` = not given), else the config file's ``[nats]``
    ``table``, else the default; the URL also from ``$NATS_URL``. ``None`` when no URL is
    configured anywhere (NATS off).

    :raises SettingsError: an unknown key, a value of the wrong kind, a URL with a secret in
        it, a stream/bucket/prefix that is not one token.
    """
    table = dict(table or {})
    unknown = sorted(set(table) - _TABLE_KEYS)
    if unknown:
        raise SettingsError(f"[nats]: unknown key {unknown[0]!r} (known: {sorted(_TABLE_KEYS)})")
    url: str | None = None
    where = ""
    for source, value in (
        ("--nats", cli.get("url")),
        ("$NATS_URL", env.get("NATS_URL") or None),
        ("[nats] url", table.get("url")),
    ):
        if value is not None:
            if not isinstance(value, str) or not value.strip():
                raise SettingsError(f"{source}: a NATS URL, got {value!r}")
            url, where = value.strip(), source
            break
    if url is None:
        return None
    values: dict[str, object] = {"url": check_url(url, where)}
    for key in ("host", *_FILE_KEYS, "stream", "bucket", "prefix"):
        value = cli.get(key)
        if value is None:
            value = table.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not value:
            raise SettingsError(f"[nats] {key}: a non-empty string, got {value!r}")
        if key in ("stream", "bucket", "prefix") and not _NAME.fullmatch(value):
            raise SettingsError(f"[nats] {key}: letters, digits, '_' and '-' only, got {value!r}")
        values[key] = value
    values.setdefault("host", default_host)
    if bool(values.get("tls_cert")) != bool(values.get("tls_key")):
        raise SettingsError("a TLS client certificate needs both tls_cert and tls_key")
    for key, name, kind, minimum in (
        ("max_age", "max_age_s", float, 1.0),
        ("max_bytes", "max_bytes", int, 1024.0),
        ("heartbeat", "heartbeat_s", float, 0.05),
        ("buffer", "buffer", int, 1.0),
    ):
        merged = {key: cli[key]} if cli.get(key) is not None else table
        if key in merged and merged[key] is not None:
            values[name] = _number(merged, key, kind, minimum)
    return msgspec.convert(values, NatsSettings)
