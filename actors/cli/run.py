"""``paneward run``: the daemon's options, and its start and exit codes (the wiring of every
actor is :mod:`actors.cli.daemon`, imported by :func:`run_run` itself).
"""

from __future__ import annotations

import sys

from actors.cli.common import EXIT_FAILED, EXIT_INVALID, EXIT_OK, add_socket, kinds

# Typing only (typing and argparse would cost the command's start milliseconds).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

__all__ = ["add_run", "run_run"]


def add_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state-dir", help="state directory (default $XDG_STATE_HOME/paneward)")
    add_socket(parser)
    parser.add_argument(
        "--http-port",
        type=int,
        default=None,
        help="also accept Claude Code http hooks on 127.0.0.1:PORT (token header required)",
    )
    parser.add_argument("--tmux", action="store_true", help="drive tmux per-pane badges")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-L", dest="tmux_socket_name", metavar="NAME", help="tmux socket name")
    group.add_argument("-S", dest="tmux_socket_path", metavar="PATH", help="tmux socket path")
    parser.add_argument(
        "--no-discovery",
        action="store_true",
        help="do not watch Claude/Codex/Hermes files (hooks and injected messages only)",
    )
    parser.add_argument(
        "--notify",
        metavar="KINDS",
        default="all",
        type=kinds,
        help="notify when these attention kinds open for a pane you are not looking at: "
        "needs_input,failed,turn_done (default all; none: off)",
    )
    parser.add_argument(
        "--notify-via",
        metavar="CHANNELS",
        default="tmux,osc9,desktop",
        type=_channels,
        help="where: tmux (display-message), osc9 / osc777 (outer terminal, through tmux "
        "passthrough), desktop (freedesktop notifications over D-Bus); default "
        "tmux,osc9,desktop; none: off",
    )
    parser.add_argument(
        "--notify-interval",
        metavar="SECONDS",
        type=float,
        default=30.0,
        help="at most one notification per session within this many seconds (default 30)",
    )
    parser.add_argument(
        "--full-text",
        action="store_true",
        help="show attention reasons in full in tmux options and notifications too "
        "(default: the tool and a shortened command; status and watch always show all)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    from actors.cli.daemon import add_source_arguments
    from actors.cli.nats_view import add_run_arguments

    add_source_arguments(parser)
    add_run_arguments(parser)




def _channels(text: str) -> tuple[str, ...]:
    from actors.core.views.notify import parse_channels

    try:
        return parse_channels(text)
    except ValueError as exc:
        import argparse

        raise argparse.ArgumentTypeError(str(exc)) from None


def run_run(args: argparse.Namespace) -> int:
    import logging
    import os
    from pathlib import Path

    import anyio

    from actors.cli.daemon import (
        DaemonAlreadyRunning,
        DaemonConfig,
        EssentialActorStopped,
        run_daemon,
        source_options,
    )
    from actors.cli.nats_view import settings_from_args
    from actors.core import paths
    from actors.core.fleet.nats import SettingsError
    from actors.core.views.notify import NotifySettings
    from messages.errors import PanewardError

    try:
        nats = settings_from_args(args)
    except SettingsError as exc:
        print(f"paneward run: {exc}", file=sys.stderr)
        return EXIT_INVALID
    if nats is not None:
        try:
            import nats as nats_py  # the daemon would import it at start anyway

            del nats_py
            installed = True
        except ImportError:
            installed = False
        if not installed:
            if args.nats is None and os.environ.get("NATS_URL"):
                # $NATS_URL may be meant for other NATS tools: the daemon runs, and says so.
                print("paneward run: $NATS_URL is set but nats-py is not installed "
                      "(pip install 'paneward[nats]'): not publishing", file=sys.stderr)
                nats = None
            else:
                print("paneward run: NATS needs nats-py: pip install 'paneward[nats]'",
                      file=sys.stderr)
                return EXIT_INVALID

    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    state_dir = Path(args.state_dir or paths.state_dir())
    # The socket does not move with --state-dir: agents' hooks and `paneward status` find
    # it from the environment alone ($PANEWARD_SOCKET, $XDG_RUNTIME_DIR, the state dir).
    socket_path = Path(args.socket or paths.socket_path())
    config = DaemonConfig(
        state_dir=state_dir,
        socket_path=socket_path,
        http_port=args.http_port,
        tmux=args.tmux or bool(args.tmux_socket_name or args.tmux_socket_path),
        tmux_socket_name=args.tmux_socket_name,
        tmux_socket_path=args.tmux_socket_path,
        discovery=not args.no_discovery,
        notify=NotifySettings(
            kinds=args.notify,
            channels=args.notify_via,
            min_interval_ms=max(0, int(args.notify_interval * 1000)),
            full_text=args.full_text,
        ),
        full_text=args.full_text,
        nats=nats,
        **source_options(args),
    )

    def ready(sup: object) -> None:
        print(f"paneward: listening on {config.socket_path}", file=sys.stderr, flush=True)

    try:
        anyio.run(lambda: run_daemon(config, ready=ready))
    except DaemonAlreadyRunning as exc:
        print(f"paneward run: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except EssentialActorStopped as exc:
        # Loud and non-zero, so that a service manager (systemd Restart=on-failure) restarts
        # the daemon instead of leaving one that runs but hears nothing.
        print(f"paneward run: {exc}; exiting so that the daemon is restarted", file=sys.stderr)
        return EXIT_FAILED
    except PanewardError as exc:
        print(f"paneward run: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except KeyboardInterrupt:
        pass
    return EXIT_OK
