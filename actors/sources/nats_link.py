"""Every host on one NATS server, followed: the fleet's second transport.

One of the two implementations of the transport interface (:mod:`actors.core.fleet.transport`,
docs/fleet.md): what the publishers (``paneward run --nats``, :mod:`actors.sinks.nats`) put on
the server is handed, host by host, to one :class:`~actors.core.fleet.follow.Follower` per
host, whose changes go to ``deliver(host, changes)`` exactly as the SSH link's do.

Per connection (:meth:`NatsLink.run` reconnects by the one retry rule,
:class:`actors.core.backoff.Backoff`, 0.5 s doubling to 10 s):

1. **Snapshot** (the first connection only): the stream's last sequence ``S``, then every
   value of the KV bucket: each host's heartbeat (its identity, ``run`` and version: the
   host's :class:`~messages.Daemon`) and its sessions' last activities (its
   :class:`~messages.Snapshot`). Read in that order, the bucket is at least as new as ``S``.
2. **Stream**: an ordered consumer on ``<prefix>.>`` from ``S + 1`` -- after any drop, from the
   last stream sequence applied + 1: every transition after the snapshot, once; the follower
   skips a host seq it has applied (``duplicates``). Each message's host is its subject's,
   its daemon the identity in its ``Nats-Msg-Id``; a message whose subject does not match its
   key, or with no identity, is refused and counted. A host first seen, or seen with another
   identity (another daemon behind the name), is adopted: its heartbeat and its sessions from
   the bucket, then its messages.
3. **Heartbeats**: a watch of the bucket's ``h.*`` keys. A beat is a sign of life when it
   arrives (the reader's clock, never the publisher's); a host with no sign of life for
   :data:`~actors.core.fleet.follow.STALE_AFTER_INTERVALS` of its heartbeat interval goes
   stale (:meth:`~actors.core.fleet.follow.Follower.lapse`): its turn ``unknown``, presence
   and attention kept, never idle. The next beat makes it connected again.

What this daemon publishes to the same server itself (the identity given as ``own``) is its
local view already: it is skipped, never shown a second time as a remote host.

The connection lost: every host stale from that moment (the reason of each failed try after
it kept). No connection ever made (a refused credential, no server, no paneward stream or
bucket there yet): the entry itself is the one row of :meth:`NatsLink.hosts`,
``unreachable`` with the reason (:func:`actors.sinks.nats.describe_error`).

Stream messages and heartbeats are handled in one task, in the order they arrive, so a host's
adoption and its messages never interleave. A NATS host's pane cannot be reached from here
(:meth:`NatsLink.attach` is ``None``): ``next`` and ``pick`` do not offer it.

Started by the merged view (:meth:`actors.sources.fleet.FleetView.run`) for each ``[[nats]]``
entry of the hosts file; nats-py is imported by this module, which the daemon imports only
when such an entry exists.
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Hashable, Sequence
from typing import Any, Final

import anyio
import msgspec
import nats.errors
import nats.js.errors
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from nats.js import api

from actors.core.backoff import Backoff
from actors.core.clock import now_ms
from actors.core.fleet.follow import (
    MAX_LINE_BYTES,
    STALE_AFTER_INTERVALS,
    Change,
    Drop,
    Follower,
    HostKey,
    lapsed,
)
from actors.core.fleet.hosts import NatsEntry
from actors.core.fleet.nats import (
    Heartbeat,
    escape_token,
    gap_subject,
    host_of_subject,
    identity_of,
    session_subject,
    unescape_token,
)
from actors.core.fleet.transport import Deliver, HostRow, host_row
from actors.sinks.nats import connect, describe_error
from messages.activity import Activity, Daemon, Gap, Snapshot, Transition

__all__ = ["NatsLink", "NatsLinkStatistics"]

#: Messages and beats waiting for the handler (the nats-py callbacks wait beyond it).
_QUEUE: Final = 4096
_NO_RUN: Final = "0" * 32


class NatsLinkStatistics(msgspec.Struct, kw_only=True):
    """One NATS entry: the server's state, how far the stream was read, what was refused, and
    every host's own counters (as an SSH link's)."""

    server: str
    state: str
    since_ms: int
    reason: str | None
    stream_seq: int
    connections: int
    messages: int
    beats: int
    refused: dict[str, int]
    hosts: list[dict[str, Any]]


class _Beat:
    __slots__ = ("interval_ms", "seen_ms", "stamp")

    def __init__(self, stamp: int, interval_ms: int, seen_ms: int) -> None:
        self.stamp, self.interval_ms, self.seen_ms = stamp, interval_ms, seen_ms


class NatsLink:
    """Every host of one NATS server (see the module docstring).

    :param entry: the ``[[nats]]`` entry of the hosts file.
    :param deliver: ``deliver(host_name, changes)``, called in the event loop for every batch.
    :param own: this daemon's identity: what it publishes to the same server itself is its
        local view already, never a remote host (skipped, counted as ``own``).
    :param retry: the first and the longest wait between tries (seconds).
    """

    def __init__(
        self, entry: NatsEntry, deliver: Deliver, *, own: str | None = None,
        retry: tuple[float, float] = (0.5, 10.0),
    ) -> None:
        self._entry = entry
        self._own = own
        self.settings = entry.settings(f"follower {socket.gethostname()}")
        self._deliver = deliver
        self._backoff = Backoff(*retry)
        self.followers: dict[str, Follower] = {}
        self._beats: dict[str, _Beat] = {}
        self._state = "connecting"
        self._since_ms = now_ms()
        self._reason: str | None = None
        self._stream_seq: int | None = None
        self._connections = 0
        self._messages = 0
        self._beat_count = 0
        self._refused: dict[str, int] = {}
        self._beat_arrived = anyio.Event()
        self._changed = anyio.Event()

    # ------------------------------------------------------------------ the interface

    @property
    def entry(self) -> Hashable:
        return self._entry

    @property
    def name(self) -> str:
        return self._entry.url

    @property
    def named(self) -> tuple[str, ...]:
        return ()  # its hosts name themselves

    def hosts(self) -> list[HostRow]:
        rows = [msgspec.structs.replace(host_row(f), no_jump=_no_jump(f.host, self._entry.url))
                for f in self.followers.values()]
        if rows:
            return rows
        return [HostRow(host=self._entry.url, health=self._state, since_ms=self._since_ms,
                        reason=self._reason)]

    def attach(self, activity: Activity) -> list[str] | None:
        del activity  # a NATS host's terminal is not reachable through the server
        return None

    def statistics(self) -> NatsLinkStatistics:
        hosts = []
        for f in self.followers.values():
            hosts.append({
                "host": f.host, "health": f.health.state, "since_ms": f.health.since_ms,
                "reason": f.health.reason, "daemon": f.daemon_id, "version": f.version,
                "last_seq": f.last_seq, "sessions": len(f.sessions), "applied": f.applied,
                "duplicates": f.duplicates, "unexplained": f.unexplained,
                "restarts": f.restarts, "new_daemons": f.new_daemons,
                "rejected": dict(f.rejected), "gaps": list(f.gaps),
            })
        return NatsLinkStatistics(
            server=self._entry.url, state=self._state, since_ms=self._since_ms,
            reason=self._reason, stream_seq=self._stream_seq or 0,
            connections=self._connections, messages=self._messages, beats=self._beat_count,
            refused=dict(self._refused), hosts=hosts,
        )

    async def wait_changed(self) -> None:
        """Until the next batch was handled (or the connection's state changed)."""
        await self._changed.wait()

    # ------------------------------------------------------------------ the loop

    async def run(self, sink: object = None) -> None:
        """Connect, follow, reconnect, until cancelled (``sink`` unused)."""
        del sink
        while True:
            worked_at = await self._connect_once()
            if worked_at is None:
                delay = self._backoff.failed()
            else:
                self._backoff.connected(worked_at)
                delay = self._backoff.ended(time.monotonic())
            await anyio.sleep(delay)

    def _handled(self, batches: dict[str, list[Change]]) -> None:
        for host, changes in batches.items():
            if changes:
                self._deliver(host, changes)
        self._changed.set()
        self._changed = anyio.Event()

    def _failed(self, reason: str) -> None:
        """A try that did not work, or a connection that ended (``reason`` why): every host
        stale (or unreachable, none having worked), the entry's own row too."""
        now = now_ms()
        if self._connections == 0:
            if self._state != "unreachable" or self._reason != reason:
                self._since_ms = now
            self._state = "unreachable"
        else:
            if self._state == "connected":
                self._since_ms = now
            self._state = "stale"
        self._reason = reason
        self._handled({h: f.ended(now, reason) for h, f in self.followers.items()})

    def _refuse(self, reason: str, host: str | None = None) -> None:
        follower = self.followers.get(host) if host is not None else None
        if follower is not None:
            follower.refuse(reason)
        else:
            self._refused[reason] = self._refused.get(reason, 0) + 1

    async def _connect_once(self) -> float | None:
        """One connection, until it ends; the monotonic time it started working, if it did."""
        closed = anyio.Event()
        for follower in self.followers.values():
            follower.connecting(now_ms())
        try:
            nc = await connect(self.settings, reconnect=False, closed=closed.set)
        except (nats.errors.Error, OSError, ssl.SSLError) as exc:
            self._failed(describe_error(exc, self.settings))
            return None
        worked_at: float | None = None
        try:
            js = nc.jetstream(timeout=5.0)
            try:
                kv = await js.key_value(self.settings.bucket)
                start = await self._start_seq(js)
            except (nats.js.errors.BucketNotFoundError, nats.js.errors.NotFoundError):
                self._failed(
                    f"{self.settings.url}: no paneward stream {self.settings.stream!r} or "
                    f"bucket {self.settings.bucket!r} there yet (no daemon has published: "
                    "paneward run --nats URL)"
                )
                return None
            if self._stream_seq is None:
                await self._snapshot(kv)
                self._stream_seq = start - 1
            worked_at = time.monotonic()
            self._connections += 1
            self._state, self._reason, self._since_ms = "connected", None, now_ms()
            self._handled({})
            ended: list[str] = []

            def end(why: str) -> None:
                ended.append(why)
                closed.set()

            send, receive = anyio.create_memory_object_stream[tuple[str, Any]](_QUEUE)
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._guard, end, self._read_stream, js, start, send.clone())
                tg.start_soon(self._guard, end, self._read_beats, kv, send)
                tg.start_soon(self._lapses)
                tg.start_soon(self._guard, end, self._handle, kv, receive)
                await closed.wait()
                tg.cancel_scope.cancel()
            self._failed(ended[0] if ended else f"{self.settings.url}: the connection closed")
        except (nats.errors.Error, nats.js.errors.Error, OSError) as exc:
            self._failed(describe_error(exc, self.settings))
        finally:
            with anyio.move_on_after(1.0, shield=True):
                await nc.close()
        return worked_at

    async def _guard(self, end: Any, reader: Any, *args: Any) -> None:
        """Run one of the connection's tasks; a failure of it ends the connection (``end``
        with the reason), never the link."""
        try:
            await reader(*args)
        except (nats.errors.Error, nats.js.errors.Error, OSError) as exc:
            end(describe_error(exc, self.settings))
        except anyio.get_cancelled_exc_class():
            raise
        else:
            end(f"{self.settings.url}: the subscription ended")

    async def _start_seq(self, js: Any) -> int:
        """The stream sequence to read from: after the last one applied, or (first connection)
        after the stream's last, the bucket being read next."""
        if self._stream_seq is not None:
            return self._stream_seq + 1
        info = await js.stream_info(self.settings.stream)
        return int(info.state.last_seq) + 1

    # ------------------------------------------------------------------ snapshot, adoption

    async def _snapshot(self, kv: Any) -> None:
        """Every host in the bucket, adopted from its heartbeat and sessions."""
        beats: dict[str, Heartbeat] = {}
        sessions: dict[str, list[Activity]] = {}
        await self._read_bucket(kv, ">", beats, sessions)
        batches: dict[str, list[Change]] = {}
        for host in sorted(set(beats) | set(sessions)):
            beat = beats.get(host)
            if beat is not None and beat.identity == self._own:
                continue
            batches[host] = self._adopt(host, beat, sessions.get(host, []))
        self._handled(batches)

    async def _read_bucket(
        self, kv: Any, keys: str, beats: dict[str, Heartbeat],
        sessions: dict[str, list[Activity]],
    ) -> None:
        watcher = await kv.watch(keys, ignore_deletes=True)
        try:
            async for entry in watcher:
                if entry is None:
                    break
                self._bucket_value(entry.key, entry.value or b"", beats, sessions)
        finally:
            await watcher.stop()

    def _bucket_value(
        self, key: str, value: bytes, beats: dict[str, Heartbeat],
        sessions: dict[str, list[Activity]],
    ) -> None:
        kind, _, rest = key.partition(".")
        try:
            host = unescape_token(rest.partition(".")[0])
        except ValueError:
            self._refuse("bad_key")
            return
        if len(value) > MAX_LINE_BYTES:
            self._refuse("oversize", host)
            return
        try:
            if kind == "h":
                beat = msgspec.json.decode(value, type=Heartbeat)
                if beat.host != host:
                    raise ValueError(beat.host)
                beats[host] = beat
            elif kind == "s":
                activity = msgspec.json.decode(value, type=Activity)
                if activity.key.host is not None:
                    raise ValueError("foreign_host")
                sessions.setdefault(host, []).append(activity)
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
            self._refuse("invalid", host)

    def _adopt(
        self, host: str, beat: Heartbeat | None, sessions: Sequence[Activity],
        identity: str | None = None,
    ) -> list[Change]:
        """The host's daemon, from its heartbeat (or a message's identity), and its sessions
        as the bucket holds them."""
        follower = self.followers.get(host)
        if follower is None:
            follower = self.followers[host] = Follower(host)
        now = now_ms()
        ident = identity or (beat.identity if beat is not None else "")
        hello = Daemon(id=ident, run=(beat.run if beat is not None and beat.run else _NO_RUN),
                       seq=0, version=beat.version if beat is not None else "")
        changes = follower.hello(hello, now)
        changes += follower.snapshot(Snapshot(seq=0, activities=tuple(sessions)))
        if beat is not None and beat.identity == ident:
            self._beats[host] = _Beat(beat.at_ms, beat.interval_ms, now)
            if lapsed(beat.at_ms, beat.interval_ms, now):  # an old beat: no sign of life now
                self._beats[host].seen_ms = beat.at_ms
                changes += follower.lapse(now, _lapse_reason(beat.interval_ms))
        else:
            self._beats.pop(host, None)
            changes += follower.lapse(now, "no heartbeat from this host's daemon")
        self._beat_arrived.set()
        return changes

    async def _adopt_now(self, kv: Any, host: str, identity: str | None) -> list[Change]:
        beats: dict[str, Heartbeat] = {}
        sessions: dict[str, list[Activity]] = {}
        token = escape_token(host)
        await self._read_bucket(kv, f"h.{token}", beats, sessions)
        await self._read_bucket(kv, f"s.{token}.>", beats, sessions)
        return self._adopt(host, beats.get(host), sessions.get(host, []), identity)

    # ------------------------------------------------------------------ readers

    async def _read_stream(
        self, js: Any, start: int, send: MemoryObjectSendStream[tuple[str, Any]]
    ) -> None:
        s = self.settings
        config = api.ConsumerConfig(deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
                                    opt_start_seq=start)
        sub = await js.subscribe(f"{s.prefix}.>", stream=s.stream, ordered_consumer=True,
                                 config=config)
        async with send:
            async for msg in sub.messages:
                await send.send(("message", msg))

    async def _read_beats(
        self, kv: Any, send: MemoryObjectSendStream[tuple[str, Any]]
    ) -> None:
        watcher = await kv.watch("h.*", ignore_deletes=True)
        async with send:
            async for entry in watcher:
                if entry is not None:
                    await send.send(("beat", entry))

    async def _handle(
        self, kv: Any, receive: MemoryObjectReceiveStream[tuple[str, Any]]
    ) -> None:
        async with receive:
            async for first in receive:
                batches: dict[str, list[Change]] = {}
                for kind, item in [first, *_queued(receive)]:
                    if kind == "message":
                        host, changes = await self._message(kv, item)
                    else:
                        host, changes = await self._beat(kv, item)
                    if host is not None and changes:
                        batches.setdefault(host, []).extend(changes)
                self._handled(batches)

    async def _message(self, kv: Any, msg: Any) -> tuple[str | None, list[Change]]:
        self._messages += 1
        self._stream_seq = max(self._stream_seq or 0, int(msg.metadata.sequence.stream))
        s = self.settings
        host = host_of_subject(s.prefix, msg.subject)
        if host is None:
            self._refuse("not_paneward")
            return None, []
        identity = identity_of(str((msg.headers or {}).get("Nats-Msg-Id", "")))
        if identity is None:
            self._refuse("no_identity", host)
            return None, []
        if identity == self._own:
            self._refused["own"] = self._refused.get("own", 0) + 1
            return None, []
        changes: list[Change] = []
        follower = self.followers.get(host)
        if follower is None or follower.daemon_id != identity:
            changes += await self._adopt_now(kv, host, identity)
            follower = self.followers[host]
        data = msg.data or b""
        if len(data) > MAX_LINE_BYTES:
            follower.refuse("oversize")
            return host, changes
        frame = follower.decode(data)
        if isinstance(frame, Transition):
            k = frame.key
            if msg.subject != session_subject(s.prefix, host, k.harness, k.session_id):
                follower.refuse("subject_mismatch")
                return host, changes
            return host, changes + follower.transition(frame)
        if isinstance(frame, Gap):
            if msg.subject != gap_subject(s.prefix, host):
                follower.refuse("subject_mismatch")
                return host, changes
            return host, changes + follower.gap(frame)
        if frame is not None:
            follower.refuse("unexpected_type")
        return host, changes

    async def _beat(self, kv: Any, entry: Any) -> tuple[str | None, list[Change]]:
        self._beat_count += 1
        beats: dict[str, Heartbeat] = {}
        self._bucket_value(entry.key, entry.value or b"", beats, {})
        if not beats:
            return None, []
        host, beat = next(iter(beats.items()))
        if beat.identity == self._own:
            # this daemon's own name there (adopted before its first beat said whose it is)
            mine = self.followers.pop(host, None)
            self._beats.pop(host, None)
            if mine is None:
                return None, []
            return host, [Drop(HostKey(host, key), "Forget") for key in mine.sessions]
        follower = self.followers.get(host)
        if follower is None or follower.daemon_id != beat.identity:
            return host, await self._adopt_now(kv, host, beat.identity)
        now = now_ms()
        known = self._beats.get(host)
        if known is not None and beat.at_ms <= known.stamp:
            return host, []  # the same beat again (a watch restarted): no new sign of life
        self._beats[host] = _Beat(beat.at_ms, beat.interval_ms, now)
        self._beat_arrived.set()
        changes: list[Change] = []
        run = beat.run or _NO_RUN
        if follower.health.state != "connected" or run != follower.run:
            changes = follower.hello(
                Daemon(id=beat.identity, run=run, seq=follower.last_seq,
                       version=beat.version), now)
        return host, changes

    async def _lapses(self) -> None:
        """Each connected host whose sign of life lapsed goes stale; sleeps until the next
        deadline or the next beat."""
        while True:
            now = now_ms()
            batches: dict[str, list[Change]] = {}
            deadline: int | None = None
            for host, beat in self._beats.items():
                follower = self.followers.get(host)
                if follower is None or follower.health.state != "connected":
                    continue
                if lapsed(beat.seen_ms, beat.interval_ms, now):
                    batches[host] = follower.lapse(now, _lapse_reason(beat.interval_ms))
                else:
                    due = beat.seen_ms + STALE_AFTER_INTERVALS * beat.interval_ms + 1
                    deadline = due if deadline is None else min(deadline, due)
            if batches:
                self._handled(batches)
            arrived = self._beat_arrived = anyio.Event()
            wait = None if deadline is None else max(deadline - now_ms(), 0) / 1000
            with anyio.move_on_after(wait if wait is not None else float("inf")):
                await arrived.wait()


def _no_jump(host: str, url: str) -> str:
    return (f"{host} is followed through NATS ({url}), which carries its sessions but no route "
            f"to its terminal: run `paneward next` on {host} itself")


def _lapse_reason(interval_ms: int) -> str:
    return (f"no heartbeat for {STALE_AFTER_INTERVALS} intervals of {interval_ms / 1000:g} s "
            "(its daemon or its link to the server is down)")


def _queued(
    receive: MemoryObjectReceiveStream[tuple[str, Any]],
) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    while len(out) < _QUEUE:
        try:
            out.append(receive.receive_nowait())
        except (anyio.WouldBlock, anyio.EndOfStream):
            break
    return out

