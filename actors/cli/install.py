"""``paneward install-hooks``: merge paneward's hooks into a harness's own configuration.

This module is the I/O shell; what each harness's files look like and how they are edited is
its package's fact (``actors/harnesses/<name>/install.py``; docs/hooks.md lists the files of
each), built on the pure helpers of :mod:`actors.core.install.config_edit`. Each declares one
:class:`~actors.core.install.config_edit.Installer`, which its spec's ``installer`` returns;
:data:`INSTALLERS` (the catalog's :data:`actors.harnesses.catalog.INSTALLERS`) maps the harness
ids -- the command's choices -- to them.

Guarantees, for every harness: every other key, hook and comment is kept; entries are
recognised as paneward's by their command (``…paneward hook --harness …``, with or without the
``--owner`` rule older releases did not write) or, for http hooks, by the token header, and a
stale one is rewritten in place (Codex trusts hooks by position and content); a second run
changes nothing and writes nothing; before any write the previous file is copied to
``<file>.paneward-backup-<UTC time>-<random>Z`` (``….absent`` when there was no file), and of
the older backups only the newest paneward-free one is kept (two per file at most); writes are
atomic (temp file + rename) onto the symlink's target, keeping the file mode. Every file
install-hooks creates -- temporary file, backup -- gets an unpredictable name and is opened
``O_CREAT|O_EXCL|O_NOFOLLOW`` relative to the directory's fd, and a directory another user can
write in is refused before anything is written
(:func:`actors.core.install.config_edit.shared_dir_problem`). ``--uninstall`` removes exactly
paneward's entries; when the result means the same as the newest paneward-free backup, that
backup's bytes are restored (byte-for-byte, including formatting), and a file paneward created
is deleted again. A file that does not parse is never touched: the command says why.
Only regular files are read or written: a FIFO, device or socket in a config file's place is
refused (opened non-blocking, checked with ``fstat``, so a FIFO cannot hang the command), and
every bad path -- a symbolic-link loop, a read-only or missing directory, a permission -- is one
line on stderr and exit status 1, never a traceback.

With ``--http`` (Claude Code) the token is created 0600 in
:func:`actors.core.paths.http_token_path` on first use and reused afterwards.
"""

from __future__ import annotations

import contextlib
import difflib
import grp
import os
import pwd
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
from actors.core.install.config_edit import HookTarget, Installer, InstallError, shared_dir_problem
from actors.harnesses import catalog

if TYPE_CHECKING:
    import argparse

__all__ = [
    "BACKUP_INFIX",
    "DEFAULT_HTTP_PORT",
    "INSTALLERS",
    "FileChange",
    "InstallPlan",
    "add_arguments",
    "apply_plan",
    "default_config_dir",
    "default_executable",
    "ensure_http_token",
    "install_plan",
    "run",
]

#: Every harness ``install-hooks`` knows, by id (the command's choices, in catalog order).
INSTALLERS: Final[Mapping[str, Installer]] = catalog.INSTALLERS
DEFAULT_HTTP_PORT: Final = 47501
BACKUP_INFIX: Final = ".paneward-backup-"


def _no_entries(_: str) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file to rewrite: ``after`` ``None`` deletes it (a file paneward had created).

    ``note`` says what is done, without the path (:func:`run` prints ``<path>: <note>``);
    ``has_ours`` tells a backup that holds paneward's entries (:attr:`Edit.has_ours`), so the
    paneward-free one is the backup kept when old ones are pruned.
    """

    path: Path
    before: str | None
    after: str | None
    note: str
    private: bool = False  # holds the http token: create it 0600
    has_ours: Callable[[str], bool] = _no_entries


@dataclass(frozen=True, slots=True)
class InstallPlan:
    """What :func:`install_plan` found: the changes for :func:`apply_plan`, the notes to print."""

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
    """``path``'s backups, newest first: regular files of this user only (a link or another
    user's file of that name is never read, restored or removed)."""
    found: list[Path] = []
    for candidate in path.parent.glob(path.name + BACKUP_INFIX + "*"):
        try:
            st = candidate.lstat()
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid():
            found.append(candidate)
    return sorted(found, reverse=True)


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


def install_plan(
    harness: str,
    *,
    target: HookTarget,
    config_dir: Path,
    uninstall: bool = False,
    http: bool = False,
    events: Sequence[str] | None = None,
) -> InstallPlan:
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
                changes.append(
                    FileChange(path, before, after, note, edit.private, edit.has_ours)
                )
            continue
        after, note = edit.uninstall(before)
        if after is None:
            notes.append(f"{path}: {note or 'no paneward hooks; nothing to do'}")
            continue
        text, delete = _restore_original(path, after, edit.same, edit.has_ours)
        if delete:
            note = note or "paneward created it; removed"
            changes.append(FileChange(path, before, None, note, has_ours=edit.has_ours))
        else:
            exact = " (original bytes restored from backup)" if text != after else ""
            note = note or f"removed paneward's hooks{exact}"
            changes.append(FileChange(path, before, text, note, has_ours=edit.has_ours))
    if not uninstall:
        notes.extend(installer.notes)
        if http:
            notes.extend(installer.http_notes)
        notes.extend(installer.trust_notes if target.trust else installer.untrusted_notes)
    return InstallPlan(tuple(changes), tuple(notes))


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


def _backup_name(name: str, absent: bool) -> str:
    """A new backup's name: UTC time to the microsecond (names sort oldest to newest), then
    random hex, so no one can know it in advance."""
    now = time.time_ns()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now // 1_000_000_000))
    micro = now // 1000 % 1_000_000
    return f"{name}{BACKUP_INFIX}{stamp}.{micro:06d}-{secrets.token_hex(4)}Z" + (
        ".absent" if absent else ""
    )


