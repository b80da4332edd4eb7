"""``paneward run``: the daemon that wires every actor together.

Order of start (dependencies first) and of shutdown (reverse):

1. take the state directory's lock (a second daemon refuses to start);
2. open the store, load the catalog and re-prove every restored session's owner
   (the same live incarnation stays ``running`` with no flicker; a dead or
   recycled owner becomes ``persisted``);
3. enter the :class:`~supervisor.Supervisor`, restore the catalog (each state re-proven by the
   reducer), subscribe the store (a ``states`` subscription: it records every transition with
   the reducer state behind it), publish the corrections;
4. start the actors: control socket, hook listener (+ http), pid watcher, pane
   mapper, Claude registry, Codex rollouts, the Codex app-server daemon's control socket,
   Hermes ledger, tmux bridge (``--tmux``), notifications (unless ``--notify none``);
5. on SIGINT/SIGTERM: stop producers, drain mailboxes, end subscriptions, flush
   the store, release the lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import msgspec

from actors.core import paths
from actors.core.notify import NotifySettings
from actors.harnesses import catalog
from actors.harnesses.claude_code.registry import ClaudeRegistryWatcher
from actors.harnesses.codex.daemon import CodexDaemonSource
from actors.harnesses.codex.rollouts import CodexRolloutDiscovery
from actors.harnesses.hermes.ledger import HermesLedgerDiscovery
from actors.sinks.store import Restored, Store, open_store
from actors.sources import procfs
from actors.sources.control_server import ControlServer
from actors.sources.hook_listener import HookListener
from actors.sources.pane_mapper import PaneMapper
from actors.sources.pid_watcher import PidWatcher
from messages.activity import Transition
from messages.errors import PanewardError
from supervisor import Supervisor

__all__ = ["DaemonAlreadyRunning", "DaemonConfig", "run_daemon"]

logger = logging.getLogger("paneward.daemon")

class DaemonAlreadyRunning(PanewardError):
    """Raised when another daemon holds the state directory's lock."""


@dataclass(frozen=True)
class DaemonConfig:
    """Where the daemon keeps its files and which sources it runs."""

    state_dir: Path = field(default_factory=lambda: Path(paths.state_dir()))
    socket_path: Path = field(default_factory=lambda: Path(paths.socket_path()))
    http_port: int | None = None
    tmux: bool = False
    tmux_socket_name: str | None = None
    tmux_socket_path: str | None = None
    discovery: bool = True
    #: Notifications when attention opens (``None``: off); ``full_text`` also applies to the
    #: tmux options (``@paneward_reason``).
    notify: NotifySettings | None = field(default_factory=NotifySettings)
    full_text: bool = False
    #: Follow the Codex app-server daemon's control socket (with ``discovery``).
    codex_daemon: bool = True
    claude_sessions: Path | None = None
    codex_home: Path | None = None
    hermes_home: Path | None = None

    @property
    def db_path(self) -> Path:
        return self.state_dir / "paneward.db"

    @property
    def control_path(self) -> Path:
        return Path(paths.control_path(str(self.socket_path)))

    @property
    def lock_path(self) -> Path:
        return self.state_dir / "daemon.lock"


