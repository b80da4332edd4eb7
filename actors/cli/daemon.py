"""``paneward run``: the daemon that wires every actor together.

Order of start (dependencies first) and of shutdown (reverse):

0. raise the soft file-descriptor limit to the hard one; handle SIGINT/SIGTERM from here on
   (a signal during start-up ends it too);
1. open the state directory and the socket (runtime) directory without following links and
   check them (ours, no group/other access: :func:`actors.sources.files.open_private_dir`),
   then take each one's ``daemon.lock``: one daemon per state directory AND per runtime
   directory -- a second one exits 1 with the reason and touches nothing of the first;
2. open the store, load the catalog and re-prove every restored session's owner
   (the same live incarnation stays ``running`` with no flicker; a dead or
   recycled owner becomes ``persisted``);
3. enter the :class:`~supervisor.Supervisor`, restore the catalog (each state re-proven by the
   reducer), subscribe the store (a ``states`` subscription: it records every transition with
   the reducer state behind it), publish the corrections;
4. start the actors: control socket and hook listener (+ http) -- both *essential* --, pid
   watcher, pane mapper, every harness's discovery actors (its spec's ``discovery``, in catalog
   order: the Claude registry, Codex rollouts, the Codex app-server daemon's control socket,
   the Hermes ledger), tmux bridge (``--tmux``), notifications (unless ``--notify none``);
5. on SIGINT/SIGTERM: stop producers, drain mailboxes, end subscriptions, flush the store,
   release the locks. A second signal, or a shutdown still running after
   :data:`SHUTDOWN_DEADLINE_S` (a worker thread stuck in a system call), ends the process at
   once (exit 1).

Escalation: an essential actor that exhausts its restart intensity (more than 3 crashes in
10 s) makes the daemon shut down the same way and exit with :data:`EXIT_FAILED` and a message
naming it, so that a service manager restarts the whole daemon, rather than a process that
looks alive while nobody hears its hooks (docs/reliability.md explains the choice).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import gc
import logging
import os
import resource
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import anyio
import msgspec

from actors.core import paths
from actors.core.fleet.nats import NatsSettings
from actors.core.ingress.limits import raised_fd_limit
from actors.core.session.harness import DiscoveryActor
from actors.core.views.notify import NotifySettings
from actors.harnesses import catalog
from actors.sinks.store import Restored, Store, open_store
from actors.sources import procfs
from actors.sources.control_server import ControlServer
from actors.sources.files import open_private_dir, prepare_socket
from actors.sources.hook_listener import HookListener
from actors.sources.pane_mapper import PaneMapper
from actors.sources.pid_watcher import PidWatcher
from messages.activity import Gap, Transition
from messages.errors import PanewardError
from supervisor import EssentialActorStopped, Supervisor

__all__ = [
    "EXIT_FAILED",
    "SHUTDOWN_DEADLINE_S",
    "DaemonAlreadyRunning",
    "DaemonConfig",
    "EssentialActorStopped",
    "add_source_arguments",
    "osc_harnesses",
    "raise_fd_limit",
    "run_daemon",
    "source_options",
    "start_discovery",
]

logger = logging.getLogger("paneward.daemon")

#: Exit status of ``paneward run`` when an essential actor stopped (docs/cli.md).
EXIT_FAILED: Final = 3
#: After SIGINT/SIGTERM, the process exits by then whatever still runs.
SHUTDOWN_DEADLINE_S: Final = 10.0
_LOCK_NAME: Final = "daemon.lock"


class DaemonAlreadyRunning(PanewardError):
    """Raised when another daemon holds the state directory's or the runtime directory's
    lock."""


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
    #: Discovery actors not started, by name (a spec's ``Discovery.name``, e.g.
    #: ``codex_daemon``: the Codex app-server daemon's control socket is not followed).
    discovery_off: frozenset[str] = frozenset()
    #: A harness's own directory, by harness id, for its discovery actors (absent: the one its
    #: environment names, e.g. ``$CODEX_HOME`` or ``~/.codex``).
    homes: Mapping[str, Path] = field(default_factory=dict)
    #: Publish every transition to NATS JetStream (``None``: off; docs/fleet.md).
    nats: NatsSettings | None = None
    #: Read OSC 7501 records from the panes' output (with ``tmux``: actors/sinks/tmux_output.py;
    #: off with ``--no-tmux-output``).
    tmux_output: bool = True

    @property
    def db_path(self) -> Path:
        return self.state_dir / "paneward.db"

    @property
    def control_path(self) -> Path:
        return Path(paths.control_path(str(self.socket_path)))

    @property
    def lock_path(self) -> Path:
        return self.state_dir / _LOCK_NAME

    @property
    def runtime_dir(self) -> Path:
        """Where the sockets live (the hook socket's directory)."""
        return self.socket_path.parent


_ID_NAME: Final = "daemon-id"


def daemon_identity(state_dir: Path) -> tuple[str, str, str]:
    """``(id, run, version)`` of this daemon for a fleet watch's ``Daemon`` line
    (:class:`messages.Daemon`): ``id`` is read from ``<state>/daemon-id``, written once with a
    random id when missing or unreadable as one (a new seq space: followers start over);
    ``run`` is new for this process."""
    import secrets
    from importlib.metadata import PackageNotFoundError, version

    path = state_dir / _ID_NAME
    ident = ""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            ident = os.read(fd, 64).decode("ascii", "replace").strip()
        finally:
            os.close(fd)
    if len(ident) != 32 or any(c not in "0123456789abcdef" for c in ident):
        ident = secrets.token_hex(16)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, ident.encode() + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
    try:
        text = version("paneward")
    except PackageNotFoundError:
        text = "unknown"
    return ident, secrets.token_hex(16), text[:64]


def raise_fd_limit() -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit (bounded); return the soft limit in
    force. Every listener sizes its connection cap from it (:mod:`actors.core.ingress.limits`)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = raised_fd_limit(soft, hard, resource.RLIM_INFINITY)
    if wanted != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (ValueError, OSError) as exc:  # e.g. above fs.nr_open: keep what we have
            logger.warning("cannot raise the file-descriptor limit to %d: %s", wanted, exc)
            return soft
        return wanted
    return soft


def _take_lock(dir_fd: int, directory: Path, what: str) -> int:
    """Lock ``daemon.lock`` in the directory ``dir_fd`` (opened without following links).

    :raises DaemonAlreadyRunning: naming the pid that holds it.
    """
    fd = os.open(
        _LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd
    )
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise DaemonAlreadyRunning(
                f"another paneward daemon (pid {holder}) is already running "
                f"with {what} {directory}"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def daemon_locks(
    state_dir: Path, runtime_dir: Path, sockets: tuple[str, ...] = ()
) -> Iterator[None]:
    """Check both directories and hold their locks for the daemon's lifetime (one lock when
    they are the same directory); then check that each of ``sockets`` (names in the runtime
    directory) is free or a stale socket, so a file in a socket's place stops the start-up
    here, with the reason, instead of failing the listener later.

    :raises UnsafePath: a directory is a link, another user's, or open to group/others; or
        something that is not a socket sits where a socket goes.
    :raises DaemonAlreadyRunning: another daemon holds either lock (nothing of it is touched:
        the lock file is only opened, and the second daemon stops here).
    """
    held: list[int] = []
    try:
        state_fd = open_private_dir(os.fspath(state_dir))
        held.append(state_fd)
        held.append(_take_lock(state_fd, state_dir, "state directory"))
        runtime_fd = open_private_dir(os.fspath(runtime_dir))
        held.append(runtime_fd)
        a, b = os.fstat(state_fd), os.fstat(runtime_fd)
        if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino):
            held.append(_take_lock(runtime_fd, runtime_dir, "runtime directory (sockets)"))
        for name in sockets:
            prepare_socket(runtime_fd, name, os.fspath(runtime_dir / name))
        yield
    finally:
        for fd in reversed(held):
            os.close(fd)  # closing a lock file releases its lock


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

    :raises DaemonAlreadyRunning: another daemon uses ``config.state_dir`` or the runtime dir.
    :raises UnsafePath: the state or runtime directory may not be used (the text says why).
    :raises StoreError: the database cannot be used.
    :raises EssentialActorStopped: the hook listener or the control server stopped after too
        many crashes (after a graceful shutdown: the store is flushed).
    """
    stop = stop or anyio.Event()
    raise_fd_limit()
    error: PanewardError | None = None
    sockets = (config.socket_path.name, config.control_path.name)
    with daemon_locks(config.state_dir, config.runtime_dir, sockets):
        async with anyio.create_task_group() as signals:
            signals.start_soon(_wait_for_signal, stop)
            try:
                await _serve(config, ready, stop)
            except PanewardError as exc:
                error = exc  # raised below, outside the task group (not in an ExceptionGroup)
            finally:
                signals.cancel_scope.cancel()
    if error is not None:
        raise error


async def _serve(
    config: DaemonConfig, ready: Callable[[Supervisor], None] | None, stop: anyio.Event
) -> None:
    """Start, serve until ``stop``, shut down. A ``stop`` during start-up (a store on a slow
    disk, a listener that cannot start) ends the start-up at once; once started, shutdown is
    the graceful path.

    :raises PanewardError: the store cannot be used, or an essential actor stopped.
    """
    starting = anyio.Event()  # set once both sockets listen
    result: list[EssentialActorStopped | None] = []
    error: PanewardError | None = None
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as guard:

            async def end_start_up_on_stop() -> None:
                await stop.wait()
                if not starting.is_set():
                    scope.cancel()

            guard.start_soon(end_start_up_on_stop)
            try:
                result.append(await _run(config, ready, stop, starting))
            except PanewardError as exc:
                error = exc  # raised below, outside the task group
            finally:
                guard.cancel_scope.cancel()
    if error is not None:
        raise error
    if result and result[0] is not None:
        raise result[0]


async def _run(
    config: DaemonConfig,
    ready: Callable[[Supervisor], None] | None,
    stop: anyio.Event,
    started: anyio.Event,
) -> EssentialActorStopped | None:
    """The store, the supervisor and its actors until ``stop`` or an essential actor's stop
    (returned). ``started`` is set once both sockets listen."""
    async with open_store(config.db_path) as store:
        restored = await store.load()
        if restored.ended_pruned:
            logger.info("forgot %d sessions that ended more than a week ago", restored.ended_pruned)
        tokens = await anyio.to_thread.run_sync(_probe_owners, restored)
        async with anyio.create_task_group() as outer:
            async with Supervisor() as sup:
                sup.restore(restored.states, restored.last_seq, tokens)
                # The store follows a states subscription from here on (it drains it at every
                # wake-up, so it never lags the hub) until the hub closes, after the session
                # actors drained at shutdown.
                await outer.start(store.follow, sup)
                sup.publish_corrections()
                live_owners = {
                    s.owner_pid: s.owner_token
                    for s in restored.states
                    if s.owner_pid is not None and tokens.get(s.owner_pid) == s.owner_token
                }
                identity = await anyio.to_thread.run_sync(daemon_identity, config.state_dir)
                parts = _start_actors(config, sup, store, live_owners, identity)
                listener = parts["hook_listener"]
                control = parts["control"]
                assert isinstance(listener, HookListener)
                assert isinstance(control, ControlServer)

                async def listening() -> None:
                    await listener.wait_listening()
                    await control.wait_listening()

                if await _first_of(listening, sup.wait_failed) == 0:
                    started.set()
                    logger.info(
                        "paneward daemon ready: hooks %s, control %s, db %s",
                        config.socket_path,
                        config.control_path,
                        config.db_path,
                    )
                    # What start-up built (modules, classes, the catalog) lives as long as the
                    # daemon: moved out of the collector's generations, a full collection no
                    # longer walks it (at 200 sessions changing once a second: 38 % of a core
                    # instead of 44 %, bench/bench_changes.py).
                    gc.collect()
                    gc.freeze()
                    if ready is not None:
                        ready(sup)
                    await _first_of(stop.wait, sup.wait_failed)
                started.set()
                failure = sup.failure
                if failure is not None:
                    logger.error("%s: shutting down", failure)
            # the supervisor is closed: the store's subscription has ended
            outer.cancel_scope.cancel()
    return failure


async def _first_of(*waits: Callable[[], Any]) -> int:
    """Wait for the first of ``waits`` to return; its index (the others are cancelled)."""
    first: list[int] = []

    async with anyio.create_task_group() as tg:

        async def one(index: int, wait: Callable[[], Any]) -> None:
            await wait()
            if not first:
                first.append(index)
            tg.cancel_scope.cancel()

        for index, wait in enumerate(waits):
            tg.start_soon(one, index, wait)
    return first[0]


def _force_exit(why: str) -> None:
    """End the process now, whatever is still running (a stuck worker thread)."""
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"paneward run: {why}; exiting now\n")
        sys.stderr.flush()
    os._exit(1)


async def _wait_for_signal(stop: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            name = signal.Signals(signum).name
            if stop.is_set():
                _force_exit(f"second {name}")
            logger.info("received %s: shutting down", name)
            stop.set()
            # Graceful shutdown is bounded: a thread stuck in a system call must not keep the
            # process alive (threads cannot be cancelled; the timer thread is a daemon).
            timer = threading.Timer(
                SHUTDOWN_DEADLINE_S,
                _force_exit,
                (f"shutdown still running {SHUTDOWN_DEADLINE_S:g} s after {name}",),
            )
            timer.daemon = True
            timer.start()


def osc_harnesses() -> frozenset[str]:
    """The harnesses that prove something from tmux's pane output (a ``tmux_output`` proof in
    their spec): the panes showing one of their live sessions have their output read."""
    return frozenset(
        spec.id
        for spec in catalog.SPECS.values()
        if any("tmux_output" in proof.sources for proof in spec.proofs)
    )


def add_source_arguments(parser: Any) -> None:
    """``paneward run``'s switches that turn one evidence source off (docs/cli.md)."""
    parser.add_argument(
        "--no-tmux-output",
        action="store_true",
        help="with --tmux: do not read OSC 7501 program status from agent panes' output",
    )
    # Accepted and without effect: reading the output is the default.
    parser.add_argument("--tmux-output", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--no-codex-daemon",
        action="store_true",
        help="do not follow the Codex app-server daemon's control socket",
    )