#: How every file install-hooks creates is opened: a new name only (an existing file, a link
#: -- dangling or not -- or a hard link planted at that name fails with EEXIST), never through
#: a symbolic link.
_CREATE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _create(dir_fd: int, make_name: Callable[[], str], mode: int) -> tuple[int, str]:
    """Create a new file in the directory ``dir_fd`` under a fresh unpredictable name."""
    for _ in range(100):
        name = make_name()
        try:
            return os.open(name, _CREATE, mode, dir_fd=dir_fd), name
        except FileExistsError:
            continue
    raise InstallError("cannot find a free name for a new file in the config directory")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _write_atomic(dir_fd: int, name: str, text: str, mode: int) -> None:
    """Replace ``name`` in ``dir_fd`` by ``text``: written to a new temporary file there
    (:func:`_create`), synced, then renamed over it."""
    fd, tmp = _create(dir_fd, lambda: f".{name}.paneward-tmp-{secrets.token_hex(8)}", 0o600)
    try:
        try:
            _write_all(fd, text.encode("utf-8"))
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def _private_gid() -> int | None:
    """The user's own private group: their primary group when it bears their login name and
    has no other member (the user-private-group scheme of Debian, Fedora, Arch...); else None."""
    try:
        user = pwd.getpwuid(os.getuid())
        group = grp.getgrgid(user.pw_gid)
    except KeyError:
        return None
    if group.gr_name != user.pw_name or set(group.gr_mem) - {user.pw_name}:
        return None
    return group.gr_gid


def _open_config_dir(directory: Path) -> int:
    """An fd of the directory a config file is written in (created if missing), once
    :func:`actors.core.install.config_edit.shared_dir_problem` finds no other user able to write
    there.

    :raises InstallError: the directory is another user's or others can write in it (the
        reason and the fix), or cannot be opened.
    """
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        problem = shared_dir_problem(
            os.fspath(directory), st.st_uid, st.st_gid, st.st_mode, os.getuid(), _private_gid()
        )
    except BaseException:
        os.close(fd)
        raise
    if problem is not None:
        os.close(fd)
        raise InstallError(problem)
    return fd


def apply_plan(changes: Iterable[FileChange]) -> list[Path]:
    """Write the changes (backup first, then an atomic replace); returns the backups made.

    Every directory is checked before anything is written (:func:`_open_config_dir`), so a
    refused one leaves every file as it was.

    :raises InstallError: a directory others can write in, or a change cannot be written
        (read-only or missing directory, permission, disk full), in one line; the file is
        left as it was.
    """
    changes = list(changes)
    for change in changes:
        directory = _target(change.path).parent
        try:
            os.close(_open_config_dir(directory))
        except OSError as exc:
            raise InstallError(f"cannot write {exc.filename or directory}: {_why(exc)}") from None
    backups: list[Path] = []
    for change in changes:
        try:
            backups.append(_apply(change))
        except OSError as exc:
            # Files are opened relative to their directory's fd: name them in full.
            where = change.path.parent / os.fsdecode(exc.filename or change.path.name)
            raise InstallError(f"cannot write {where}: {_why(exc)}") from None
    return backups


def _apply(change: FileChange) -> Path:
    """Back up and write one change; returns the backup."""
    path = _target(change.path)
    dir_fd = _open_config_dir(path.parent)
    try:
        current = _read(path)
        if current != change.before:
            raise InstallError(f"{path} changed while paneward was editing it; run again")
        backup = _backup(dir_fd, path, current)
        if current is None:
            mode = 0o600 if change.private else 0o644
        else:
            mode = stat.S_IMODE(os.stat(path.name, dir_fd=dir_fd).st_mode)
        if change.after is None:
            os.unlink(path.name, dir_fd=dir_fd)
        else:
            if change.private:
                mode &= 0o700  # it now holds the http token
            _write_atomic(dir_fd, path.name, change.after, mode)
    finally:
        os.close(dir_fd)
    _prune_backups(path, backup, change.has_ours)
    return backup


def _backup(dir_fd: int, path: Path, current: str | None) -> Path:
    """Save ``current`` (the file's text, ``None``: no file) as a new backup beside it: the
    same bytes, at most the file's owner permissions, read-only, its times kept."""
    fd, name = _create(dir_fd, lambda: _backup_name(path.name, current is None), 0o600)
    try:
        if current is not None:
            st = os.stat(path.name, dir_fd=dir_fd)
            _write_all(fd, current.encode("utf-8"))
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & 0o600 | 0o400)
            os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.fsync(fd)
    finally:
        os.close(fd)
    return path.with_name(name)


def _prune_backups(path: Path, made: Path, has_ours: Callable[[str], bool]) -> None:
    """Keep two backups of ``path`` at most: ``made`` (the file before this write) and the
    newest one without paneward's entries (what ``--uninstall`` restores from); delete the rest.
    A backup that cannot be read is kept."""
    keep = {made}
    backups = _backups(path)
    for backup in backups:
        try:
            content = None if backup.name.endswith(".absent") else _read(backup)
        except InstallError:
            keep.add(backup)
            continue
        if content is None or not has_ours(content):
            keep.add(backup)
            break
    for backup in backups:
        if backup not in keep:
            with contextlib.suppress(OSError):
                backup.unlink()


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
        result = install_plan(
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
            # The backup is beside the file: named without its directory; an ".absent" marker
            # (there was no file) is no copy of anything, so it is not mentioned.
            kept = "" if change.before is None else f" (backup: {backup.name})"
            print(f"{change.path}: {change.note}{kept}")
    except InstallError as exc:
        print(f"paneward install-hooks: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # any other bad path: one line, never a traceback
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"paneward install-hooks: {where}{_why(exc)}", file=sys.stderr)
        return 1
    return 0
