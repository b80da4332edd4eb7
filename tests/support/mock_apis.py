"""Loopback mocks of the Anthropic Messages API, the OpenAI Responses and Chat Completions APIs
and the Gemini API (SSE).

Enough for the real Claude Code 2.1.332 and Codex 0.171.0 CLIs (Anthropic, Responses), Hermes
Agent 0.19.0, OpenCode 1.18.33 and Pi 0.73.1 (Chat Completions) and Gemini CLI 0.61.0 (Gemini
``streamGenerateContent``) to run a turn. For the first two, the last user message picks the
answer:

- ``WRITE``: a shell tool call ``echo hi > hi.txt`` (Claude in ``--permission-mode manual``
  asks permission; Codex is told ``sandbox_permissions: require_escalated``, so it asks too);
  the tool result then gets a short final answer;
- ``SLOW``: the stream starts and then stalls until :meth:`MockServer.close` (the test presses
  Esc meanwhile);
- ``AGENT`` (Anthropic): an ``Agent`` tool call that starts a background subagent whose prompt
  is ``STALLED subagent``; the subagent's own request (its prompt) stalls until
  :attr:`MockServer.subagent_release` is set, so the subagent keeps working after the turn's
  ``Stop``;
- anything else: a one-line text answer.

For Chat Completions and Gemini: ``TOOL`` -> the offered
shell tool (found by name: ``bash``, ``run_shell_command``, ``terminal``, ...) with ``echo hi``;
``DANGER`` -> the same tool with ``rm -rf ./junkdir`` (the command Gemini and Hermes ask about);
``SLOW`` -> a stream that stalls; a tool result -> a short final answer; anything else, or a
request offering no tools (titles, summaries), a one-line text answer.

All run on ``ThreadingHTTPServer`` threads; :meth:`MockServer.close` releases stalled
streams and joins the server thread.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "SUBAGENT_PROMPT",
    "MockServer",
    "anthropic_server",
    "chat_server",
    "gemini_server",
    "openai_server",
]

STALL_S = 60.0
#: The prompt of the background subagent the ``AGENT`` answer starts (its request stalls).
SUBAGENT_PROMPT = "STALLED subagent: say hello"


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
        #: Set by a test to let the stalled subagent (``AGENT``) finish.
        self.subagent_release = threading.Event()
        #: Set when the subagent's own request starts stalling.
        self.subagent_stalled = threading.Event()
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
        self.subagent_release.set()
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
        # The last user message (Claude may append a `system` message after it).
        users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
        last = users[-1] if users else messages[-1]
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
        if SUBAGENT_PROMPT in text and not tool_result:
            self._stream(self._subagent())
        elif "SLOW" in text:
            self._stream(self._text("Thinking slowly.", stall=True))
        elif tool_result:
            self._stream(self._text("Wrote hi.txt."))
        elif "WRITE" in text:
            self._stream(self._tool())
        elif "AGENT" in text:
            self._stream(self._tool("Agent", {
                "description": "Stalled helper", "prompt": SUBAGENT_PROMPT,
                "subagent_type": "general-purpose", "run_in_background": True,
            }))
        else:
            self._stream(self._text("Hello from the mock Anthropic API."))

    def _subagent(self) -> Iterator[bytes]:
        yield self._start()
        yield _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "text", "text": ""}})
        yield b": stalling\n\n"
        self.mock.subagent_stalled.set()
        self.mock.subagent_release.wait(STALL_S)
        yield _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": {"type": "text_delta", "text": "Helped."}})
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        yield from self._end("end_turn")

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

    def _tool(self, name: str = "Bash", args: dict[str, Any] | None = None) -> Iterator[bytes]:
        yield self._start()
        yield _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "tool_use",
                                                             "id": f"toolu_mock_{name}",
                                                             "name": name, "input": {}}})
        if args is None:
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


_SHELL_TOOLS = ("bash", "run_shell_command", "terminal", "shell", "exec_command", "execute")


def _keyword(text: str) -> str | None:
    for word in ("DANGER", "SLOW", "TOOL"):
        if word in text:
            return word
    return None


def _shell_args(name: str, schema: Any, command: str) -> dict[str, Any]:
    """Arguments for the shell tool ``name`` from its JSON schema: the command goes in
    ``command`` (or the first required string); other required fields get plain values."""
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    required = schema.get("required", []) if isinstance(schema, dict) else []
    key = "command" if "command" in props or not props else next(
        (k for k in required if props.get(k, {}).get("type") == "string"), "command"
    )
    args: dict[str, Any] = {key: command}
    for field in required:
        if field in args:
            continue
        kind = props.get(field, {}).get("type")
        args[field] = {"string": "run it", "integer": 60, "number": 60, "boolean": False}.get(
            str(kind), "x"
        )
    if "description" in props and "description" not in args:
        args["description"] = "Run the command"
    return args


class _Chat(_Handler):
    """OpenAI Chat Completions (``/v1/chat/completions``), streamed or not, with tool calls."""

    def do_POST(self) -> None:
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self.do_GET()
            return
        body = self._body()
        messages = body.get("messages") or []
        last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
        tools = [t.get("function", {}) for t in body.get("tools") or [] if isinstance(t, dict)]
        shell = next((t for n in _SHELL_TOOLS for t in tools if t.get("name") == n), None)
        users = [
            i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"
        ]
        word = _keyword(_texts(messages[users[-1]].get("content")) if users else "")
        # A tool result after the last prompt: the command ran, the turn can end. (Hermes can add
        # messages after the tool result, so "the last message is a tool result" is not enough.)
        answered = any(
            isinstance(m, dict) and m.get("role") == "tool"
            for m in messages[(users[-1] if users else 0) :]
        )
        if answered or last.get("role") == "tool":
            self._answer(body, text="Done: the command ran.")
        elif word == "SLOW" and tools:
            self._answer(body, text="slow answer", stall=True)
        elif word in ("TOOL", "DANGER") and shell is not None:
            command = "echo hi" if word == "TOOL" else "rm -rf ./junkdir"
            args = _shell_args(shell["name"], shell.get("parameters"), command)
            self._answer(body, tool=(shell["name"], args))
        else:
            self._answer(body, text="Hello from the mock chat API.")

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        chunk = {"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1,
                 "model": "mock-model",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if finish is not None:
            chunk["usage"] = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
        return f"data: {json.dumps(chunk)}\n\n".encode()

    def _answer(
        self,
        body: dict[str, Any],
        *,
        text: str | None = None,
        tool: tuple[str, dict[str, Any]] | None = None,
        stall: bool = False,
    ) -> None:
        call = None
        if tool is not None:
            # A fresh id per call: Hermes drops a tool call whose id it has seen before.
            call = {"id": f"call_mock{len(self.mock.requests)}", "type": "function",
                    "function": {"name": tool[0], "arguments": json.dumps(tool[1])}}
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if call is not None:
                message["tool_calls"] = [call]
            reply = {"id": "chatcmpl-mock", "object": "chat.completion", "created": 1,
                     "model": "mock-model",
                     "choices": [{"index": 0, "message": message,
                                  "finish_reason": "tool_calls" if call else "stop"}],
                     "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self._stream(self._chunks(text, call, stall))

    def _chunks(
        self, text: str | None, call: dict[str, Any] | None, stall: bool
    ) -> Iterator[bytes]:
        yield self._chunk({"role": "assistant", "content": ""})
        if stall:
            yield self._chunk({"content": "slow0 "})
            self.mock.stalled.set()
            self.mock.release.wait(STALL_S)
        if call is not None:
            yield self._chunk({"tool_calls": [{"index": 0, **call}]})
            yield self._chunk({}, "tool_calls")
        else:
            yield self._chunk({"content": text})
            yield self._chunk({}, "stop")
        yield b"data: [DONE]\n\n"


class _Gemini(_Handler):
    """The Gemini API (``/v1beta/models/M:streamGenerateContent?alt=sse``, ``:generateContent``,
    ``:countTokens``)."""

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        if ":countTokens" in path:
            self._json({"totalTokens": 5})
            return
        if ":streamGenerateContent" not in path and ":generateContent" not in path:
            self.do_GET()
            return
        body = self._body()
        contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
        parts = contents[-1].get("parts", []) if contents else []
        answered = any(isinstance(p, dict) and "functionResponse" in p for p in parts)
        texts = [
            " ".join(str(p.get("text", "")) for p in c.get("parts", []) if isinstance(p, dict))
            for c in contents
            if c.get("role") == "user"
        ]
        prompt = next((t for t in reversed(texts) if t.strip()), "")
        decls = [
            d
            for tool in body.get("tools") or []
            if isinstance(tool, dict)
            for d in tool.get("functionDeclarations") or []
        ]
        shell = next((d for n in _SHELL_TOOLS for d in decls if d.get("name") == n), None)
        word = _keyword(prompt)
        part: dict[str, Any]
        stall = False
        if answered:
            part = {"text": "Done: the command ran."}
        elif word in ("TOOL", "DANGER") and shell is not None:
            command = "echo hi" if word == "TOOL" else "rm -rf ./junkdir"
            schema = shell.get("parametersJsonSchema") or shell.get("parameters")
            part = {"functionCall": {"name": shell["name"],
                                     "args": _shell_args(shell["name"], schema, command)}}
        elif word == "SLOW" and decls:
            part, stall = {"text": "slow1 "}, True
        else:
            part = {"text": "Hello from the mock Gemini API."}
        if ":generateContent" in path:
            self._json(self._response(part))
            return
        self._stream(self._events(part, stall))

    def _response(self, part: dict[str, Any]) -> dict[str, Any]:
        return {"candidates": [{"content": {"role": "model", "parts": [part]},
                                "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 3,
                                  "totalTokenCount": 8},
                "modelVersion": "gemini-2.5-flash"}

    def _events(self, part: dict[str, Any], stall: bool) -> Iterator[bytes]:
        if stall:
            first = {"candidates": [{"content": {"role": "model", "parts": [{"text": "slow0 "}]},
                                     "index": 0}]}
            yield f"data: {json.dumps(first)}\r\n\r\n".encode()
            self.mock.stalled.set()
            self.mock.release.wait(STALL_S)
        yield f"data: {json.dumps(self._response(part))}\r\n\r\n".encode()

    def _json(self, value: dict[str, Any]) -> None:
        data = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def chat_server() -> MockServer:
    return MockServer(_Chat)


def gemini_server() -> MockServer:
    return MockServer(_Gemini)


def anthropic_server() -> MockServer:
    return MockServer(_Anthropic)


def openai_server() -> MockServer:
    return MockServer(_OpenAI)
