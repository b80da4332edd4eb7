"""A private D-Bus session bus and a freedesktop notification server on it, for tests.

:func:`session_bus` starts a real ``dbus-daemon --session`` on a socket under the test's
directory (installed from Debian by ``.ci/run``) and stops only that process.
:class:`NotificationServer` is the test's own ``org.freedesktop.Notifications`` service on that
bus, written with ``dbus-fast``: it answers what desktop-notifier asks (capabilities, server
information) and records every ``Notify`` call it receives. (It stands in for a desktop's
notification daemon, which needs a display this machine does not have.)
:func:`silent_notification_server` is one that is wedged, in a process of its own: it takes
every call and answers none (the bus itself, introspection included, keeps working).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any, Final, NamedTuple

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream
from dbus_fast import BusType
from dbus_fast.aio import MessageBus
from dbus_fast.annotations import DBusSignature
from dbus_fast.service import ServiceInterface, dbus_method, dbus_signal

__all__ = [
    "NotificationServer",
    "Received",
    "SilentNotificationServer",
    "notification_server",
    "session_bus",
    "silent_notification_server",
]


@contextlib.asynccontextmanager
async def session_bus(directory: Path) -> AsyncIterator[str]:
    """A ``dbus-daemon --session`` of its own; yields its address."""
    socket = directory / "bus"
    argv = [
        "dbus-daemon", "--session", "--nofork", "--nopidfile", "--print-address=1",
        f"--address=unix:path={socket}",
    ]
    async with await anyio.open_process(argv) as process:
        try:
            assert process.stdout is not None
            with anyio.fail_after(20):
                line = await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 4096)
            yield line.decode().strip()
        finally:
            with anyio.CancelScope(shield=True):
                if process.returncode is None:
                    process.terminate()
                with anyio.fail_after(10):
                    await process.wait()


class Received(NamedTuple):
    app_name: str
    summary: str
    body: str
    hints: dict[str, Any]
    timeout: int


class NotificationServer(ServiceInterface):
    """``org.freedesktop.Notifications``: records each notification it is sent; advertises
    ``capabilities`` (``body-markup``: it would read bodies as markup, as GNOME, KDE and dunst
    do)."""

    def __init__(self, capabilities: tuple[str, ...] = ("body",)) -> None:
        super().__init__("org.freedesktop.Notifications")
        self.capabilities = list(capabilities)
        self.received: list[Received] = []
        self.arrived: list[float] = []  # time.perf_counter() of each Notify
        self._changed = anyio.Event()

    @dbus_method()
    def Notify(
        self,
        app_name: Annotated[str, DBusSignature("s")],
        replaces_id: Annotated[int, DBusSignature("u")],
        app_icon: Annotated[str, DBusSignature("s")],
        summary: Annotated[str, DBusSignature("s")],
        body: Annotated[str, DBusSignature("s")],
        actions: Annotated[list[str], DBusSignature("as")],
        hints: Annotated[dict[str, Any], DBusSignature("a{sv}")],
        expire_timeout: Annotated[int, DBusSignature("i")],
    ) -> Annotated[int, DBusSignature("u")]:
        import time

        del replaces_id, app_icon, actions
        self.arrived.append(time.perf_counter())
        self.received.append(Received(app_name, summary, body, dict(hints), expire_timeout))
        self._changed.set()
        self._changed = anyio.Event()
        return len(self.received)

    @dbus_method()
    def GetCapabilities(self) -> Annotated[list[str], DBusSignature("as")]:
        return self.capabilities

    @dbus_method()
    def GetServerInformation(
        self,
    ) -> Annotated[tuple[str, str, str, str], DBusSignature("ssss")]:
        return ("paneward-test", "paneward", "1", "1.2")

    @dbus_method()
    def CloseNotification(
        self, nid: Annotated[int, DBusSignature("u")]
    ) -> Annotated[None, DBusSignature("")]:
        del nid

    @dbus_signal()
    def NotificationClosed(
        self, nid: int, reason: int
    ) -> Annotated[tuple[int, int], DBusSignature("uu")]:
        return (nid, reason)

    @dbus_signal()
    def ActionInvoked(
        self, nid: int, key: str
    ) -> Annotated[tuple[int, str], DBusSignature("us")]:
        return (nid, key)

    async def wait_for(self, count: int) -> None:
        """Until ``count`` notifications arrived (callers bound it)."""
        while len(self.received) < count:
            await self._changed.wait()


@contextlib.asynccontextmanager
async def notification_server(
    address: str, capabilities: tuple[str, ...] = ("body",)
) -> AsyncIterator[NotificationServer]:
    """The server, exported on the bus at ``address`` under its well-known name."""
    bus = await MessageBus(bus_address=address, bus_type=BusType.SESSION).connect()
    server = NotificationServer(capabilities)
    bus.export("/org/freedesktop/Notifications", server)
    await bus.request_name("org.freedesktop.Notifications")
    try:
        yield server
    finally:
        bus.disconnect()
        with contextlib.suppress(Exception):
            await bus.wait_for_disconnect()  # type: ignore[no-untyped-call]


_SILENT_SERVER: Final = """
import asyncio, sys
from typing import Annotated, Any
from dbus_fast import BusType
from dbus_fast.aio import MessageBus
from dbus_fast.annotations import DBusSignature
from dbus_fast.service import ServiceInterface, dbus_method

