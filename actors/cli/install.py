"""``paneward install-hooks``: merge paneward's hooks into a harness's own configuration.

This module is the I/O shell; what each harness's files look like and how they are edited is
its package's fact (``actors/harnesses/<name>/install.py``: Claude Code ``settings.json``,
Codex ``config.toml`` ``notify`` + ``hooks.json``, Cursor ``hooks.json``, Hermes
``config.yaml``, Gemini CLI ``settings.json``, the OpenCode plugin, the Pi extension), built
on the pure helpers of :mod:`actors.core.config_edit`. Each declares one
:class:`~actors.core.config_edit.Installer`; :data:`INSTALLERS` maps the harness ids (the
command's choices) to them.

Guarantees, for every harness: every other key, hook and comment is kept; entries are
recognised as paneward's by their command (``…paneward hook --harness …``, with or without the
``--owner`` rule older releases did not write) or, for http hooks, by the token header, and a
stale one is rewritten in place (Codex trusts hooks by position and content); a second run
changes nothing and writes nothing; before any write the previous file is copied to
``<file>.paneward-backup-<UTC time>`` (``….absent`` when there was no file); writes are atomic
(temp file + rename) onto the symlink's target, keeping the file mode. ``--uninstall`` removes
exactly paneward's entries; when the result means the same as the newest paneward-free backup,
that backup's bytes are restored (byte-for-byte, including formatting), and a file paneward
created is deleted again. A file that does not parse is never touched: the command says why.
Only regular files are read or written: a FIFO, device or socket in a config file's place is
refused (opened non-blocking, checked with ``fstat``, so a FIFO cannot hang the command), and
every bad path -- a symbolic-link loop, a read-only or missing directory, a permission -- is one
line on stderr and exit status 1, never a traceback.

With ``--http`` (Claude Code) the token is created 0600 in
:func:`actors.core.paths.http_token_path` on first use and reused afterwards.
"""

from __future__ import annotations

import difflib
import os
import secrets
import shutil
import stat
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from actors.core import paths
from actors.core.config_edit import HookTarget, Installer, InstallError
from actors.harnesses.claude_code import install as claude_install
from actors.harnesses.codex import install as codex_install
from actors.harnesses.cursor import install as cursor_install
from actors.harnesses.gemini import install as gemini_install
from actors.harnesses.hermes import install as hermes_install
from actors.harnesses.opencode import install as opencode_install
from actors.harnesses.pi import install as pi_install

if TYPE_CHECKING:
    import argparse

__all__ = [
    "BACKUP_INFIX",
    "DEFAULT_HTTP_PORT",
    "INSTALLERS",
    "FileChange",
    "Plan",
    "add_arguments",
    "apply_plan",
    "default_config_dir",
    "default_executable",
    "ensure_http_token",
    "plan",
    "run",
]

#: Every harness ``install-hooks`` knows, by id (the command's choices, in this order).
INSTALLERS: Final[Mapping[str, Installer]] = {
    installer.harness: installer
    for installer in (
        claude_install.INSTALLER,
        codex_install.INSTALLER,
        cursor_install.INSTALLER,
        hermes_install.INSTALLER,
        gemini_install.INSTALLER,
        opencode_install.INSTALLER,
        pi_install.INSTALLER,
    )
}
DEFAULT_HTTP_PORT: Final = 47501
BACKUP_INFIX: Final = ".paneward-backup-"


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file to rewrite: ``after`` ``None`` deletes it (a file paneward had created)."""

    path: Path
    before: str | None
    after: str | None
    note: str
    private: bool = False  # holds the http token: create it 0600


@dataclass(frozen=True, slots=True)
class Plan:
    """What :func:`plan` found: the changes for :func:`apply_plan`, the notes to print."""

    changes: tuple[FileChange, ...]
    notes: tuple[str, ...]


def _read(path: Path) -> str | None:
    """A config file's text, ``None`` if it does not exist.

    :raises InstallError: not a regular file (never blocks on a FIFO: opened ``O_NONBLOCK``),
        unreadable, or not UTF-8.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InstallError(f"cannot read {path}: {_why(exc)}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InstallError(f"{path} is not a regular file; refusing to read or replace it")
        chunks: list[bytes] = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks).decode("utf-8")
    except OSError as exc:
        raise InstallError(f"cannot read {path}: {_why(exc)}") from None
    except UnicodeDecodeError as exc:
        raise InstallError(f"cannot read {path}: not UTF-8 ({exc.reason})") from None
    finally:
        os.close(fd)


def _why(exc: OSError) -> str:
    """An OSError in a few words (``strerror``, e.g. "Too many levels of symbolic links")."""
    return exc.strerror or str(exc)