def source_options(args: Any) -> dict[str, Any]:
    """The :class:`DaemonConfig` fields :func:`add_source_arguments`' switches set."""
    return {
        "tmux_output": not args.no_tmux_output,
        "discovery_off": frozenset({"codex_daemon"} if args.no_codex_daemon else ()),
    }


def start_discovery(config: DaemonConfig, sup: Supervisor) -> dict[str, DiscoveryActor]:
    """Start every harness's discovery actors under ``sup`` (the catalog's specs in order, each
    spec's ``discovery`` in order; none named in ``config.discovery_off``), each built for its
    harness's home in ``config.homes``. Returns them by name (their ``status --counters`` key).
    """
    started: dict[str, DiscoveryActor] = {}
    for spec in catalog.SPECS.values():
        for discovery in spec.discovery:
            if discovery.name in config.discovery_off:
                continue
            actor = discovery.start(config.homes.get(spec.id))
            started[discovery.name] = actor
            sup.start_actor(actor, name=discovery.name.replace("_", "-"))
    return started


def _start_fleet(sup: Supervisor, parts: dict[str, Any], identity: str) -> Any:
    """The merged view and its links, one per entry of the hosts file (SSH hosts, NATS
    servers), and the watch that re-reads the file when it changes
    (:mod:`actors.sources.fleet_file`). A hosts file that cannot be used is logged, and the
    daemon follows no host until it is fixed. ``identity`` is this daemon's: a NATS server it
    also publishes to never shows it as a remote host."""
    from actors.cli.fleet import load_fleet, prepare_control_dir, ssh_program
    from actors.core.clock import now_ms
    from actors.core.fleet.hosts import Fleet, FleetFileError, fleet_path
    from actors.core.fleet.transport import Link
    from actors.sources import fswatch
    from actors.sources.fleet import FleetView
    from actors.sources.fleet_file import FleetFile, read_text

    view = FleetView()

    def links_for(hosts: Fleet) -> list[Link]:
        links: list[Link] = []
        if hosts.hosts:
            from actors.sources.fleet_link import SshLink

            control_dir = prepare_control_dir()
            links += [SshLink(host, control_dir, view.deliver_for(host.name),
                              keepalive_s=hosts.keepalive_s, ssh=ssh_program())
                      for host in hosts.hosts]
        if hosts.nats:
            try:
                # nats-py is imported here only: a fleet without a NATS entry never loads it.
                from actors.sources.nats_link import NatsLink
            except ImportError:
                raise FleetFileError(
                    "a [[nats]] entry needs nats-py: pip install 'paneward[nats]'"
                ) from None
            links += [NatsLink(entry, view.deliver_for(entry.url), own=identity)
                      for entry in hosts.nats]
        return links

    path = fleet_path()
    applied: str | None = None
    try:
        text = read_text(path)
        view.use(links_for(load_fleet(path)))
        applied = text
    except (OSError, FleetFileError) as exc:
        logger.error("fleet: %s; following no host until it is fixed", exc)
        view.file_refused(str(exc), now_ms(), kept=False)
    parts["fleet"] = view
    sup.start_actor(view, name="fleet")
    if fswatch.AVAILABLE:
        watch = FleetFile(path, view, load_fleet, links_for, applied=applied)
        parts["fleet_file"] = watch
        sup.start_actor(watch, name="fleet-file")
    return view


