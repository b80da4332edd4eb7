"""Opening files without following anyone's links: paneward's own directories, its sockets,
and the evidence files it reads (blocking: call from a worker thread, or at start-up).

Who uses what:

- :func:`open_private_dir` -- the daemon (state directory, socket directory: its locks), the
  listeners (the socket directory), the store (the database's directory). The directory is
  created 0700 or opened with ``O_NOFOLLOW | O_DIRECTORY``, and checked on the opened fd
  (:func:`actors.core.paths.private_dir_problem`): a symbolic link, a directory of another
  user, or one that group/others can reach is refused with the reason, never chmodded.
- :func:`prepare_socket` / :func:`bind_socket` / :func:`remove_socket` -- the listeners: every
  operation goes through the opened directory fd (``dir_fd``, ``/proc/self/fd/N/name`` for
  ``bind``/``connect``), so the directory cannot be swapped under them; only a socket is ever
  unlinked, and only one nobody answers on (stale) or the one this process bound.
- :func:`open_evidence` / :func:`check_regular` -- discovery (Claude registry files, Codex
  rollouts, the Hermes ledger): ``O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC`` and
  ``fstat``: a FIFO, device or link put in place of an evidence file is refused at once
  (:class:`NotRegularFile`, counted by the caller) instead of blocking a worker thread forever.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
from typing import Final

from actors.core.paths import private_dir_problem
from messages.errors import PanewardError

__all__ = [
    "EVIDENCE_FLAGS",
    "NotRegularFile",
    "UnsafePath",
    "bind_socket",
    "check_regular",
    "fd_path",
    "open_evidence",
    "open_private_dir",
    "prepare_socket",
    "remove_socket",
]

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: How every evidence file is opened: never blocks (a FIFO opens at once), never follows a
#: symbolic link in its last component, never leaks into a child.
EVIDENCE_FLAGS: Final = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(PanewardError):
    """A directory or socket path paneward must not use; the text says why and what to do."""


class NotRegularFile(OSError):
    """An evidence path that is a FIFO, a device, a socket, a directory or a symbolic link."""


def fd_path(dir_fd: int, name: str = "") -> str:
    """A path naming ``name`` inside the directory open as ``dir_fd`` (Linux ``/proc``)."""
    return f"/proc/self/fd/{dir_fd}/{name}" if name else f"/proc/self/fd/{dir_fd}"


def open_private_dir(path: str, *, create: bool = True) -> int:
    """Create ``path`` (mode 0700; its missing parents normally) or open the existing one,
    without following a link, and check it on the opened fd. Returns the directory fd (the
    caller closes it).

    :raises UnsafePath: a symbolic link, not a directory, another user's, or reachable by
        group/others (see :func:`actors.core.paths.private_dir_problem`).
    """
    created = False
    if create:
        parent = os.path.dirname(os.path.abspath(path))
        try:
            os.makedirs(parent, exist_ok=True)
            os.mkdir(path, 0o700)
            created = True
        except FileExistsError:
            pass
        except OSError as exc:
            raise UnsafePath(f"cannot create {path}: {exc.strerror or exc}") from None
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            # O_NOFOLLOW | O_DIRECTORY on a link fails with either, depending on the kernel.
            with contextlib.suppress(OSError):
                if stat.S_ISLNK(os.lstat(path).st_mode):
                    raise UnsafePath(
                        f"{path} is a symbolic link: refusing to follow it"
                    ) from None
            raise UnsafePath(f"{path} is not a directory") from None
        raise UnsafePath(f"cannot open {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if created and stat.S_IMODE(st.st_mode) != 0o700:
            # mkdir's mode went through the umask; set it on the fd we hold (no path lookup).
            os.fchmod(fd, 0o700)
            st = os.fstat(fd)
        problem = private_dir_problem(path, st.st_uid, st.st_mode, os.getuid())
        if problem is not None:
            raise UnsafePath(problem)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _socket_alive(dir_fd: int, name: str) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    probe.setblocking(False)
    try:
        probe.connect(fd_path(dir_fd, name))
    except (ConnectionRefusedError, FileNotFoundError):
        return False
    except BlockingIOError:
        return True  # the backlog is full: someone is listening
    except OSError:
        return True  # cannot tell: leave it alone
    finally:
        probe.close()
    return True


def prepare_socket(dir_fd: int, name: str, shown: str) -> None:
    """Make room for the socket ``name`` in the directory ``dir_fd`` (``shown``: its path, for
    messages): nothing there, or a stale socket (nobody answers), which is removed.

    :raises UnsafePath: something that is not a socket is there (never removed), or a live
        socket (another daemon answers on it).
    """
    try:
        existing = os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(existing.st_mode):
        raise UnsafePath(f"{shown} exists and is not a socket; refusing to replace it")
    if _socket_alive(dir_fd, name):
        raise UnsafePath(f"another paneward daemon is already listening on {shown}")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dir_fd)  # stale: its daemon is gone


def bind_socket(dir_fd: int, name: str, mode: int = 0o600) -> tuple[socket.socket, int]:
    """A listening Unix socket bound as ``name`` in the directory ``dir_fd``; also returns its
    inode (so that :func:`remove_socket` removes only this one)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        sock.bind(fd_path(dir_fd, name))
        # Only we can write in this 0700 directory: the name is the socket we just made.
        os.chmod(name, mode, dir_fd=dir_fd)
        sock.listen(4096)
        sock.setblocking(False)
        inode = os.lstat(name, dir_fd=dir_fd).st_ino
    except BaseException:
        sock.close()
        raise
    return sock, inode


def remove_socket(dir_fd: int, name: str, inode: int) -> None:
    """Unlink ``name`` if it is still the socket ``inode`` (a successor may have replaced it)."""
    try:
        st = os.lstat(name, dir_fd=dir_fd)
        if stat.S_ISSOCK(st.st_mode) and st.st_ino == inode:
            os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass


def open_evidence(path: str | os.PathLike[str]) -> tuple[int, os.stat_result]:
    """Open an evidence file for reading (:data:`EVIDENCE_FLAGS`); returns the fd and its
    ``fstat``. The caller closes the fd.

    :raises NotRegularFile: not a regular file (a symbolic link raises it too, via ``ELOOP``).
    :raises OSError: anything else (gone, permission).
    """
    try:
        fd = os.open(path, EVIDENCE_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegularFile(
                errno.ELOOP, "a symbolic link, not followed", os.fspath(path)
            ) from None
        raise
    try:
        st = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise NotRegularFile(errno.EINVAL, "not a regular file", os.fspath(path))
    return fd, st


def check_regular(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a regular file (checked on an fd opened as evidence), False when
    it does not exist.

    :raises NotRegularFile: it is something else.
    """
    try:
        fd, _ = open_evidence(path)
    except FileNotFoundError:
        return False
    os.close(fd)
    return True