def _backups(path: Path) -> list[Path]:
    pattern = path.name + BACKUP_INFIX + "*"
    return sorted(path.parent.glob(pattern), reverse=True)


def _restore_original(
    path: Path,
    after: str | None,
    same: Callable[[str, str | None], bool],
    has_ours: Callable[[str], bool],
) -> tuple[str | None, bool]:
    """After an uninstall, prefer the newest paneward-free backup meaning the same thing.

    Returns ``(text, delete)``: the text to write (the backup's exact bytes when one matches),
    or ``delete`` True when the newest matching backup records that there was no file.
    """
    if after is None:
        return None, False
    for backup in _backups(path):
        if backup.name.endswith(".absent"):
            if same(after, None):
                return None, True
            continue
        content = _read(backup)
        if content is None or has_ours(content):
            continue
        if same(after, content):
            return content, False
    return after, False


def plan(
    harness: str,
    *,
    target: HookTarget,
    config_dir: Path,
    uninstall: bool = False,
    http: bool = False,
    events: Sequence[str] | None = None,
) -> Plan:
    """Work out every file change for one harness (reads files, writes nothing).

    Called by :func:`run`; raises :class:`InstallError` (from the harness's edit) for a file
    that cannot be changed safely, and ``KeyError`` for a harness not in :data:`INSTALLERS`.
    """
    installer = INSTALLERS[harness]
    changes: list[FileChange] = []
    notes: list[str] = []
    for edit in installer.edits(config_dir, target, http=http, events=events):
        path = _target(edit.path)
        before = _read(path)
        if not uninstall:
            after, note = edit.install(before)
            if after is None:
                note = note or "paneward's hooks are already installed; nothing to do"
                notes.append(f"{path}: {note}")
            else:
                verb = "created" if before is None else "merged paneward's hooks into"
                note = note or f"{verb} it"
                changes.append(FileChange(path, before, after, f"{path}: {note}", edit.private))
            continue
        after, note = edit.uninstall(before)
        if after is None:
            notes.append(f"{path}: {note or 'no paneward hooks; nothing to do'}")
            continue
        text, delete = _restore_original(path, after, edit.same, edit.has_ours)
        if delete:
            note = note or "paneward created it; removed"
            changes.append(FileChange(path, before, None, f"{path}: {note}"))
        else:
            exact = " (original bytes restored from backup)" if text != after else ""
            note = note or f"removed paneward's hooks{exact}"
            changes.append(FileChange(path, before, text, f"{path}: {note}"))
    if not uninstall:
        notes.extend(installer.notes)
        if http:
            notes.extend(installer.http_notes)
        if target.trust:
            notes.extend(installer.trust_notes)
    return Plan(tuple(changes), tuple(notes))


def _target(path: Path) -> Path:
    """Follow a symlinked config (dotfile managers): edit and back up its target, keep the link.

    :raises InstallError: a symbolic-link loop, or a path that cannot be looked at.
    """
    try:
        return path.resolve(strict=False) if path.is_symlink() else path
    except RuntimeError:  # Python 3.11 reports a loop this way
        raise InstallError(f"{path} is a symbolic-link loop") from None
    except OSError as exc:
        raise InstallError(f"cannot look at {path}: {_why(exc)}") from None


def _backup_path(path: Path, absent: bool) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    base = f"{path.name}{BACKUP_INFIX}{stamp}"
    for n in range(1000):
        name = base + (f"-{n}" if n else "") + ("Z.absent" if absent else "Z")
        candidate = path.with_name(name)
        if not candidate.exists():
            return candidate
    raise InstallError(f"too many backups of {path} this second")  # pragma: no cover


