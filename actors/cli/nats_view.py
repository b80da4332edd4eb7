"""NATS from the command line: the settings (``run --nats``, ``$NATS_URL``, the config file's
``[nats]`` table) and the direct readers ``paneward status --nats URL`` and
``paneward watch --nats URL``, which read the KV bucket and the stream with no daemon.

nats-py is imported inside the readers only: ``paneward run`` without NATS, ``status`` and
the hook never load it (tests/sinks/test_nats.py checks ``sys.modules``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from actors.core.fleet.nats import NatsSettings, SettingsError, resolve_settings

if TYPE_CHECKING:
    import argparse

__all__ = ["add_reader_arguments", "add_run_arguments", "config_path", "run_status_nats",
           "run_watch_nats", "settings_from_args"]

EXIT_OK, EXIT_INVALID, EXIT_NO_SERVER = 0, 1, 2


def config_path(env: Mapping[str, str]) -> str:
    """paneward's config file: ``$PANEWARD_CONFIG``, else
    ``$XDG_CONFIG_HOME/paneward/config.toml`` (``~/.config`` when unset)."""
    if env.get("PANEWARD_CONFIG"):
        return env["PANEWARD_CONFIG"]
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "paneward", "config.toml")


def _nats_table(env: Mapping[str, str]) -> dict[str, object] | None:
    """The config file's ``[nats]`` table (``None``: no file or no table).

    :raises SettingsError: the file is not valid TOML, or ``nats`` is not a table.
    """
    import tomllib

    path = config_path(env)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        return None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SettingsError(f"{path}: {exc}") from None
    table = data.get("nats")
    if table is None:
        return None
    if not isinstance(table, dict):
        raise SettingsError(f"{path}: 'nats' must be a table ([nats])")
    return table


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """``paneward run``'s NATS options (all also settable in the config file's ``[nats]``)."""
    group = parser.add_argument_group(
        "NATS (publish to JetStream; needs paneward[nats]; see docs/fleet.md)"
    )
    group.add_argument("--nats", metavar="URL", help="publish every transition to this NATS "
                       "server (also $NATS_URL, or url in [nats] of the config file)")
    group.add_argument("--nats-host", metavar="NAME", help="this host's name on the server "
                       "(default: the hostname)")
    _add_credentials(group)
    group.add_argument("--nats-tls-cert", metavar="FILE", help="TLS client certificate (PEM)")
    group.add_argument("--nats-tls-key", metavar="FILE", help="its private key (PEM)")
    group.add_argument("--nats-tls-ca", metavar="FILE", help="CA bundle for the server (PEM)")
    group.add_argument("--nats-stream", metavar="NAME", help="stream name (default PANEWARD)")
    group.add_argument("--nats-bucket", metavar="NAME", help="KV bucket (default paneward)")
    group.add_argument("--nats-max-age", metavar="SECONDS", type=float,
                       help="stream retention when it is created (default 7 days)")
    group.add_argument("--nats-max-bytes", metavar="BYTES", type=int,
                       help="stream and bucket size limit when created (default 1 GiB)")
    group.add_argument("--nats-heartbeat", metavar="SECONDS", type=float,
                       help="heartbeat interval (default 5; stale after 3 missed)")
    group.add_argument("--nats-buffer", metavar="N", type=int,
                       help="transitions kept while the server does not ack (default 10000)")


def _add_credentials(parser: Any) -> None:
    parser.add_argument("--nats-creds", metavar="FILE", help="NATS .creds file (JWT + seed)")
    parser.add_argument("--nats-nkey", metavar="FILE", help="file holding an nkey seed")


def add_reader_arguments(parser: argparse.ArgumentParser) -> None:
    """``status`` / ``watch``: read a NATS server directly instead of the local daemon."""
    parser.add_argument("--nats", metavar="URL", help="read the fleet from this NATS server "
                        "directly (no daemon needed; needs paneward[nats])")
    _add_credentials(parser)


def settings_from_args(
    args: argparse.Namespace, env: Mapping[str, str] | None = None
) -> NatsSettings | None:
    """The NATS settings of this run (``None``: NATS off).

    :raises SettingsError: see :func:`actors.core.fleet.nats.resolve_settings`, and a config file
        that cannot be read.
    """
    import socket

    env = os.environ if env is None else env
    names = ("host", "creds", "nkey", "tls_cert", "tls_key", "tls_ca", "stream", "bucket",
             "max_age", "max_bytes", "heartbeat", "buffer")
    cli: dict[str, object] = {"url": getattr(args, "nats", None)}
    cli.update({n: getattr(args, f"nats_{n}", None) for n in names})
    return resolve_settings(
        cli=cli, env=env, table=_nats_table(env), default_host=socket.gethostname()
    )


def _reader_settings(args: argparse.Namespace, prog: str) -> NatsSettings | None:
    try:
        settings = settings_from_args(args)
    except SettingsError as exc:
        print(f"paneward {prog}: {exc}", file=sys.stderr)
        return None
    assert settings is not None  # --nats was given
    return settings


def _import_nats(prog: str) -> bool:
    try:
        import nats  # noqa: F401
    except ImportError:
        print(f"paneward {prog}: --nats needs nats-py: pip install 'paneward[nats]'",
              file=sys.stderr)
        return False
    return True


def run_status_nats(args: argparse.Namespace) -> int:
    """``paneward status --nats URL``: every host's health and sessions from the KV bucket."""
    settings = _reader_settings(args, "status")
    if settings is None:
        return EXIT_INVALID
    if not _import_nats("status"):
        return EXIT_INVALID
    import anyio

    try:
        text = anyio.run(_status, settings, args)
    except _Refused as exc:
        print(f"paneward status: {exc}", file=sys.stderr)
        return EXIT_NO_SERVER
    sys.stdout.write(text)
    sys.stdout.flush()
    return EXIT_OK


