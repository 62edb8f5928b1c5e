"""What an agent in a sandbox does to reach the gateway: HTTP over its unix socket (shared by the gateway
tests; a named module, so that importing it never depends on which ``conftest`` was loaded first)."""

from __future__ import annotations

import http.client
import json
import socket
from typing import Any


class UnixHTTP(http.client.HTTPConnection):
    """What an agent in a sandbox does: HTTP over the gateway's unix socket."""

    def __init__(self, path: str, timeout: float = 30.0) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def call(
    socket_path: str, body: dict[str, Any] | None = None, *, path: str = "/v1/chat/completions"
) -> tuple[int, dict[str, Any]]:
    conn = UnixHTTP(socket_path)
    try:
        if body is None:
            conn.request("GET", path)
        else:
            conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def chat_body(text: str = "say hi") -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}
