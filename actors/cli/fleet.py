"""``paneward fleet add|remove|list|check``: the hosts this machine's daemon follows.

The hosts file and every rule about it are :mod:`actors.core.fleet.hosts`; this module reads and
writes the file and runs ``ssh``. ``check`` runs, on each host at once, the very command the
daemon follows (``paneward watch --fleet``, :func:`actors.core.fleet.hosts.watch_command`) through
the host's multiplexed connection, reads its first line -- the remote daemon's
:class:`messages.Daemon` -- and says ``ok`` with what answered, or why not
(:func:`actors.core.fleet.hosts.unreachable_reason`). Exit status: 0 when every host checked is ok,
1 otherwise, 2 for a usage error (an unknown host, a bad hosts file).

``list`` prints every entry, then every host the running daemon refuses (a host name two
entries carry, docs/fleet.md) with why.

A NATS entry (``paneward fleet add nats://HOST:PORT``, ``[[nats]]`` in the file) is checked by
connecting with its credentials and reading the paneward bucket's heartbeats: ``ok`` with how
many hosts publish there and how many of them are live, or ``unreachable`` and why
(:func:`actors.sinks.nats.describe_error`: a refused credential names the file refused).

``$PANEWARD_SSH`` names the ssh program (default ``ssh``): a wrapper that adds ``-F FILE`` is
how the tests point it at their own ssh configuration.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import stat
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from actors.core.fleet import hosts as core
from actors.core.paths import private_dir_problem, runtime_dir
from actors.core.text import printable

__all__ = ["add_fleet", "load_fleet", "run_fleet", "ssh_program", "prepare_control_dir"]

_EXIT_OK = 0
_EXIT_FAILED = 1
_EXIT_USAGE = 2
#: Bytes of a first line read at most (a Daemon line is under 200).
_FIRST_LINE_MAX = 64 * 1024


def ssh_program() -> str:
    """The ssh client to run: ``$PANEWARD_SSH``, else ``ssh``."""
    return os.environ.get("PANEWARD_SSH") or "ssh"


def load_fleet(path: str | None = None) -> core.Fleet:
    """The hosts file (an empty fleet when there is none).

    :raises FleetFileError: it cannot be read, or is not valid (the message names the file).
    """
    path = path or core.fleet_path()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return core.Fleet()
    except (OSError, UnicodeDecodeError) as exc:
        raise core.FleetFileError(f"{path}: cannot read it: {exc}") from None
    try:
        return core.parse_fleet(text)
    except core.FleetFileError as exc:
        raise core.FleetFileError(f"{path}: {exc}") from None


def _save(fleet: core.Fleet) -> str:
    path = core.fleet_path()
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    temporary = f"{path}.tmp{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as out:
        out.write(core.render_fleet(fleet))
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)  # never a half-written file for the daemon to read
    return path


def prepare_control_dir(runtime: str | None = None, *, short_base: str = "/tmp") -> str:
    """The ``ControlPath`` directory (:func:`actors.core.fleet.hosts.control_dir`), made 0700
    when missing (the runtime dir's levels too; in ``short_base``, only its own level).

    :raises FleetFileError: it exists and is a symbolic link, not a directory, another user's,
        or open to group or others (the message says which).
    """
    runtime = runtime or runtime_dir()
    directory = core.control_dir(runtime, os.getuid(), short_base=short_base)
    if directory.startswith(runtime + os.sep):
        for made in (os.path.dirname(runtime), runtime, directory):
            # each level 0700 when we make it (makedirs' mode is the last level's only)
            if made and not os.path.isdir(made):
                os.makedirs(made, mode=0o700, exist_ok=True)
    else:
        # a shared place (/tmp): only our own two levels are made, and used only as made
        own = os.path.dirname(directory)
        with contextlib.suppress(FileExistsError):
            os.mkdir(own, mode=0o700)
        _check_private(own)
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, mode=0o700)
    _check_private(directory)
    return directory


def _check_private(directory: str) -> None:
    """:raises FleetFileError: ``directory`` is a symbolic link, another user's or open to
    others."""
    st = os.lstat(directory)
    if stat.S_ISLNK(st.st_mode):
        raise core.FleetFileError(
            f"{directory} is a symbolic link: refusing to keep the ssh connections' sockets "
            "there (remove it)")
    problem = private_dir_problem(directory, st.st_uid, st.st_mode, os.getuid())
    if problem is not None:
        raise core.FleetFileError(problem)


def add_fleet(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="fleet_command", required=True, metavar="COMMAND")
    add = sub.add_parser("add", help="follow a host (an ssh destination as you type it), or "
                         "every host publishing to a NATS server (nats://HOST:PORT)")
    add.add_argument("host", help="ssh destination: an alias, host, or user@host; or a NATS "
                     "URL (nats://, tls://)")
    add.add_argument("--command", dest="remote_command", default=core.DEFAULT_COMMAND,
                     help="the paneward command on that host (default: paneward)")
    nats = add.add_argument_group("a NATS server's credentials (files, by the NATS conventions)")
    nats.add_argument("--nats-creds", metavar="FILE", help="NATS .creds file (JWT + seed)")
    nats.add_argument("--nats-nkey", metavar="FILE", help="file holding an nkey seed")
    nats.add_argument("--nats-tls-cert", metavar="FILE", help="TLS client certificate (PEM)")
    nats.add_argument("--nats-tls-key", metavar="FILE", help="its private key (PEM)")
    nats.add_argument("--nats-tls-ca", metavar="FILE", help="CA bundle for the server (PEM)")
    remove = sub.add_parser("remove", help="stop following a host")
    remove.add_argument("host")
    sub.add_parser("list", help="the hosts followed")
    check = sub.add_parser("check", help="connect to each host and say what answers, or why not")
    check.add_argument("host", nargs="*", help="the hosts to check (default: all)")


def run_fleet(args: argparse.Namespace) -> int:
    try:
        fleet = load_fleet()
        command = args.fleet_command
        if command == "add" and core.is_nats_url(args.host):
            fleet = core.add_nats(fleet, core.NatsEntry(
                args.host, creds=_file(args.nats_creds), nkey=_file(args.nats_nkey),
                tls_cert=_file(args.nats_tls_cert), tls_key=_file(args.nats_tls_key),
                tls_ca=_file(args.nats_tls_ca),
            ))
            print(f"following every host on {printable(args.host)} (in {_save(fleet)})")
            return _EXIT_OK
        if command == "add":
            host = core.Host(args.host, args.remote_command)
            fleet = core.add_host(fleet, host)
            print(f"following {printable(args.host)} (in {_save(fleet)})")
            return _EXIT_OK
        if command == "remove":
            fleet = core.remove_host(fleet, args.host)
            print(f"no longer following {printable(args.host)} (in {_save(fleet)})")
            return _EXIT_OK
        if command == "list":
            for host in fleet.hosts:
                extra = "" if host.command == core.DEFAULT_COMMAND else f"  ({host.command})"
                print(printable(host.name + extra))
            for server in fleet.nats:
                print(printable(f"{server.url}  (NATS: every host publishing there)"))
            for row in _refused_hosts(args):
                print(printable(f"{row['host']}  refused: {row['reason']}"))
            return _EXIT_OK
        entries = _chosen(fleet, args.host)
        control = prepare_control_dir() if any(isinstance(e, core.Host) for e in entries) else ""
    except core.FleetFileError as exc:
        print(f"paneward fleet: {printable(str(exc))}", file=sys.stderr)
        return _EXIT_USAGE
    if not entries:
        print("paneward fleet: no hosts (add one with `paneward fleet add HOST`)",
              file=sys.stderr)
        return _EXIT_FAILED

    def check(entry: core.Host | core.NatsEntry) -> tuple[bool, str]:
        if isinstance(entry, core.NatsEntry):
            return probe_nats(entry)
        return probe_host(entry, control, fleet.keepalive_s)

    with ThreadPoolExecutor(max_workers=min(len(entries), 16)) as pool:
        results = list(pool.map(check, entries))
    width = max(len(e.name) for e in entries)
    for entry, (ok, text) in zip(entries, results, strict=True):
        print(f"{printable(entry.name).ljust(width)}  {'ok' if ok else 'unreachable'}: "
              f"{printable(text)}")
    return _EXIT_OK if all(ok for ok, _ in results) else _EXIT_FAILED


def _refused_hosts(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The hosts the running daemon refuses (a name two links carry: docs/fleet.md, "One
    name, one host"); none when no daemon answers."""
    import json

    from actors.cli.common import status_line

    try:
        rows = json.loads(status_line(args, b"hosts"))
    except (OSError, ValueError):
        return []
    if not isinstance(rows, list):
        return []
    return [r for r in rows if isinstance(r, dict) and r.get("health") == "refused"]


def _file(path: str | None) -> str | None:
    """A credential file as given, made absolute (the daemon may start in another directory)."""
    return None if path is None else os.path.abspath(os.path.expanduser(path))


def _chosen(fleet: core.Fleet, names: list[str]) -> list[core.Host | core.NatsEntry]:
    if not names:
        return [*fleet.hosts, *fleet.nats]
    chosen: list[core.Host | core.NatsEntry] = []
    for name in names:
        entry = fleet.host(name) or fleet.server(name)
        if entry is None:
            raise core.FleetFileError(f"no host {name!r} in the fleet (see `paneward fleet list`)")
        chosen.append(entry)
    return chosen


def probe_nats(entry: core.NatsEntry) -> tuple[bool, str]:
    """Connect to a NATS entry with its credentials and read its heartbeats: ``(True, how many
    hosts publish there)`` or ``(False, why not)``. nats-py is imported here only."""
    try:
        import anyio
        import nats.errors
    except ImportError:
        return False, "a NATS entry needs nats-py: pip install 'paneward[nats]'"
    from actors.sinks.nats import connect, describe_error

    settings = entry.settings("fleet check")

    async def look() -> tuple[bool, str]:
        import time

        import msgspec
        import nats.js.errors

        from actors.core.fleet.nats import Heartbeat, host_health

        try:
            nc = await connect(settings, reconnect=False)
        except (nats.errors.Error, OSError) as exc:
            return False, describe_error(exc, settings)
        try:
            try:
                kv = await nc.jetstream(timeout=5.0).key_value(entry.bucket)
            except nats.js.errors.BucketNotFoundError:
                return False, (f"no paneward bucket {entry.bucket!r} there yet (no daemon has "
                               "published: paneward run --nats URL)")
            live = stale = 0
            watcher: Any = await kv.watch("h.*", ignore_deletes=True)
            now = time.time_ns() // 1_000_000
            async for value in watcher:
                if value is None:
                    break
                try:
                    beat = msgspec.json.decode(value.value or b"", type=Heartbeat)
                except (msgspec.DecodeError, msgspec.ValidationError):
                    continue
                if host_health(beat, now) == "live":
                    live += 1
                else:
                    stale += 1
            await watcher.stop()
            return True, f"{live + stale} hosts publish there ({live} live, {stale} stale)"
        except (nats.errors.Error, nats.js.errors.Error, OSError) as exc:
            return False, describe_error(exc, settings)
        finally:
            await nc.close()

    try:
        return anyio.run(look)
    except (OSError, nats.errors.Error) as exc:
        return False, describe_error(exc, settings)


def probe_host(host: core.Host, control: str, keepalive_s: int) -> tuple[bool, str]:
    """Run the stream's command on ``host`` and read its first line: ``(True, what answered)``
    or ``(False, why not)``. Bounded by the connect timeout plus a few seconds."""
    import messages

    argv = core.ssh_argv(host, control, core.watch_command(host, None),
                         keepalive_s=keepalive_s, ssh=ssh_program())
    deadline = time.monotonic() + core.answer_deadline_s(keepalive_s)
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
    except OSError as exc:
        return False, f"cannot run {argv[0]}: {exc}"
    assert proc.stdout is not None and proc.stderr is not None
    line = b""
    try:
        while b"\n" not in line and len(line) < _FIRST_LINE_MAX:
            left = deadline - time.monotonic()
            if left <= 0:
                return False, "no answer in time (the host or its paneward hangs)"
            ready, _, _ = select.select([proc.stdout], [], [], left)
            if not ready:
                continue
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            line += chunk
        if b"\n" in line:
            first = line.split(b"\n", 1)[0]
            try:
                frame = messages.decode_outbound(first)
            except messages.MessageError:
                frame = None
            if isinstance(frame, messages.Daemon):
                return True, (f"paneward {frame.version}, daemon {frame.id[:8]} "
                              f"(seq {frame.seq})")
            return False, (f"paneward too old there: `{host.command} watch --fleet` did not "
                           "answer with its identity (upgrade paneward on that host)")
        proc.wait(timeout=max(deadline - time.monotonic(), 1))
        stderr = proc.stderr.read(_FIRST_LINE_MAX).decode("utf-8", "replace")
        return False, core.unreachable_reason(proc.returncode, stderr, command=host.command)
    except subprocess.TimeoutExpired:
        return False, "no answer in time (the host or its paneward hangs)"
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proc.stdout.close()
        proc.stderr.close()
