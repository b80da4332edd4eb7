"""The NATS publisher: every transition of this daemon onto a JetStream stream, the last
Activity per session and the host's heartbeat into a KV bucket (docs/fleet.md, "NATS").

Who calls what: the daemon starts one :class:`NatsPublisher` (``paneward run --nats URL``)
under the supervisor (``Supervisor.start_actor``, not essential). Its intake task reads an
``all`` subscription of the hub and only appends to a bounded :class:`PublishBuffer`
(:mod:`actors.core.fleet.nats`): it never waits for the server, so a slow, absent or stopped server
never reaches the hook path. Its sender task publishes the buffer in windows, each message with
``Nats-Msg-Id`` = daemon identity + seq, and forgets a window only once every message of it
is acked; a window not acked within ``ack_timeout`` is sent again (the server drops the
duplicates). The heartbeat task puts the host's :class:`~actors.core.fleet.nats.Heartbeat` every
``heartbeat_s``.

Resume: on every connection, before sending, the publisher asks the stream for this host's last
message. When it carries this daemon's identity and a seq below the oldest one waiting, the
transitions in between (a restart of the daemon lost what it had not yet had acked; the
corrections it published at start came before its subscription) are read from the store's
journal (``journal``) and put in front. A stream holding nothing of this identity (NATS newly
turned on, a new state directory) gets what comes from now on.

nats-py is imported by this module only, which only the daemon imports, and only when NATS is
configured (``pip install 'paneward[nats]'``).
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

import anyio
import msgspec
import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext, api

from actors.core.backoff import Backoff
from actors.core.fleet.nats import (
    Heartbeat,
    NatsSettings,
    PublishBuffer,
    PublishStatistics,
    activity_key,
    escape_token,
    gap_subject,
    heartbeat_key,
    last_per_session,
    msg_id,
    session_subject,
)
from actors.runtime.mailbox import ActorHost
from messages import Activity, Gap, Overflow, SessionKey, Snapshot, Transition, encode

__all__ = ["NatsPublisher", "connect", "describe_error"]

logger = logging.getLogger("paneward.nats")

#: Messages in flight at once (one window).
WINDOW: Final = 512
#: The hub subscription's own bound: the intake task drains it at every wake-up.
_HUB_BUFFER: Final = 4096
_DEDUP_WINDOW_S: Final = 120.0


#: How a connection closed by the server reads, in nats-py's and the ssl module's words.
_CLOSED: Final = ("connection lost", "unexpected eof", "eof occurred", "broken pipe",
                  "connection reset")


def describe_error(exc: BaseException | str, settings: NatsSettings) -> str:
    """A failure in words the user can act on (which credentials were refused)."""
    text = str(exc) or type(exc).__name__
    if "authorization" in text.lower() or "authentication" in text.lower():
        used = (
            f"creds file {settings.creds}" if settings.creds
            else f"nkey seed file {settings.nkey}" if settings.nkey
            else f"TLS client certificate {settings.tls_cert}" if settings.tls_cert
            else "no credentials, no TLS client certificate" if _tls_context(settings)
            else "no credentials"
        )
        return f"{settings.url} refused the credentials ({used}): {text}"
    if "certificate verify failed" in text:
        return (f"{settings.url}: {text} (the server's certificate is not signed by a CA this "
                "host trusts: --nats-tls-ca / tls_ca)")
    if "BAD_CERTIFICATE" in text or "CERTIFICATE_REQUIRED" in text:
        used = (f"TLS client certificate {settings.tls_cert}" if settings.tls_cert
                else "no TLS client certificate")
        return f"{settings.url} refused the credentials ({used}): {text}"
    lowered = text.lower()
    if _tls_context(settings) is not None and not settings.tls_cert and any(
        words in lowered for words in _CLOSED
    ):
        # TLS 1.3: a server that wants a client certificate may only close the connection.
        return (f"{settings.url}: {text} (no TLS client certificate given: a server that "
                "requires one closes the connection; --nats-tls-cert and --nats-tls-key)")
    return f"{settings.url}: {text}"


def _tls_context(settings: NatsSettings) -> ssl.SSLContext | None:
    if not (settings.tls_cert or settings.tls_ca or settings.url.startswith("tls://")):
        return None
    context = ssl.create_default_context(cafile=settings.tls_ca)
    if settings.tls_cert and settings.tls_key:
        context.load_cert_chain(settings.tls_cert, settings.tls_key)
    return context


async def connect(
    settings: NatsSettings,
    *,
    reconnect: bool,
    error: Callable[[str], None] | None = None,
    connect_timeout: float = 2.0,
    closed: Callable[[], None] | None = None,
) -> Client:
    """A connection to ``settings.url`` with its credentials; with ``reconnect`` it
    reconnects on its own, forever, once it was up. ``closed()`` is called when the connection
    is closed for good (without ``reconnect``: at the first loss; a fleet follower's
    :mod:`actors.sources.nats_link` then resumes on a new one).

    :raises nats.errors.Error: or :class:`OSError`: no server could be reached, or it refused
        the credentials (:func:`describe_error` says which).
    """
    errors: list[str] = []

    async def error_cb(exc: Exception) -> None:
        text = describe_error(exc, settings)
        errors.append(text)
        if error is not None:
            error(text)

    options: dict[str, Any] = {
        "servers": [s.strip() for s in settings.url.split(",")],
        "name": f"paneward {settings.host}",
        "connect_timeout": connect_timeout,
        "allow_reconnect": reconnect,
        "max_reconnect_attempts": -1 if reconnect else 0,
        "reconnect_time_wait": 0.5,
        "error_cb": error_cb,
        "tls": _tls_context(settings),
    }
    if closed is not None:
        on_closed = closed

        async def closed_cb() -> None:
            on_closed()

        options["closed_cb"] = closed_cb
    if settings.creds:
        options["user_credentials"] = settings.creds
    elif settings.nkey:
        options["nkeys_seed"] = settings.nkey
    try:
        return await nats.connect(**options)
    except (nats.errors.Error, OSError) as exc:
        # nats-py reports "no servers" after an authorization refusal: say the refusal.
        refused = [e for e in errors if "refused the credentials" in e]
        if refused:
            raise nats.errors.AuthorizationError(refused[-1]) from exc
        raise


class _Acks:
    """The acks of the window in flight, counted by the connection's ack subscription.

    Every message is published with the reply subject ``<inbox>.<n>`` (``n`` one counter for
    the connection); an ack for an ``n`` outside the window in flight (a late ack of a window
    sent again) is ignored. Made per connection by :meth:`NatsPublisher._serve`.
    """

    __slots__ = ("duplicates", "error", "first", "inbox", "next", "seen", "want", "whole")

    def __init__(self, inbox: str) -> None:
        self.inbox = inbox
        self.next = 0
        self.first = 0
        self.want = 0
        self.seen: bytearray = bytearray()
        self.duplicates = 0
        self.error: str | None = None
        self.whole = anyio.Event()

    def start(self, count: int) -> int:
        """A new window of ``count`` messages: the ``n`` of its first."""
        self.first, self.next = self.next, self.next + count
        self.want = count
        self.seen = bytearray(count)
        self.duplicates = 0
        self.error = None
        self.whole = anyio.Event()
        if not count:
            self.whole.set()
        return self.first

    def take(self, subject: str, data: bytes) -> None:
        """One ack (or a server status: no stream, an error) for ``<inbox>.<n>``."""
        try:
            index = int(subject.rpartition(".")[2]) - self.first
        except ValueError:
            return
        if not 0 <= index < len(self.seen) or self.seen[index]:
            return
        if not data or b'"error"' in data:
            # A status with no body (503: no stream listens) or a JetStream error.
            self.error = data.decode("utf-8", "replace")[:200] or "no stream for the subject"
            self.whole.set()
            return
        self.seen[index] = 1
        if b'"duplicate":true' in data:
            self.duplicates += 1
        self.want -= 1
        if self.want == 0:
            self.whole.set()


class NatsPublisher:
    """Publishes this daemon's transitions to NATS (see the module docstring).

    ``identity`` is the daemon's ``(id, run, version)``
    (:func:`actors.cli.daemon.daemon_identity`, the same one a fleet watch names): ``id`` makes
    every ``Nats-Msg-Id``, all three go in the heartbeat. ``clock`` gives wall-clock ms
    (heartbeats, Gap records); ``ack_timeout`` bounds the wait for one window's acks before it
    is sent again.
    """

    def __init__(
        self,
        settings: NatsSettings,
        identity: tuple[str, str, str],
        *,
        ack_timeout: float = 2.0,
        clock: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        journal: Callable[[int, int], Awaitable[list[Transition | Gap]]] | None = None,
    ) -> None:
        self.settings = settings
        self.identity, self._run, self._version = identity
        self._ack_timeout = ack_timeout
        self._clock = clock
        self._buffer = PublishBuffer(settings.buffer)
        self._latest: dict[SessionKey, Activity] = {}
        self._kv_dirty = True  # put every session's latest activity after (re)connecting
        self._pending = anyio.Event()
        self._seq = 0
        self._logged_error: str | None = None
        self._journal = journal
        self._resumed_to = 0  # every seq up to it is on the stream or queued
        self._subscribed = anyio.Event()  # the first snapshot is in: ``_seq`` is known

    def statistics(self) -> PublishStatistics:
        """A copy of the counters (``status --counters``)."""
        return msgspec.structs.replace(self._buffer.stats)

    # -- intake: hub -> buffer, never waits for the server -----------------------------------

    async def run(self, host: ActorHost) -> None:
        """Run under the supervisor until cancelled or the hub closes."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._links)
            await self._intake(host)
            tg.cancel_scope.cancel()

    async def _intake(self, host: ActorHost) -> None:
        lost_from: int | None = None
        while True:
            with host.subscribe(mode="all", snapshot=True, buffer=_HUB_BUFFER) as items:
                async for item in items:
                    if isinstance(item, Transition):
                        self._take(item)
                        self._drain(items)
                    elif isinstance(item, Snapshot):
                        self._seq = max(self._seq, item.seq)
                        self._subscribed.set()
                        self._latest = {a.key: a for a in item.activities}
                        self._kv_dirty = True
                        if lost_from is not None and item.seq >= lost_from:
                            self._buffer.push_gap(Gap(
                                next_seq=lost_from, dropped=item.seq - lost_from + 1,
                                reason="overflow", noticed_ms=self._clock(),
                            ))
                        lost_from = None
                    elif isinstance(item, Overflow):
                        lost_from = item.next_seq
                    self._pending.set()
                if lost_from is None:
                    return  # the hub closed: shutdown

    def _drain(self, items: Any) -> None:
        # Take what is already queued without a scheduler round per item; a transition that
        # came alone has nothing behind it (the Snapshot and Overflow markers come alone, to
        # the loop above).
        try:
            batch = items.receive_many_nowait(_HUB_BUFFER)
        except (anyio.WouldBlock, anyio.EndOfStream):
            return
        for item in batch:
            self._take(item)

    def _take(self, transition: Transition) -> None:
        self._seq = transition.seq
        if transition.forgets:
            self._latest.pop(transition.key, None)
        else:
            self._latest[transition.key] = transition.after
        self._buffer.push(transition, self._clock())

    # -- the link: connect, ensure stream and bucket, send, heartbeat -----------------------

    def _note_error(self, text: str) -> None:
        self._buffer.stats.last_error = text
        if text != self._logged_error:
            self._logged_error = text
            logger.warning("nats: %s", text)

    async def _links(self) -> None:
        backoff = Backoff(0.5, 10.0)
        await self._subscribed.wait()
        while True:
            try:
                nc = await connect(self.settings, reconnect=True, error=self._note_error)
            except (nats.errors.Error, OSError, ssl.SSLError) as exc:
                self._note_error(describe_error(exc, self.settings))
                await anyio.sleep(backoff.failed())
                continue
            backoff.connected(time.monotonic())
            try:
                await self._serve(nc)
            except (nats.errors.Error, nats.js.errors.Error, OSError) as exc:
                self._note_error(describe_error(exc, self.settings))
            finally:
                self._buffer.stats.connected = False
                with anyio.move_on_after(1.0, shield=True):
                    await nc.close()
            await anyio.sleep(backoff.ended(time.monotonic()))

    async def _serve(self, nc: Client) -> None:
        js = nc.jetstream(timeout=self._ack_timeout)
        await self._ensure(js)
        await self._resume(js)
        # Acks come to one subscription of this connection (cheaper per message than nats-py's
        # publish_async futures: bench/bench_nats.py).
        acks = _Acks(nc.new_inbox())

        async def on_ack(msg: Any) -> None:
            acks.take(msg.subject, msg.data)

        sub = await nc.subscribe(f"{acks.inbox}.*", cb=on_ack)
        self._buffer.stats.connected = True
        self._kv_dirty = True
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._heartbeats, nc)
                await self._send(nc, acks)
        finally:
            with anyio.move_on_after(1.0, shield=True):
                await sub.unsubscribe()

    async def _ensure(self, js: JetStreamContext) -> None:
        """Create the stream and the bucket when missing (limits from the settings); an
        existing one is used as it is."""
        s = self.settings
        try:
            await js.stream_info(s.stream)
        except nats.js.errors.NotFoundError:
            await js.add_stream(api.StreamConfig(
                name=s.stream, subjects=[f"{s.prefix}.>"], max_age=s.max_age_s,
                max_bytes=s.max_bytes, storage=api.StorageType.FILE,
                duplicate_window=_DEDUP_WINDOW_S, discard=api.DiscardPolicy.OLD,
            ))
        try:
            await js.key_value(s.bucket)
        except nats.js.errors.BucketNotFoundError:
            await js.create_key_value(api.KeyValueConfig(
                bucket=s.bucket, history=1, max_bytes=s.max_bytes,
                storage=api.StorageType.FILE,
            ))

    async def _resume(self, js: JetStreamContext) -> None:
        """Queue, from the journal, what the stream misses before the oldest seq waiting (see
        the module docstring)."""
        if self._journal is None:
            return
        first = self._buffer.first_seq()
        until = (self._seq + 1 if first is None else first) - 1
        if until <= self._resumed_to:
            return
        s = self.settings
        try:
            last = await js.get_last_msg(s.stream, f"{s.prefix}.{escape_token(s.host)}.>")
        except nats.js.errors.NotFoundError:
            stats = self._buffer.stats
            self._resumed_to = stats.acked_seq = max(stats.acked_seq, until)
            return
        headers = last.headers or {}
        stats = self._buffer.stats
        if not str(headers.get("Nats-Msg-Id", "")).startswith(self.identity + ":"):
            # Nothing of ours there yet: the stream is owed what comes from now on.
            self._resumed_to = stats.acked_seq = max(stats.acked_seq, until)
            return
        data = last.data or b""
        try:
            item = msgspec.json.decode(data)
            on_stream = int(item["seq"]) if "seq" in item else (
                int(item["next_seq"]) + int(item["dropped"]) - 1
            )
        except (msgspec.DecodeError, KeyError, TypeError, ValueError):
            on_stream = 0
        since = max(on_stream, self._resumed_to)
        stats.acked_seq = max(stats.acked_seq, min(since, until))
        if since < until:
            missing = await self._journal(since, until)
            self._buffer.prepend(missing, self._clock())
            logger.info("nats: resuming from seq %d: %d items from the journal", since,
                        len(missing))
        self._resumed_to = until

    async def _heartbeats(self, nc: Client) -> None:
        s = self.settings
        subject = f"$KV.{s.bucket}.{heartbeat_key(s.host)}"
        interval_ms = int(s.heartbeat_s * 1000)
        while True:
            stats = self._buffer.stats
            beat = Heartbeat(
                host=s.host, identity=self.identity, at_ms=self._clock(),
                interval_ms=interval_ms, seq=self._seq, acked=stats.acked_seq,
                buffered=stats.buffered, dropped=stats.dropped, run=self._run,
                version=self._version,
            )
            # Core publish (no ack wait): the bucket's stream takes it; a lost beat is the
            # next interval's.
            await nc.publish(subject, msgspec.json.encode(beat))
            await anyio.sleep(s.heartbeat_s)

    async def _send(self, nc: Client, acks: _Acks) -> None:
        s = self.settings
        buffer = self._buffer
        stats = buffer.stats
        kv = f"$KV.{s.bucket}."
        while True:
            if self._kv_dirty:
                self._kv_dirty = False
                latest = list(self._latest.values())
                for start in range(0, len(latest), WINDOW):
                    self._kv_dirty |= not await self._acked(nc, acks, [
                        (kv + activity_key(s.host, a.key.harness, a.key.session_id),
                         encode(a), None)
                        for a in latest[start:start + WINDOW]
                    ])
            if not len(buffer):
                pending = self._pending = anyio.Event()
                if not len(buffer) and not self._kv_dirty:
                    await pending.wait()
                continue
            window = buffer.window(WINDOW)
            messages: list[tuple[str, bytes, dict[str, str] | None]] = []
            for item in window:
                if isinstance(item, Transition):
                    k = item.key
                    messages.append((
                        session_subject(s.prefix, s.host, k.harness, k.session_id),
                        encode(item), {"Nats-Msg-Id": msg_id(self.identity, item.seq)},
                    ))
                else:
                    messages.append((
                        gap_subject(s.prefix, s.host), encode(item),
                        {"Nats-Msg-Id": msg_id(self.identity, item.next_seq) + ":gap"},
                    ))
            for t in last_per_session(window):
                k = t.key
                key = kv + activity_key(s.host, k.harness, k.session_id)
                if t.forgets:
                    messages.append((key, b"", {"KV-Operation": "DEL"}))
                else:
                    messages.append((key, encode(t.after), None))
            if await self._acked(nc, acks, messages):
                buffer.acked(len(window))
            else:
                stats.retries += 1
                await anyio.sleep(0.05)
                if not nc.is_connected:
                    await self._wait_connected(nc)

    async def _wait_connected(self, nc: Client) -> None:
        while not nc.is_connected:
            if nc.is_closed:
                raise nats.errors.ConnectionClosedError
            await anyio.sleep(0.05)

    async def _acked(
        self, nc: Client, acks: _Acks,
        messages: list[tuple[str, bytes, dict[str, str] | None]],
    ) -> bool:
        """Publish ``messages`` and wait for every ack; ``False`` when one did not come in
        time or was an error (the caller sends the window again)."""
        stats = self._buffer.stats
        first = acks.start(len(messages))
        prefix = acks.inbox + "."
        try:
            with anyio.move_on_after(self._ack_timeout) as scope:
                for n, (subject, payload, headers) in enumerate(messages, first):
                    await nc.publish(subject, payload, reply=f"{prefix}{n}", headers=headers)
                await acks.whole.wait()
        except nats.errors.Error as exc:
            self._note_error(describe_error(exc, self.settings))
            return False
        stats.acked += len(messages) - acks.want
        stats.duplicates += acks.duplicates
        if acks.error is not None:
            self._note_error(f"{self.settings.url}: the server refused a message: {acks.error}")
            return False
        if scope.cancelled_caught:
            self._note_error(
                f"{self.settings.url}: no ack within {self._ack_timeout:g} s; sending again"
            )
            return False
        if stats.last_error is not None:
            stats.last_error = None
            self._logged_error = None
        return True