def _write_atomic(path: Path, text: str, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.paneward-tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def apply_plan(changes: Iterable[FileChange]) -> list[Path]:
    """Write the changes (backup first, then an atomic replace); returns the backups made.

    :raises InstallError: a change cannot be written (read-only or missing directory,
        permission, disk full), in one line; the file is left as it was.
    """
    backups: list[Path] = []
    for change in changes:
        try:
            backups.append(_apply(change))
        except OSError as exc:
            where = exc.filename or change.path
            raise InstallError(f"cannot write {where}: {_why(exc)}") from None
    return backups


def _apply(change: FileChange) -> Path:
    """Back up and write one change; returns the backup."""
    path = _target(change.path)
    path.parent.mkdir(parents=True, exist_ok=True)
    current = _read(path)
    if current != change.before:
        raise InstallError(f"{path} changed while paneward was editing it; run again")
    backup = _backup_path(path, absent=current is None)
    if current is None:
        backup.touch(mode=0o600)
        mode = 0o600 if change.private else 0o644
    else:
        mode = stat.S_IMODE(path.stat().st_mode)
        shutil.copy2(path, backup)
        os.chmod(backup, mode & 0o600 | 0o400)
    if change.after is None:
        path.unlink()
    else:
        if change.private:
            mode &= 0o700  # it now holds the http token
        _write_atomic(path, change.after, mode)
    return backup


def ensure_http_token(path: Path) -> str:
    """Return the http hook token, creating it (0600, in a 0700 directory) on first use.

    :raises InstallError: the token path is not a regular file or cannot be read.
    """
    existing = (_read(path) or "").strip()
    if existing:
        os.chmod(path, 0o600)
        return existing
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    os.chmod(path, 0o600)
    return token


def default_executable() -> str:
    """The ``paneward`` console script of this installation (absolute path)."""
    beside = Path(sys.executable).with_name("paneward")
    if beside.exists():
        return os.fspath(beside)
    found = shutil.which("paneward")
    if found:
        return os.path.abspath(found)
    raise InstallError(
        "cannot find the `paneward` executable next to this Python or on PATH; "
        "pass --executable /path/to/paneward"
    )


def default_config_dir(harness: str) -> Path:
    """The harness's own directory when ``--config-dir`` is not given (reads the environment)."""
    return INSTALLERS[harness].default_dir()


def _http_titles() -> str:
    return " and ".join(i.title for i in INSTALLERS.values() if i.http)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``install-hooks`` options (registered by :mod:`actors.cli.main`)."""
    parser.add_argument("harness", choices=tuple(INSTALLERS))
    parser.add_argument(
        "--http",
        action="store_true",
        help=f"{_http_titles()} only: use loopback http hooks where the harness sends them",
    )
    parser.add_argument("--http-port", type=int, default=DEFAULT_HTTP_PORT, metavar="PORT")
    parser.add_argument(
        "--trust",
        action="store_true",
        help=" and ".join(i.title for i in INSTALLERS.values() if i.trust)
        + " only: record your consent for paneward's own hook entries in the harness's trust "
        "record, so it does not stop to ask",
    )
    parser.add_argument("--dry-run", action="store_true", help="show the diff, write nothing")
    parser.add_argument("--uninstall", action="store_true", help="remove paneward's entries")
    parser.add_argument(
        "--config-dir",
        type=Path,
        metavar="DIR",
        help="the harness's directory (default: "
        + ", ".join(i.default_dir_help for i in INSTALLERS.values())
        + ")",
    )
    parser.add_argument("--executable", metavar="PATH", help="the paneward command to install")
    parser.add_argument(
        "--events",
        metavar="A,B,...",
        help="only these events (e.g. for Claude Code releases that reject newer event names)",
    )


def _diff(change: FileChange) -> str:
    before = (change.before or "").splitlines(keepends=True)
    after = (change.after or "").splitlines(keepends=True)
    name = os.fspath(change.path)
    return "".join(difflib.unified_diff(before, after, name, name + " (new)"))


def run(args: argparse.Namespace) -> int:
    """The ``install-hooks`` subcommand: prints what it found and did; 0 ok, 1 refused."""
    installer = INSTALLERS[args.harness]
    try:
        if args.http and not installer.http:
            raise InstallError(
                f"--http is only for {_http_titles()} (the only harness with http hooks)"
            )
        if args.trust and not installer.trust:
            titles = " and ".join(i.title for i in INSTALLERS.values() if i.trust)
            raise InstallError(f"--trust is only for {titles} (the only harness that asks)")
        executable = args.executable or default_executable()
        token: str | None = None
        url: str | None = None
        if args.http and not args.uninstall:
            token_path = Path(paths.http_token_path())
            if args.dry_run and not token_path.exists():
                token = "<new token>"
            else:
                token = ensure_http_token(token_path)
            url = f"http://127.0.0.1:{args.http_port}/hook/{installer.harness}"
        events = [e for e in (args.events or "").split(",") if e] or None
        config_dir = args.config_dir or installer.default_dir()
        result = plan(
            installer.harness,
            target=HookTarget(executable, url, token, trust=args.trust and not args.uninstall),
            config_dir=config_dir,
            uninstall=args.uninstall,
            http=args.http,
            events=events,
        )
        for note in result.notes:
            print(note)
        if args.dry_run:
            for change in result.changes:
                print(f"would change {change.path}: {change.note}")
                print(_diff(change), end="")
            return 0
        backups = apply_plan(result.changes)
        for change, backup in zip(result.changes, backups, strict=True):
            print(f"{change.note} (backup: {backup})")
    except InstallError as exc:
        print(f"paneward install-hooks: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # any other bad path: one line, never a traceback
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"paneward install-hooks: {where}{_why(exc)}", file=sys.stderr)
        return 1
    return 0
