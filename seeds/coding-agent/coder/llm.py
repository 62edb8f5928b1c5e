"""Chat completions for the agent (standard library only).

Inside metasearch's sandbox the only way out is the gateway's unix socket (``METASEARCH_LLM_SOCKET``,
default ``/run/metasearch/llm.sock``). Outside it (production use) set ``OPENAI_BASE_URL`` (and
``OPENAI_API_KEY``, ``OPENAI_MODEL``) to use any OpenAI-compatible endpoint directly.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import urllib.parse


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def _connection(timeout: float) -> tuple[http.client.HTTPConnection, str, dict]:
    """The connection, the path prefix for /chat/completions, and extra headers."""
    socket_path = os.environ.get("METASEARCH_LLM_SOCKET", "/run/metasearch/llm.sock")
    base = os.environ.get("OPENAI_BASE_URL")
    if base and not os.path.exists(socket_path):
        url = urllib.parse.urlsplit(base)
        cls = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
        headers = {"Authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', 'none')}"}
        return cls(url.netloc, timeout=timeout), url.path.rstrip("/"), headers
    return _UnixConnection(socket_path, timeout), "/v1", {}


def chat(
    messages: list[dict],
    *,
    temperature: float = 0.2,
    max_tokens: int | None = None,
    timeout: float = 600.0,
) -> str:
    """One chat completion of at most ``max_tokens`` (None: as long as the endpoint allows); raises
    RuntimeError with the endpoint's message on any HTTP error."""
    conn, prefix, headers = _connection(timeout)
    request: dict = {"messages": messages, "temperature": temperature}
    if max_tokens:
        request["max_tokens"] = max_tokens
    if os.environ.get("OPENAI_MODEL"):
        request["model"] = os.environ["OPENAI_MODEL"]
    try:
        conn.request(
            "POST",
            f"{prefix}/chat/completions",
            json.dumps(request),
            {"Content-Type": "application/json", **headers},
        )
        response = conn.getresponse()
        data = response.read().decode("utf-8", "replace")
    finally:
        conn.close()
    if response.status != 200:
        raise RuntimeError(f"LLM endpoint answered {response.status}: {data[:500]}")
    return json.loads(data)["choices"][0]["message"]["content"] or ""