NEVER = asyncio.Event()


async def hold(name):
    print(name, flush=True)
    await NEVER.wait()


class Silent(ServiceInterface):
    @dbus_method()
    async def Notify(
        self,
        app_name: Annotated[str, DBusSignature("s")],
        replaces_id: Annotated[int, DBusSignature("u")],
        app_icon: Annotated[str, DBusSignature("s")],
        summary: Annotated[str, DBusSignature("s")],
        body: Annotated[str, DBusSignature("s")],
        actions: Annotated[list[str], DBusSignature("as")],
        hints: Annotated[dict[str, Any], DBusSignature("a{sv}")],
        expire_timeout: Annotated[int, DBusSignature("i")],
    ) -> Annotated[int, DBusSignature("u")]:
        await hold("Notify")
        return 0

    @dbus_method()
    async def GetCapabilities(self) -> Annotated[list[str], DBusSignature("as")]:
        await hold("GetCapabilities")
        return []

    @dbus_method()
    async def GetServerInformation(
        self,
    ) -> Annotated[tuple[str, str, str, str], DBusSignature("ssss")]:
        await hold("GetServerInformation")
        return ("silent", "paneward", "1", "1.2")


async def main():
    bus = await MessageBus(bus_address=sys.argv[1], bus_type=BusType.SESSION).connect()
    bus.export("/org/freedesktop/Notifications", Silent("org.freedesktop.Notifications"))
    await bus.request_name("org.freedesktop.Notifications")
    print("ready", flush=True)
    await NEVER.wait()


asyncio.run(main())
"""


class SilentNotificationServer:
    """The names of the calls the silent server took (none of which it answers), in order."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.calls: list[str] = []
        self._process = process
        self._changed = anyio.Event()

    async def _read(self, lines: BufferedByteReceiveStream) -> None:
        with contextlib.suppress(anyio.EndOfStream, anyio.IncompleteRead):
            while True:
                self.calls.append((await lines.receive_until(b"\n", 4096)).decode())
                self._changed.set()
                self._changed = anyio.Event()

    async def wait_for(self, count: int) -> None:
        """Until ``count`` calls arrived (callers bound it)."""
        while len(self.calls) < count:
            await self._changed.wait()


@contextlib.asynccontextmanager
async def silent_notification_server(address: str) -> AsyncIterator[SilentNotificationServer]:
    """An ``org.freedesktop.Notifications`` on the bus at ``address`` that takes every call and
    answers none: a process of its own (dbus-fast), which only this stops."""
    argv = [sys.executable, "-c", _SILENT_SERVER, address]
    async with await anyio.open_process(argv, stdin=subprocess.DEVNULL) as process:
        try:
            assert process.stdout is not None
            lines = BufferedByteReceiveStream(process.stdout)
            with anyio.fail_after(20):
                assert await lines.receive_until(b"\n", 4096) == b"ready"
            server = SilentNotificationServer(process)
            async with anyio.create_task_group() as tg:
                tg.start_soon(server._read, lines)
                try:
                    yield server
                finally:
                    tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                if process.returncode is None:
                    process.terminate()
                with anyio.fail_after(10):
                    await process.wait()
