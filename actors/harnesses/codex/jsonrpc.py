"""JSON-RPC 2.0 over a client WebSocket, sans-IO: bytes in, events out; requests in, bytes out.

:class:`RpcClient` holds the WebSocket framing (wsproto), the JSON-RPC correlation (which
request ids wait for an answer) and what a client owes its peer (a pong for each ping, the
close handshake, an error answer to a request it does not serve). It does no I/O and awaits
nothing: the Codex daemon source's connection (:class:`actors.harnesses.codex.daemon.RpcStream`)
writes what :meth:`RpcClient.connect` and :meth:`RpcClient.request` return and what
:meth:`RpcClient.data_to_send` holds, and feeds every byte it reads to
:meth:`RpcClient.receive_data`, which returns:

- :class:`Opened` once the WebSocket handshake is accepted (:class:`RpcProtocolError` if
  refused);
- :class:`Answer` for the answer to a request still waiting (answers to any other id are
  dropped: a request given up with :meth:`RpcClient.forget`, or one never made);
- :class:`RpcNotification` for every notification (a JSON object with a ``method`` and no
  ``id``);
- :class:`RpcClosed` when the peer closes the WebSocket, or breaks its framing (wsproto then
  closes it with code 1002); nothing after it is read.

A request from the peer is answered ``-32601`` (this client serves none). A broken handshake
answer, a message that is not a JSON object, or one longer than ``max_message`` raises
:class:`RpcProtocolError`: the connection is then unusable.
"""

from __future__ import annotations

import contextlib

# wsproto encodes the handshake's Host header with the idna codec, which Python imports on its
# first use (idna, stringprep, unicodedata: milliseconds on a busy machine): imported with this
# module, so the first daemon's handshake does not wait for it.
import encodings.idna  # noqa: F401
import json
from typing import Any, Final

import msgspec
import wsproto
import wsproto.events
import wsproto.utilities

__all__ = [
    "MAX_MESSAGE",
    "Answer",
    "RpcClosed",
    "RpcNotification",
    "Opened",
    "RpcClient",
    "RpcEvent",
    "RpcProtocolError",
    "result_of",
]

MAX_MESSAGE: Final = 16 << 20  # the daemon's own x-codex-websocket-max-unfragmented-message-bytes


class RpcProtocolError(Exception):
    """The peer broke the WebSocket or JSON-RPC protocol (the connection is dropped)."""


class Opened(msgspec.Struct, frozen=True):
    """The peer accepted the WebSocket handshake."""


class Answer(msgspec.Struct, frozen=True):
    """The answer (``result`` or ``error``) to the waiting request ``request_id``."""

    request_id: int
    body: dict[str, Any]


class RpcNotification(msgspec.Struct, frozen=True):
    """A notification of the peer: a JSON object with a string ``method`` and no ``id``."""

    body: dict[str, Any]


class RpcClosed(msgspec.Struct, frozen=True):
    """The peer closed the WebSocket (its close is answered)."""


RpcEvent = Opened | Answer | RpcNotification | RpcClosed


def _dumps(body: dict[str, Any]) -> str:
    return json.dumps(body, separators=(",", ":"))


def result_of(method: str, answer: Answer) -> dict[str, Any]:
    """The ``result`` object of ``answer`` to a call of ``method``.

    :raises RpcProtocolError: an error answer, or a result that is not a JSON object.
    """
    result = answer.body.get("result")
    if "error" in answer.body or not isinstance(result, dict):
        raise RpcProtocolError(f"{method}: {answer.body.get('error')!r}")
    return result


class RpcClient:
    """The client end of one JSON-RPC-over-WebSocket connection (sans-IO)."""

    def __init__(self, *, max_message: int = MAX_MESSAGE) -> None:
        self._ws = wsproto.WSConnection(wsproto.ConnectionType.CLIENT)
        self._max_message = max_message
        self._text: list[str] = []
        self._size = 0
        self._next_id = 0
        self._waiting: set[int] = set()
        self._out = bytearray()
        self._closed = False

    def connect(self) -> bytes:
        """The WebSocket handshake request: send it first."""
        return self._ws.send(wsproto.events.Request(host="localhost", target="/"))

    def request(self, method: str, params: dict[str, Any]) -> tuple[int, bytes]:
        """A new request: its id (its :class:`Answer` carries it) and the bytes to send."""
        self._next_id += 1
        request_id = self._next_id
        self._waiting.add(request_id)
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        return request_id, self.message(body)

    def forget(self, request_id: int) -> None:
        """Stop waiting for ``request_id`` (its caller gave up): a late answer is dropped."""
        self._waiting.discard(request_id)

    def message(self, body: dict[str, Any]) -> bytes:
        """``body`` (a notification, an answer) as one WebSocket text message."""
        return self._ws.send(wsproto.events.Message(data=_dumps(body)))

    def data_to_send(self) -> bytes:
        """What this end owes the peer after :meth:`receive_data` (pongs, close, error
        answers), in order; empty when nothing. Taken once."""
        data, self._out = bytes(self._out), bytearray()
        return data

    def receive_data(self, data: bytes) -> list[RpcEvent]:
        """Feed bytes read from the peer; the events they complete, in order.

        :raises RpcProtocolError: the peer broke the protocol (see the module's docstring).
        """
        if self._closed:
            return []
        try:
            self._ws.receive_data(data)
            frames = list(self._ws.events())
        except wsproto.utilities.RemoteProtocolError as exc:
            raise RpcProtocolError(str(exc)) from None
        events: list[RpcEvent] = []
        for frame in frames:
            if isinstance(frame, wsproto.events.AcceptConnection):
                events.append(Opened())
            elif isinstance(frame, wsproto.events.RejectConnection):
                raise RpcProtocolError(f"websocket refused ({frame.status_code})")
            elif isinstance(frame, wsproto.events.TextMessage):
                self._text.append(frame.data)
                self._size += len(frame.data)
                if self._size > self._max_message:
                    raise RpcProtocolError("message too large")
                if frame.message_finished:
                    text, self._text, self._size = "".join(self._text), [], 0
                    event = self._dispatch(text)
                    if event is not None:
                        events.append(event)
            elif isinstance(frame, wsproto.events.Ping):
                self._out += self._ws.send(frame.response())
            elif isinstance(frame, wsproto.events.CloseConnection):
                with contextlib.suppress(wsproto.utilities.LocalProtocolError):
                    self._out += self._ws.send(frame.response())
                self._closed = True
                events.append(RpcClosed())
                break
        return events

    def _dispatch(self, text: str) -> RpcEvent | None:
        try:
            body = json.loads(text)
        except ValueError:
            raise RpcProtocolError("a frame that is not JSON") from None
        if not isinstance(body, dict):
            raise RpcProtocolError("a frame that is not a JSON object")
        request_id, method = body.get("id"), body.get("method")
        if method is None and isinstance(request_id, int) and request_id in self._waiting:
            self._waiting.discard(request_id)
            return Answer(request_id, body)
        if isinstance(method, str) and request_id is not None:
            # A request to this client (none is expected: it subscribes to no thread).
            self._out += self.message({"jsonrpc": "2.0", "id": request_id,
                                       "error": {"code": -32601,
                                                 "message": "not handled by paneward"}})
            return None
        if isinstance(method, str):
            return RpcNotification(body)
        return None