@contextlib.contextmanager
def state_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` for the daemon's lifetime.

    :raises DaemonAlreadyRunning: naming the pid that holds it.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise DaemonAlreadyRunning(
                f"another paneward daemon (pid {holder}) is already running "
                f"with state directory {path.parent}"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _plain(value: object) -> object:
    """msgspec ``enc_hook``: read-only mappings (``MappingProxyType`` counters) as dicts."""
    if isinstance(value, Mapping):
        return dict(value)
    raise NotImplementedError(f"cannot encode {type(value).__name__}")


def _statistics_of(parts: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    def collect() -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, part in parts.items():
            try:
                out[name] = msgspec.to_builtins(part.statistics(), enc_hook=_plain)
            except Exception as exc:  # a broken counter must not break `status`
                out[name] = {"error": repr(exc)}
        return out

    return collect


def _probe_owners(restored: Restored) -> dict[int, str | None]:
    """Worker thread: the live start token of each distinct owner pid of a restored session
    that was not ``persisted`` (``None``: gone). An ended session's old owner is never probed."""
    pids = {s.owner_pid for s in restored.states if s.presence != "persisted"}
    return {pid: procfs.probe(pid) for pid in pids if pid is not None}


async def run_daemon(
    config: DaemonConfig,
    *,
    ready: Callable[[Supervisor], None] | None = None,
    stop: anyio.Event | None = None,
) -> None:
    """Run until SIGINT/SIGTERM (or ``stop`` is set), then shut down gracefully.

    :raises DaemonAlreadyRunning: another daemon uses ``config.state_dir``.
    :raises StoreError: the database cannot be used.
    """
    config.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    stop = stop or anyio.Event()
    with state_lock(config.lock_path):
        async with open_store(config.db_path) as store:
            restored = await store.load()
            if restored.ended_pruned:
                logger.info(
                    "forgot %d sessions that ended more than a week ago", restored.ended_pruned
                )
            tokens = await anyio.to_thread.run_sync(_probe_owners, restored)
            async with anyio.create_task_group() as outer:
                async with Supervisor() as sup:
                    sup.restore(restored.states, restored.last_seq, tokens)
                    # The store follows a states subscription from here on (it drains it at
                    # every wake-up, so it never lags the hub) until the hub closes, after
                    # the session actors drained at shutdown.
                    await outer.start(store.follow, sup)
                    sup.publish_corrections()
                    live_owners = {
                        s.owner_pid: s.owner_token
                        for s in restored.states
                        if s.owner_pid is not None and tokens.get(s.owner_pid) == s.owner_token
                    }
                    parts = _start_actors(config, sup, store, live_owners)
                    outer.start_soon(_wait_for_signal, stop)
                    listener = parts["hook_listener"]
                    control = parts["control"]
                    assert isinstance(listener, HookListener)
                    assert isinstance(control, ControlServer)
                    await listener.wait_listening()
                    await control.wait_listening()
                    logger.info(
                        "paneward daemon ready: hooks %s, control %s, db %s",
                        config.socket_path,
                        config.control_path,
                        config.db_path,
                    )
                    if ready is not None:
                        ready(sup)
                    await stop.wait()
                # the supervisor is closed: the store's subscription has ended
                outer.cancel_scope.cancel()


async def _wait_for_signal(stop: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            logger.info("received %s: shutting down", signal.Signals(signum).name)
            stop.set()
            return


def _start_actors(
    config: DaemonConfig, sup: Supervisor, store: Store, live_owners: dict[int, str | None]
) -> dict[str, Any]:
    parts: dict[str, Any] = {"supervisor": sup, "store": store}

    async def journal(since: int, until: int) -> list[Transition]:
        await store.flush()
        out: list[Transition] = []
        cursor = since
        while cursor < until:
            page = await store.journal_since(cursor, limit=1000)
            page = [t for t in page if t.seq <= until]
            if not page:
                break
            out.extend(page)
            cursor = page[-1].seq
        return out

    listener = HookListener(
        catalog.HOOKS,
        socket_path=config.socket_path,
        http_port=config.http_port,
    )
    parts["hook_listener"] = listener
    control = ControlServer(
        config.control_path, sup, _statistics_of(parts), journal, pane_note=catalog.pane_note
    )
    parts["control"] = control
    sup.start_actor(control, name="control")
    sup.start_actor(listener, name="hook-listener")

    # The pid watcher learns owners from the evidence that names them (it listens); the owners
    # of restored sessions proven alive at start are handed to it here.
    watcher = PidWatcher(initial=live_owners)
    parts["pid_watcher"] = watcher
    sup.start_listener(watcher, name="pid-watcher")

    mapper = PaneMapper(catalog.CLAIMS)
    parts["pane_mapper"] = mapper
    sup.start_listener(mapper, name="pane-mapper")

    if config.discovery:
        claude = ClaudeRegistryWatcher(config.claude_sessions)
        codex = CodexRolloutDiscovery(config.codex_home)
        hermes = HermesLedgerDiscovery(config.hermes_home)
        parts.update(claude_registry=claude, codex_rollouts=codex, hermes_ledger=hermes)
        sup.start_actor(claude, name="claude-registry")
        sup.start_actor(codex, name="codex-rollouts")
        if config.codex_daemon:
            codex_daemon = CodexDaemonSource(config.codex_home)
            parts["codex_daemon"] = codex_daemon
            sup.start_actor(codex_daemon, name="codex-daemon")
        sup.start_actor(hermes, name="hermes-ledger")
    bridge = None
    if config.tmux:
        from actors.sinks.tmux import TmuxBridge

        bridge = TmuxBridge(
            socket_name=config.tmux_socket_name,
            socket_path=config.tmux_socket_path,
            full_text=config.full_text,
        )
        parts["tmux"] = bridge
        sup.start_actor(bridge, name="tmux")
    notify = config.notify
    if notify is not None and notify.kinds and notify.channels:
        from actors.sinks.notify import DesktopNotifications, Notifier

        desktop = None
        if "desktop" in notify.channels:
            if DesktopNotifications.available():
                desktop = DesktopNotifications()
            else:
                logger.info("desktop notifications: no session bus, skipped")
        if bridge is not None or desktop is not None:
            notifier = Notifier(notify, tmux=bridge, desktop=desktop)
            parts["notify"] = notifier
            sup.start_actor(notifier, name="notify")
    return parts
