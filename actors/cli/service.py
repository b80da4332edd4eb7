"""``paneward install-service``: the daemon as a systemd user service (or a tmux autostart line).

Writes ``~/.config/systemd/user/paneward.service`` (``$XDG_CONFIG_HOME`` honoured), which runs
this paneward's ``run --tmux`` with ``Restart=on-failure``, and prints the ``systemctl --user``
line that starts it now and at every login; it runs that line only with ``--enable`` (and only
if ``systemctl`` is there). ``--uninstall`` removes exactly that file (refusing a unit paneward
did not write) and its ``default.target.wants`` link; ``--disable`` first runs
``systemctl --user disable --now``. The unit's text and the tmux line are decided in
:mod:`actors.core.install.service`.

Registered in :data:`actors.cli.main.COMMANDS`. Exit codes: 0 done, 1 refused (a unit that is
not ours, ``--enable`` without ``systemctl``, a ``systemctl`` that failed: said on stderr), 2
usage.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

__all__ = ["add_arguments", "run"]

EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--uninstall", action="store_true", help="remove the unit paneward wrote")
    parser.add_argument(
        "--enable",
        action="store_true",
        help="also run `systemctl --user daemon-reload` and `systemctl --user enable --now "
        "paneward.service` (only if systemctl exists)",
    )
    parser.add_argument(
        "--disable",
        action="store_true",
        help="with --uninstall: run `systemctl --user disable --now paneward.service` first",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the unit, write nothing")
    parser.add_argument(
        "--no-tmux", action="store_true", help="the unit runs `paneward run` without --tmux"
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-L", dest="tmux_socket_name", metavar="NAME",
                       help="the tmux server's socket name (default: the default server)")
    group.add_argument("-S", dest="tmux_socket_path", metavar="PATH",
                       help="the tmux server's socket path")


def _program() -> list[str]:
    """This paneward, as a service manager or tmux must run it (full paths: neither has the
    venv on its ``$PATH``)."""
    import os

    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if os.path.basename(script) == "paneward" and os.access(script, os.X_OK):
        return [script]
    return [os.path.abspath(sys.executable), "-m", "actors.cli.main"]


def _systemctl(commands: list[list[str]]) -> str | None:
    """Run each command; why one failed, or None."""
    import subprocess

    for argv in commands:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{' '.join(argv)}: {exc}"
        if done.returncode != 0:
            said = done.stderr.strip() or f"exit {done.returncode}"
            return f"{' '.join(argv)}: {said}"
    return None


def run(args: argparse.Namespace) -> int:
    import os
    import shlex
    import shutil
    from pathlib import Path

    from actors.core.install import service
    from actors.core.text import printable

    if args.disable and not args.uninstall:
        print("paneward install-service: --disable goes with --uninstall", file=sys.stderr)
        return EXIT_USAGE
    if args.enable and args.uninstall:
        print("paneward install-service: --enable installs; use --uninstall --disable",
              file=sys.stderr)
        return EXIT_USAGE
    path = Path(service.unit_path(os.environ, os.path.expanduser("~")))
    shown = printable(os.fspath(path))
    try:
        existing: str | None = path.read_text()
    except FileNotFoundError:
        existing = None
    except (OSError, UnicodeDecodeError) as exc:
        print(f"paneward install-service: cannot read {shown}: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    if existing is not None and not service.is_paneward_unit(existing):
        print(f"paneward install-service: {shown} was not written by paneward: left as it is "
              "(remove or edit it yourself)", file=sys.stderr)
        return EXIT_REFUSED
    systemctl = shutil.which("systemctl")
    if (args.enable or args.disable) and systemctl is None:
        line = service.tmux_autostart_line(shlex.join(_program()))
        print("paneward install-service: systemctl not found, nothing done; without systemd, "
              f"start the daemon with tmux: add to ~/.tmux.conf\n  {line}", file=sys.stderr)
        return EXIT_REFUSED

    if args.uninstall:
        if existing is None:
            print(f"no unit at {shown}: nothing to remove")
            return EXIT_OK
        if args.dry_run:
            print(f"would remove {shown}")
            return EXIT_OK
        if args.disable:
            problem = _systemctl(service.systemctl_commands(uninstall=True))
            if problem is not None:
                print(f"paneward install-service: {printable(problem)}", file=sys.stderr)
                return EXIT_REFUSED
        wants = path.parent / "default.target.wants" / service.UNIT_NAME
        if wants.is_symlink() and os.readlink(wants) in (os.fspath(path), f"../{path.name}"):
            wants.unlink()  # the link `systemctl enable` made to it: it would dangle
        path.unlink()
        print(f"removed {shown}")
        if not args.disable:
            print("if it runs, stop it: systemctl --user stop paneward.service && "
                  "systemctl --user daemon-reload")
        return EXIT_OK

    argv = [*_program(), "run"]
    if not args.no_tmux:
        argv.append("--tmux")
        if args.tmux_socket_name:
            argv += ["-L", args.tmux_socket_name]
        elif args.tmux_socket_path:
            argv += ["-S", args.tmux_socket_path]
    try:
        from actors.harnesses.catalog import home_env

        text = service.unit_text(argv, os.environ, (*service.PASSED_ENV, *home_env()))
    except ValueError as exc:
        print(f"paneward install-service: {printable(str(exc))}", file=sys.stderr)
        return EXIT_REFUSED
    if args.dry_run:
        sys.stdout.write(text)
        return EXIT_OK
    if existing == text:
        print(f"{shown} is up to date")
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(text)
        os.replace(temporary, path)
        print(f"wrote {shown}")
    commands = service.systemctl_commands()
    print("start it now and at every login:\n  " + " && ".join(shlex.join(c) for c in commands))
    print("or, without systemd, start it with tmux: add to ~/.tmux.conf\n  "
          + service.tmux_autostart_line(shlex.join(_program())))
    if args.enable:
        problem = _systemctl(commands)
        if problem is not None:
            print(f"paneward install-service: {printable(problem)}", file=sys.stderr)
            return EXIT_REFUSED
        print("enabled and started paneward.service")
    return EXIT_OK