class _Refused(Exception):
    """The server could not be read (the text says why)."""


async def _open(settings: NatsSettings) -> Any:
    import nats.errors

    from actors.sinks.nats import connect, describe_error

    try:
        return await connect(settings, reconnect=False)
    except (nats.errors.Error, OSError) as exc:
        raise _Refused(describe_error(exc, settings)) from None


async def _status(settings: NatsSettings, args: argparse.Namespace) -> str:
    import json
    import time

    import msgspec
    import nats.js.errors

    from actors.core.fleet.nats import Heartbeat, as_seen, host_health, host_of_subject
    from actors.core.text import json_without_c1, printable
    from actors.core.views.status_table import format_table
    from messages import Activity, encode

    nc = await _open(settings)
    try:
        js = nc.jetstream()
        try:
            kv = await js.key_value(settings.bucket)
        except nats.js.errors.BucketNotFoundError:
            raise _Refused(
                f"{settings.url}: no bucket {settings.bucket!r} (no daemon has published "
                "there: paneward run --nats URL)"
            ) from None
        beats: dict[str, Heartbeat] = {}
        sessions: dict[str, list[Activity]] = {}
        bad = 0
        watcher = await kv.watchall(ignore_deletes=True)
        async for entry in watcher:
            if entry is None:
                break
            key, value = entry.key, entry.value or b""
            try:
                if key.startswith("h."):
                    decoded = msgspec.json.decode(value, type=Heartbeat)
                    beats[decoded.host] = decoded
                elif key.startswith("s."):
                    host = host_of_subject("s", key)
                    if host is None:
                        raise ValueError(key)
                    activity = msgspec.json.decode(value, type=Activity)
                    sessions.setdefault(host, []).append(activity)
            except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
                bad += 1  # another program's key, or a damaged value: shown, not trusted
        await watcher.stop()
    finally:
        await nc.close()
    now_ms = time.time_ns() // 1_000_000
    hosts = sorted(set(beats) | set(sessions))
    health = {h: host_health(beats[h], now_ms) if h in beats else "stale" for h in hosts}
    if getattr(args, "counters", False):
        return json.dumps({
            "hosts": [{**msgspec.to_builtins(beats[h]), "health": health[h]} if h in beats
                      else {"host": h, "health": "stale", "heartbeat": None} for h in hosts],
            "unreadable_keys": bad,
        }, indent=2) + "\n"
    if getattr(args, "json", False):
        rows = []
        for h in hosts:
            for a in sessions.get(h, []):
                row = json.loads(encode(as_seen(a, health[h])))
                row["host"] = h
                rows.append(row)
        return json_without_c1(json.dumps(rows).encode()).decode() + "\n"
    out: list[str] = []
    for h in hosts:
        beat = beats.get(h)
        if beat is None:
            line = f"{printable(h)}: stale (no heartbeat)"
        elif health[h] == "stale":
            since = time.strftime("%H:%M:%SZ", time.gmtime(beat.at_ms / 1000))
            line = f"{printable(h)}: stale since {since} (last heartbeat)"
        else:
            line = f"{printable(h)}: live, seq {beat.seq}, published {beat.acked}"
        if beat is not None and (beat.buffered or beat.dropped):
            line += f", {beat.buffered} waiting for the server, {beat.dropped} dropped"
        out.append(line)
        seen = [as_seen(a, health[h]) for a in sessions.get(h, [])]
        out.append(format_table(seen, now_ms, show_all=getattr(args, "all", False)))
    if not hosts:
        out.append(f"(no hosts on {settings.url} yet)")
    if bad:
        out.append(f"({bad} keys in bucket {settings.bucket!r} are not paneward's)")
    return "\n".join(out) + "\n"


