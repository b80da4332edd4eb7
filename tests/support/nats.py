"""A real ``nats-server`` with JetStream for tests and benchmarks, and a direct reader of its
stream.

:class:`NatsServer` runs ``nats-server -js`` on a loopback port with a store directory of its
own (the port is chosen by the server at first start and kept across :meth:`restart`);
:meth:`~NatsServer.pause` / :meth:`~NatsServer.resume` SIGSTOP / SIGCONT it: a server that
accepts connections and never answers. Only the process it started is ever signalled.
:func:`read_stream` reads every message of the stream with a pull consumer, as an auditor
would, independently of the publisher under test. :func:`published` waits until a daemon's
publisher has everything acked; :func:`send_paced` writes hook frames over time (a burst a
restart can land in); :func:`nkey_pair` makes a user nkey.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.daemon import DaemonProcess
from tests.support.polling import poll_until

__all__ = ["NATS_SERVER", "NatsServer", "StreamMessage", "nats_server", "nkey_pair", "published",
           "read_stream", "send_paced"]

NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"
_LISTENING = re.compile(rb"Listening for client connections on [^:\s]+:(\d+)")


class NatsServer:
    """``nats-server -js`` on 127.0.0.1 with its store under ``directory``."""

    def __init__(self, directory: Path, *, config: str | None = None) -> None:
        self.directory = directory
        self.store = directory / "jetstream"
        self.log = directory / "nats-server.log"
        self.config = config
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        assert self.port is not None
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        args = [NATS_SERVER, "-js", "-a", "127.0.0.1", "-p", str(self.port or -1),
                "-sd", os.fspath(self.store)]
        if self.config is not None:
            conf = self.directory / "server.conf"
            conf.write_text(self.config)
            args += ["-c", os.fspath(conf)]
        offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=log,
                                            stdin=subprocess.DEVNULL)
        self._wait_ready(offset)

    def _wait_ready(self, offset: int) -> None:
        import time

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"nats-server exited: {self.log.read_text()}")
            text = self.log.read_bytes()[offset:]
            match = _LISTENING.search(text)
            if match and b"Server is ready" in text:
                self.port = int(match.group(1))
                with socket.create_connection(("127.0.0.1", self.port), timeout=5):
                    return
            time.sleep(0.01)  # polling a log file with a deadline: it has no event
        raise AssertionError(f"nats-server not ready: {self.log.read_text()}")

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGCONT)  # a paused server cannot exit
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

    def kill(self) -> None:
        """SIGKILL (paused or not): what it had not read from its sockets is lost."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(10)

    def restart(self) -> None:
        self.stop()
        self.start()

    def pause(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)


@contextmanager
def nats_server(directory: Path, *, config: str | None = None) -> Iterator[NatsServer]:
    server = NatsServer(directory, config=config)
    server.start()
    try:
        yield server
    finally:
        server.stop()


class StreamMessage:
    """One message read back from the stream: subject, headers, payload, stream seq."""

    def __init__(self, subject: str, headers: dict[str, str], data: bytes, seq: int) -> None:
        self.subject, self.headers, self.data, self.seq = subject, headers, data, seq


async def read_stream(url: str, stream: str = "PANEWARD", subject: str = "paneward.>",
                      **connect: Any) -> list[StreamMessage]:
    """Every message of ``stream`` on ``subject``, in stream order (an ordered consumer from
    the first message up to the stream's last at the time of the call).

    It runs on an event loop of its own in a worker thread: the tests' loop runs in asyncio's
    debug mode, which makes nats-py's per-message work tens of times slower."""
    import functools

    import anyio

    return await anyio.to_thread.run_sync(
        functools.partial(anyio.run, functools.partial(_read_stream, url, stream, subject,
                                                       **connect))
    )


async def _read_stream(url: str, stream: str, subject: str,
                       **connect: Any) -> list[StreamMessage]:
    import nats
    from nats.js import api

    nc = await nats.connect(url, **connect)
    try:
        js = nc.jetstream()
        info = await js.stream_info(stream)
        out: list[StreamMessage] = []
        if not info.state.messages:
            return out
        last = info.state.last_seq
        sub = await js.subscribe(subject, stream=stream, ordered_consumer=True,
                                 deliver_policy=api.DeliverPolicy.ALL)
        try:
            async for msg in sub.messages:
                seq = msg.metadata.sequence.stream
                out.append(StreamMessage(msg.subject, dict(msg.headers or {}), msg.data, seq))
                if seq >= last or msg.metadata.num_pending == 0:
                    break
        finally:
            await sub.unsubscribe()
        return out
    finally:
        await nc.close()


async def published(daemon: DaemonProcess) -> None:
    """Until the daemon's publisher has every transition of the daemon acked."""

    async def done() -> bool:
        status = await daemon.status()
        nats = status["statistics"]["nats"]
        return bool(nats["buffered"] == 0 and nats["acked_seq"] >= int(status["seq"]))

    await poll_until(done, "every transition acked by the server", within=60)


def send_paced(path: Path, data: bytes) -> None:
    """Write ``data``'s lines to the Unix socket ``path`` 100 at a time, 10 ms apart (blocking),
    then wait for the peer to close."""
    import time

    lines = data.splitlines(keepends=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(os.fspath(path))
        for start in range(0, len(lines), 100):
            sock.sendall(b"".join(lines[start : start + 100]))
            # Hook events arrive over time: pacing (>= 1 s for 10,000) keeps the restart
            # inside the burst; it synchronises nothing.
            time.sleep(0.01)
        sock.shutdown(socket.SHUT_WR)
        sock.recv(1)


def nkey_pair() -> tuple[str, str]:
    """A user nkey: (seed, public key), made with nkeys' own encoding."""
    import nkeys

    raw = os.urandom(32)
    seed = nkeys.encode_seed(raw, nkeys.PREFIX_BYTE_USER).decode()
    public = nkeys.from_seed(bytearray(seed.encode())).public_key.decode()
    return seed, public