def _start_actors(
    config: DaemonConfig, sup: Supervisor, store: Store, live_owners: dict[int, str | None],
    identity: tuple[str, str, str],
) -> dict[str, Any]:
    parts: dict[str, Any] = {"supervisor": sup, "store": store}

    async def journal(since: int, until: int) -> list[Transition | Gap]:
        await store.flush()
        out: list[Transition | Gap] = []
        cursor = since
        while cursor < until:
            page = await store.journal_since(cursor, limit=1000)
            page = [t for t in page if t.seq <= until]
            if not page:
                break
            out.extend(page)
            cursor = page[-1].seq
        # Where the journal has holes (dropped rows, retention), say so in seq order.
        out.extend(await store.gaps_between(since, until))
        out.sort(key=lambda item: item.seq if isinstance(item, Transition) else item.next_seq)
        return out

    listener = HookListener(
        catalog.HOOKS,
        socket_path=config.socket_path,
        http_port=config.http_port,
        # Intake waits while the store is a batch behind (counting what is still queued in
        # session mailboxes, which may publish): what a kill -9 loses stays bounded.
        gate=store.backpressure(lambda: sup.seq + sup.queued),
    )
    parts["hook_listener"] = listener
    fleet_view = _start_fleet(sup, parts, identity[0])
    control = ControlServer(
        config.control_path, sup, _statistics_of(parts), journal, pane_note=catalog.pane_note,
        reserved=store.wait_reserved,
        seq_before=store.seq_before,
        identity=identity,
        remote=fleet_view,
    )
    parts["control"] = control
    # Essential: without them the daemon is deaf (hooks) or mute (status, watch); one that
    # stops after repeated crashes ends the daemon loudly (see the module docstring).
    sup.start_actor(control, name="control", essential=True)
    sup.start_actor(listener, name="hook-listener", essential=True)

    # The pid watcher learns owners from the evidence that names them (it listens); the owners
    # of restored sessions proven alive at start are handed to it here.
    watcher = PidWatcher(initial=live_owners)
    parts["pid_watcher"] = watcher
    sup.start_listener(watcher, name="pid-watcher")

    mapper = PaneMapper(catalog.BINDERS)
    parts["pane_mapper"] = mapper
    sup.start_listener(mapper, name="pane-mapper")

    if config.discovery:
        parts.update(start_discovery(config, sup))
    bridge = None
    if config.tmux:
        from actors.sinks.tmux import TmuxBridge

        bridge = TmuxBridge(
            socket_name=config.tmux_socket_name,
            socket_path=config.tmux_socket_path,
            full_text=config.full_text,
            owner=str(config.state_dir),
            remote=fleet_view,
            osc_harnesses=osc_harnesses() if config.tmux_output else frozenset(),
        )
        parts["tmux"] = bridge
        sup.start_actor(bridge, name="tmux")
    if config.nats is not None:
        # nats-py is imported here only: a daemon without NATS never loads it.
        from actors.sinks.nats import NatsPublisher

        # The identity a fleet watch names: one seq space, one id, whichever way it is read.
        publisher = NatsPublisher(config.nats, identity, journal=journal)
        parts["nats"] = publisher
        sup.start_actor(publisher, name="nats")
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
