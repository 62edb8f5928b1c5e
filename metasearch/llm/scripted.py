"""A scripted OpenAI-compatible server: real HTTP, canned answers. For tests and offline demos.

``ScriptedLLM(script)`` serves ``/v1/chat/completions``, ``/v1/completions`` and ``/v1/models`` on
127.0.0.1. ``script`` is a list of replies, used in order (the last one repeats), or a function of the
request body returning a reply. A reply is the text, or a dict: ``{"content": ..., "status": 503,
"delay_s": 0.2, "raw": b"..."}`` (``raw`` sends those bytes as the body, for malformed-reply tests).
``stream: true`` requests get server-sent events, one per word, and the usage event when
``stream_options.include_usage`` asks for it.
Token counts are whitespace words, so tests can predict them; a reply longer than the request's
``max_tokens`` (or ``max_completion_tokens``) is cut to that many words, with ``finish_reason: length``. Every request is kept in ``requests``.
With ``context_tokens``, like vLLM: ``/v1/models`` reports it as ``max_model_len``, ``POST /tokenize``
counts a request's messages, and a chat request whose prompt and ``max_tokens`` exceed it is refused (400).

Run as a program for demos: ``python -m metasearch.llm.scripted --port 8000 --reply "hello"``.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = str | dict[str, Any]
Script = Sequence[Reply] | Callable[[dict[str, Any]], Reply]


def count_words(value: Any) -> int:
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, list):
        return sum(count_words(v) for v in value)
    if isinstance(value, dict):
        return count_words(value.get("content", ""))
    return 0


class ScriptedLLM:
    def __init__(
        self,
        script: Script = ("OK",),
        *,
        model: str = "scripted",
        delay_s: float = 0.0,
        context_tokens: int | None = None,
    ) -> None:
        self.script = script
        self.context_tokens = context_tokens
        self.model = model
        self.delay_s = delay_s
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._next = 0
        self._server: ThreadingHTTPServer | None = None
        self._port: int | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self, port: int = 0, host: str = "127.0.0.1") -> ScriptedLLM:
        handler = _handler_for(self)
        self._server = ThreadingHTTPServer((host, port), handler)
        self._port = int(self._server.server_address[1])
        self._server.daemon_threads = True
        self._server.request_queue_size = 512
        self._thread = threading.Thread(target=self._server.serve_forever, name="scripted-llm", daemon=True)
        self._thread.start()
        return self

    @property
    def port(self) -> int:
        """The port it listens (or last listened) on."""
        assert self._port is not None, "not started"
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ScriptedLLM:
        return self.start() if self._server is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- replies ----------------------------------------------------------------------------------

    def reply_for(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.requests.append(body)
            script = self.script
            if not callable(script):
                reply: Reply = script[min(self._next, len(script) - 1)]
                self._next += 1
        if callable(script):  # outside the lock: a script may block (concurrency tests)
            reply = script(body)
        return {"content": reply} if isinstance(reply, str) else dict(reply)


def _handler_for(llm: ScriptedLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                card: dict[str, Any] = {"id": llm.model, "object": "model"}
                if llm.context_tokens:
                    card["max_model_len"] = llm.context_tokens
                self._json(200, {"object": "list", "data": [card]})
            elif self.path in ("/health", "/v1/health"):
                self._json(200, {"status": "ok"})
            else:
                self._json(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                self._json(400, {"error": {"message": "body is not JSON"}})
                return
            path = self.path.rstrip("/")
            if path == "/tokenize" and llm.context_tokens:
                count = count_words(body.get("messages") or body.get("prompt"))
                self._json(200, {"count": count, "max_model_len": llm.context_tokens, "tokens": []})
                return
            if llm.context_tokens and path.endswith("chat/completions"):
                wanted = count_words(body.get("messages")) + int(body.get("max_tokens") or 0)
                if wanted > llm.context_tokens:
                    message = (
                        f"This model's maximum context length is {llm.context_tokens} tokens; asked {wanted}"
                    )
                    self._json(400, {"error": {"message": message}})
                    return
            if path not in ("/v1/chat/completions", "/v1/completions"):
                self._json(404, {"error": {"message": f"no route {self.path}"}})
                return
            with llm._lock:
                llm.in_flight += 1
                llm.max_in_flight = max(llm.max_in_flight, llm.in_flight)
            try:
                reply = llm.reply_for(body)
                time.sleep(float(reply.get("delay_s", llm.delay_s)))
                self._answer(path, body, reply)
            finally:
                with llm._lock:
                    llm.in_flight -= 1

        def _answer(self, path: str, body: dict[str, Any], reply: dict[str, Any]) -> None:
            if "raw" in reply:
                raw = reply["raw"]
                self._send(
                    int(reply.get("status", 200)), raw if isinstance(raw, bytes) else str(raw).encode()
                )
                return
            status = int(reply.get("status", 200))
            if status != 200:
                self._json(status, {"error": {"message": reply.get("content") or f"scripted HTTP {status}"}})
                return
            text = str(reply.get("content", ""))
            cap = body.get("max_completion_tokens") or body.get("max_tokens")
            if isinstance(cap, int) and len(text.split()) > cap:  # as a real server does: stop at the cap
                text, reply = " ".join(text.split()[:cap]), {**reply, "finish_reason": "length"}
            chat = path.endswith("chat/completions")
            prompt = count_words(body.get("messages") if chat else body.get("prompt"))
            completion = count_words(text)
            if body.get("stream"):
                self._stream(body, chat, text, prompt, completion)
                return
            choice: dict[str, Any] = {"index": 0, "finish_reason": reply.get("finish_reason", "stop")}
            if chat:
                choice["message"] = {"role": "assistant", "content": text}
            else:
                choice["text"] = text
            self._json(
                200,
                {
                    "id": f"scripted-{len(llm.requests)}",
                    "object": "chat.completion" if chat else "text_completion",
                    "created": int(time.time()),
                    "model": body.get("model") or llm.model,
                    "choices": [choice],
                    "usage": {
                        "prompt_tokens": prompt,
                        "completion_tokens": completion,
                        "total_tokens": prompt + completion,
                    },
                },
            )

        def _stream(self, body: dict[str, Any], chat: bool, text: str, prompt: int, completion: int) -> None:
            """Server-sent events, one per word, then (when asked for) the usage event, then [DONE]."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            kind = "chat.completion.chunk" if chat else "text_completion"
            words = text.split(" ")
            for i, word in enumerate(words):
                piece = word if i == len(words) - 1 else word + " "
                choice: dict[str, Any] = {"index": 0, "finish_reason": None}
                choice.update({"delta": {"content": piece}} if chat else {"text": piece})
                self._event({"object": kind, "model": body.get("model") or llm.model, "choices": [choice]})
            self._event({"object": kind, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            if (body.get("stream_options") or {}).get("include_usage"):
                usage = {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                }
                self._event({"object": kind, "choices": [], "usage": usage})
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def _event(self, data: dict[str, Any]) -> None:
            self.wfile.write(
                b"data: " + json.dumps({"id": "scripted", "created": 0, **data}).encode() + b"\n\n"
            )
            self.wfile.flush()

        def _json(self, status: int, data: dict[str, Any]) -> None:
            self._send(status, json.dumps(data).encode())

        def _send(self, status: int, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="A scripted OpenAI-compatible server (offline demos, tests)."
    )
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--reply", action="append", help="a reply (repeat for a sequence; the last repeats)")
    parser.add_argument("--replies-file", help="a JSON list of replies")
    parser.add_argument("--model", default="scripted")
    args = parser.parse_args(argv)
    replies: list[Reply] = list(args.reply or [])
    if args.replies_file:
        with open(args.replies_file) as f:
            replies.extend(json.load(f))
    llm = ScriptedLLM(replies or ["OK"], model=args.model).start(args.port)
    print(f"scripted OpenAI-compatible server at {llm.base_url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        llm.stop()


if __name__ == "__main__":
    main()
