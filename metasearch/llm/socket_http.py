"""HTTP/1.1 on a unix socket: the server a job's LLM gateway listens with (see ``gateway``).

Each request is answered by a ``handle(method, path, body)`` callable, on its own thread: with
``(status, JSON body)``, or with a ``Stream`` of server-sent events relayed chunk by chunk (the connection
closes when it ends, and closing the stream's iterator lets its owner account for it even when the client
went away). A handler that raises is answered 500 with the error, never left hanging; a body over
``max_request_bytes`` is refused 413 unread.
"""

from __future__ import annotations

import json
import logging
import socketserver
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

log = logging.getLogger(__name__)


class UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    request_queue_size = 256


@dataclass
class Stream:
    """A streamed answer: the upstream's server-sent events, relayed chunk by chunk."""

    chunks: Iterator[bytes]


Handle = Callable[[str, str, bytes], tuple[int, bytes] | Stream]
"""``(method, path, body) -> (status, JSON body) | Stream``."""


def error_reply(status: int, message: str, *, kind: str = "gateway_error") -> tuple[int, bytes]:
    """A JSON error answer in the OpenAI format (``error.message``, ``error.type``, ``error.code``)."""
    return status, json.dumps({"error": {"message": message, "type": kind, "code": kind}}).encode()


def handler_for(handle: Handle, *, name: str, max_request_bytes: int) -> type[BaseHTTPRequestHandler]:
    """A request handler class that answers each request with ``handle(method, path, body)``; ``name`` labels
    its log lines."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def address_string(self) -> str:  # a unix socket peer has no address
            return "sandbox"

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("%s: " + format, name, *args)

        def do_GET(self) -> None:
            self._safely("GET", b"")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > max_request_bytes:
                self._reply(*error_reply(413, f"request over {max_request_bytes} bytes"))
                self.close_connection = True
                return
            self._safely("POST", self.rfile.read(length))

        def _safely(self, method: str, body: bytes) -> None:
            try:
                answer = handle(method, self.path, body)
            except Exception as exc:  # a bug must not leave the client without an answer
                log.exception("%s: %s %s failed", name, method, self.path)
                answer = error_reply(500, f"gateway error: {type(exc).__name__}: {exc}")
            if isinstance(answer, Stream):
                self._stream(answer)
            else:
                self._reply(*answer)

        def _stream(self, stream: Stream) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")  # the body ends when the connection does
            self.end_headers()
            self.close_connection = True
            try:
                for chunk in stream.chunks:
                    self.wfile.write(chunk)
                    self.wfile.flush()
            except OSError:  # the agent went away: closing the generator still meters the call
                pass
            finally:
                close = getattr(stream.chunks, "close", None)
                if callable(close):
                    close()

        def _reply(self, status: int, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler
