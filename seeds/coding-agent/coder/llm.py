"""Chat completions over the gateway's unix socket (stdlib only: the sandbox has no network)."""

from __future__ import annotations

import http.client
import json
import os
import socket


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def chat(messages: list[dict], *, temperature: float = 0.2, timeout: float = 600.0) -> str:
    """One chat completion; raises RuntimeError with the gateway's message on any HTTP error."""
    path = os.environ.get("METASEARCH_LLM_SOCKET", "/run/metasearch/llm.sock")
    conn = _UnixConnection(path, timeout)
    body = json.dumps({"messages": messages, "temperature": temperature})
    try:
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read().decode("utf-8", "replace")
    finally:
        conn.close()
    if response.status != 200:
        raise RuntimeError(f"LLM gateway answered {response.status}: {data[:500]}")
    return json.loads(data)["choices"][0]["message"]["content"] or ""