def run_watch_nats(args: argparse.Namespace) -> int:
    """``paneward watch --nats URL``: every host's transitions as they reach the stream (with
    ``--since SEQ``: from stream sequence SEQ + 1 on), each with its ``host``."""
    settings = _reader_settings(args, "watch")
    if settings is None:
        return EXIT_INVALID
    if not _import_nats("watch"):
        return EXIT_INVALID
    import anyio

    try:
        anyio.run(_watch, settings, args)
    except _Refused as exc:
        print(f"paneward watch: {exc}", file=sys.stderr)
        return EXIT_NO_SERVER
    except (KeyboardInterrupt, BrokenPipeError):
        return EXIT_OK
    return EXIT_OK


async def _watch(settings: NatsSettings, args: argparse.Namespace) -> None:
    import json

    import msgspec
    import nats.js.errors
    from nats.js import api

    from actors.cli.watch import summary_line
    from actors.core.fleet.nats import host_of_subject
    from actors.core.text import json_without_c1, printable
    from messages import Gap, MessageError, Transition, decode_outbound, encode

    nc = await _open(settings)
    try:
        js = nc.jetstream()
        since = getattr(args, "since", None)
        config = api.ConsumerConfig(
            deliver_policy=api.DeliverPolicy.NEW if since is None
            else api.DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=None if since is None else since + 1,
        )
        try:
            sub = await js.subscribe(
                f"{settings.prefix}.>", stream=settings.stream, ordered_consumer=True,
                config=config,
            )
        except nats.js.errors.NotFoundError:
            raise _Refused(f"{settings.url}: no stream {settings.stream!r}") from None
        out = sys.stdout.buffer
        as_json = getattr(args, "json", False)
        unflushed = 0
        async for msg in sub.messages:
            host = host_of_subject(settings.prefix, msg.subject)
            try:
                item = decode_outbound(msg.data)
            except (MessageError, msgspec.DecodeError):
                continue  # not paneward's: the subject space is shared
            if host is None or not isinstance(item, Transition | Gap):
                continue
            seq = msg.metadata.sequence.stream
            if as_json:
                # The validated item in the one codec's form (never the wire bytes as they
                # came), with host and stream_seq first.
                body = encode(item)
                line = (b'{"host":' + json.dumps(host).encode() + b',"stream_seq":'
                        + str(seq).encode() + b"," + body[1:])
                out.write(json_without_c1(line) + b"\n")
            else:
                row = json.loads(encode(item))
                row["host"], row["stream_seq"] = host, seq
                out.write(f"{printable(host)} {summary_line(row)}\n".encode())
            unflushed += 1
            # One flush per burst read, not per line: a reader far behind catches up fast.
            if msg.metadata.num_pending == 0 or unflushed >= 256:
                out.flush()
                unflushed = 0
    finally:
        await nc.close()
