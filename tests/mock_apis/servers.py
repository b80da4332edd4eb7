"""Loopback mocks of the Anthropic Messages API and the OpenAI Responses API (SSE).

Enough for the real Claude Code 2.1.332 and Codex 0.171.0 CLIs to run a turn. The last user
message picks the answer (reference/real-harnesses.md §3):

- ``WRITE``: a shell tool call ``echo hi > hi.txt`` (Claude in ``--permission-mode manual``
  asks permission; Codex is told ``sandbox_permissions: require_escalated``, so it asks too);
  the tool result then gets a short final answer;
- ``SLOW``: the stream starts and then stalls until :meth:`MockServer.close` (the test presses
  Esc meanwhile);
- anything else: a one-line text answer.

Both run on ``ThreadingHTTPServer`` threads; :meth:`MockServer.close` releases stalled
streams and joins the server thread.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["MockServer", "anthropic_server", "openai_server"]

STALL_S = 60.0


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _texts(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(block.get("text", "")) for block in content if isinstance(block, dict)
        )
    return ""


class MockServer:
    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.release = threading.Event()
        self.requests: list[dict[str, Any]] = []
        #: Set when a stream starts stalling (a SLOW turn is under way); tests clear it.
        self.stalled = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.httpd.mock = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=10)


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    @property
    def mock(self) -> MockServer:
        return self.server.mock  # type: ignore[attr-defined, no-any-return]

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        self.mock.requests.append(body)
        return body if isinstance(body, dict) else {}

    def _stream(self, chunks: Iterator[bytes]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        try:
            for chunk in chunks:
                self.wfile.write(chunk)
                self.wfile.flush()
        except OSError:
            pass  # the CLI hung up (Esc): fine

    def do_GET(self) -> None:
        self.send_response(404)
        self.send_header("content-length", "0")
        self.end_headers()


class _Anthropic(_Handler):
    def do_POST(self) -> None:
        if not self.path.startswith("/v1/messages"):
            self.do_GET()
            return
        body = self._body()
        messages = body.get("messages") or [{}]
        last = messages[-1]
        content = last.get("content")
        tool_result = isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content
        )
        # The prompt may not be the last message: in a git repository Claude Code 2.1.332
        # sends the prompt, then an environment message. The newest message of the turn that
        # names a keyword decides.
        text = _texts(content)
        for message in reversed(messages):
            if not isinstance(message, dict) or message.get("role") == "assistant":
                break
            words = _texts(message.get("content"))
            if "SLOW" in words or "WRITE" in words:
                text = words
                break
        # Claude may put a new prompt in the same user message as an earlier tool result.
        if "SLOW" in text:
            self._stream(self._text("Thinking slowly.", stall=True))
        elif tool_result:
            self._stream(self._text("Wrote hi.txt."))
        elif "WRITE" in text:
            self._stream(self._tool())
        else:
            self._stream(self._text("Hello from the mock Anthropic API."))

    def _start(self) -> bytes:
        return _sse("message_start", {"type": "message_start", "message": {
            "id": "msg_mock", "type": "message", "role": "assistant",
            "model": "claude-opus-5-5", "content": [], "stop_reason": None,
            "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}})

    def _end(self, reason: str) -> Iterator[bytes]:
        yield _sse("message_delta", {"type": "message_delta", "delta": {
            "stop_reason": reason, "stop_sequence": None}, "usage": {"output_tokens": 5}})
        yield _sse("message_stop", {"type": "message_stop"})

    def _text(self, text: str, *, stall: bool = False) -> Iterator[bytes]:
        yield self._start()
        yield _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "text", "text": ""}})
        if stall:
            yield b": stalling\n\n"
            self.mock.stalled.set()
            self.mock.release.wait(STALL_S)
        yield _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": {"type": "text_delta", "text": text}})
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        yield from self._end("end_turn")

    def _tool(self) -> Iterator[bytes]:
        yield self._start()
        yield _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "tool_use",
                                                             "id": "toolu_mock1",
                                                             "name": "Bash", "input": {}}})
        args = {"command": "echo hi > hi.txt", "description": "Write hi.txt"}
        yield _sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
            "type": "input_json_delta", "partial_json": json.dumps(args)}})
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        yield from self._end("tool_use")


class _OpenAI(_Handler):
    def do_POST(self) -> None:
        if not self.path.startswith("/v1/responses"):
            self.do_GET()
            return
        body = self._body()
        items = body.get("input") or [{}]
        last = items[-1] if isinstance(items, list) and items else {}
        if isinstance(last, dict) and last.get("type") == "function_call_output":
            self._stream(self._message("Command output received; wrote hi.txt."))
            return
        text = _texts(last.get("content")) if isinstance(last, dict) else ""
        if "WRITE" in text:
            self._stream(self._function_call())
        elif "SLOW" in text:
            self._stream(self._message("Slow answer.", stall=True))
        else:
            self._stream(self._message("Hello from the mock OpenAI API."))

    def _created(self) -> bytes:
        return _sse("response.created", {"type": "response.created", "response": {
            "id": "resp_mock", "object": "response", "status": "in_progress", "output": []}})

    def _completed(self) -> bytes:
        usage = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
                 "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens_details": {"reasoning_tokens": 0}}
        return _sse("response.completed", {"type": "response.completed", "response": {
            "id": "resp_mock", "object": "response", "status": "completed", "output": [],
            "usage": usage}})

    def _message(self, text: str, *, stall: bool = False) -> Iterator[bytes]:
        yield self._created()
        if stall:
            yield b": stalling\n\n"
            self.mock.stalled.set()
            self.mock.release.wait(STALL_S)
        item = {"type": "message", "id": "msg_mock", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
        yield _sse("response.output_item.done", {"type": "response.output_item.done",
                                                 "output_index": 0, "item": item})
        yield self._completed()

    def _function_call(self) -> Iterator[bytes]:
        yield self._created()
        args = {"cmd": "echo hi > hi.txt", "sandbox_permissions": "require_escalated",
                "justification": "Allow writing hi.txt outside the sandbox?"}
        item = {"type": "function_call", "id": "fc_mock", "call_id": "call_mock1",
                "name": "exec_command", "arguments": json.dumps(args), "status": "completed"}
        yield _sse("response.output_item.done", {"type": "response.output_item.done",
                                                 "output_index": 0, "item": item})
        yield self._completed()


def anthropic_server() -> MockServer:
    return MockServer(_Anthropic)


def openai_server() -> MockServer:
    return MockServer(_OpenAI)
