"""The sans-IO JSON-RPC-over-WebSocket client of the Codex daemon source
(actors/harnesses/codex/jsonrpc.py), driven by bytes only.

The peer is a real WebSocket server end (wsproto's, sans-IO too): every byte the client is fed
is one a server wrote, every byte the client writes is read back by that server. No socket, no
event loop: what the connection does with them is tests/harnesses/codex/test_daemon.py's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
import wsproto
import wsproto.events

from actors.harnesses.codex.jsonrpc import (
    Answer,
    Opened,
    RpcClient,
    RpcClosed,
    RpcEvent,
    RpcNotification,
    RpcProtocolError,
    result_of,
)


class Peer:
    """The server end: reads what the client wrote, writes what the test scripts."""

    def __init__(self) -> None:
        self.ws = wsproto.WSConnection(wsproto.ConnectionType.SERVER)

    def read(self, data: bytes) -> list[wsproto.events.Event]:
        self.ws.receive_data(data)
        return list(self.ws.events())

    def read_json(self, data: bytes) -> list[Any]:
        return [json.loads(e.data) for e in self.read(data)
                if isinstance(e, wsproto.events.TextMessage)]

    def accept(self, client_hello: bytes) -> bytes:
        (request,) = self.read(client_hello)
        assert isinstance(request, wsproto.events.Request)
        return self.ws.send(wsproto.events.AcceptConnection())

    def text(self, body: Any, *, finished: bool = True) -> bytes:
        data = body if isinstance(body, str) else json.dumps(body)
        return self.ws.send(wsproto.events.Message(data=data, message_finished=finished))


def opened() -> tuple[RpcClient, Peer]:
    client, peer = RpcClient(), Peer()
    assert client.receive_data(peer.accept(client.connect())) == [Opened()]
    return client, peer


def feed_bytewise(client: RpcClient, data: bytes) -> list[RpcEvent]:
    """One byte at a time: framing never depends on how reads split the stream."""
    events: list[RpcEvent] = []
    for i in range(len(data)):
        events += client.receive_data(data[i : i + 1])
    return events


def test_a_request_is_answered_by_its_id_and_its_result_is_taken() -> None:
    client, peer = opened()
    first, data = client.request("thread/read", {"threadId": "t1"})
    second, more = client.request("initialize", {})
    assert (first, second) == (1, 2)
    assert peer.read_json(data + more) == [
        {"jsonrpc": "2.0", "id": 1, "method": "thread/read", "params": {"threadId": "t1"}},
        {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {}},
    ]
    events = client.receive_data(peer.text({"id": 2, "result": {"ok": True}})
                                 + peer.text({"id": 1, "result": {"thread": {}}}))
    assert events == [Answer(2, {"id": 2, "result": {"ok": True}}),
                      Answer(1, {"id": 1, "result": {"thread": {}}})]
    answer = events[1]
    assert isinstance(answer, Answer)
    assert result_of("thread/read", answer) == {"thread": {}}
    assert client.data_to_send() == b""


def test_an_answer_nobody_waits_for_is_dropped() -> None:
    client, peer = opened()
    request_id, _ = client.request("thread/read", {})
    client.forget(request_id)  # its caller gave up (timeout)
    late = peer.text({"id": request_id, "result": {}})
    never_asked = peer.text({"id": 99, "result": {}})
    assert client.receive_data(late + never_asked) == []


def test_an_error_answer_or_a_result_that_is_no_object_raises() -> None:
    with pytest.raises(RpcProtocolError, match=r"initialize: \{'code': -1\}"):
        result_of("initialize", Answer(1, {"id": 1, "error": {"code": -1}}))
    with pytest.raises(RpcProtocolError, match="initialize: None"):
        result_of("initialize", Answer(1, {"id": 1, "result": [1]}))


def test_notifications_come_out_in_order_whatever_the_reads() -> None:
    client, peer = opened()
    one = {"jsonrpc": "2.0", "method": "thread/started", "params": {"thread": {"id": "a"}}}
    two = {"jsonrpc": "2.0", "method": "thread/closed", "params": {"threadId": "a"}}
    assert feed_bytewise(client, peer.text(one) + peer.text(two)) == [
        RpcNotification(one), RpcNotification(two)
    ]


def test_a_fragmented_message_is_one_event_and_a_too_long_one_raises() -> None:
    client, peer = opened()
    body = json.dumps({"method": "thread/started", "params": {"n": "x" * 100}})
    data = peer.text(body[:40], finished=False) + peer.text(body[40:])
    assert client.receive_data(data) == [RpcNotification(json.loads(body))]

    small = RpcClient(max_message=64)
    peer = Peer()
    assert small.receive_data(peer.accept(small.connect())) == [Opened()]
    with pytest.raises(RpcProtocolError, match="message too large"):
        small.receive_data(peer.text("[" + " " * 40, finished=False)
                           + peer.text(" " * 40 + "]"))


def test_a_request_from_the_peer_is_refused_with_an_error_answer() -> None:
    client, peer = opened()
    events = client.receive_data(peer.text({"jsonrpc": "2.0", "id": "r7", "method": "x/y"}))
    assert events == []
    assert peer.read_json(client.data_to_send()) == [
        {"jsonrpc": "2.0", "id": "r7",
         "error": {"code": -32601, "message": "not handled by paneward"}}
    ]
    assert client.data_to_send() == b""  # taken once


def test_a_ping_is_answered_with_its_pong() -> None:
    client, peer = opened()
    assert client.receive_data(peer.ws.send(wsproto.events.Ping(payload=b"p1"))) == []
    assert peer.read(client.data_to_send()) == [wsproto.events.Pong(payload=b"p1")]


def test_the_peers_close_is_answered_and_nothing_after_it_is_read() -> None:
    client, peer = opened()
    notice = {"method": "thread/closed", "params": {}}
    data = peer.text(notice) + peer.ws.send(wsproto.events.CloseConnection(code=1000))
    assert client.receive_data(data) == [RpcNotification(notice), RpcClosed()]
    (answer,) = peer.read(client.data_to_send())
    assert isinstance(answer, wsproto.events.CloseConnection)
    assert client.receive_data(b"\x81\x02{}") == []


@pytest.mark.parametrize(
    ("text", "error"),
    [("not json", "not JSON"), ("[1, 2]", "not a JSON object"), ('"x"', "not a JSON object")],
)
def test_a_message_that_is_no_json_object_raises(text: str, error: str) -> None:
    client, peer = opened()
    with pytest.raises(RpcProtocolError, match=error):
        client.receive_data(peer.text(text))


def test_a_broken_frame_closes_the_connection_as_a_protocol_error() -> None:
    client, peer = opened()
    assert client.receive_data(b"\x8f\x00") == [RpcClosed()]  # reserved opcode 0xf
    (close,) = peer.read(client.data_to_send())
    assert isinstance(close, wsproto.events.CloseConnection)
    assert close.code == 1002


def test_a_broken_handshake_answer_raises() -> None:
    client = RpcClient()
    client.connect()
    with pytest.raises(RpcProtocolError):
        client.receive_data(b"garbage\r\n\r\n")


def test_a_refused_handshake_raises_with_its_status() -> None:
    client, peer = RpcClient(), Peer()
    peer.read(client.connect())
    refusal = peer.ws.send(wsproto.events.RejectConnection(status_code=403))
    with pytest.raises(RpcProtocolError, match=r"websocket refused \(403\)"):
        client.receive_data(refusal)


def test_what_arrives_with_the_handshakes_answer_follows_opened() -> None:
    client, peer = RpcClient(), Peer()
    notice = {"method": "thread/started", "params": {}}
    data = peer.accept(client.connect()) + peer.text(notice)
    assert client.receive_data(data) == [Opened(), RpcNotification(notice)]


def test_the_first_handshake_loads_no_module() -> None:
    """The first daemon's handshake is the one a fresh paneward makes: nothing it needs is
    imported only then (wsproto's idna codec for the Host header, among others). A fresh
    interpreter, so that no other test has imported it already."""
    code = (
        "import sys\n"
        "from actors.harnesses.codex.jsonrpc import RpcClient\n"
        "before = set(sys.modules)\n"
        "RpcClient().connect()\n"
        "print(sorted(set(sys.modules) - before))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip() == "[]"
