"""The per-job LLM gateway: an HTTP proxy on a unix socket that a sandbox mounts.

A sandbox has no network and no secrets. Its only way to a model is the socket this gateway listens on
(mounted at ``/run/metasearch/llm.sock``). The gateway forwards ``POST /v1/chat/completions``,
``POST /v1/completions`` and ``GET /v1/models`` to the upstream endpoint with the key added, sets the
configured model (whatever the agent names: it is the one the budget is priced at), meters tokens per job
against ``TokenMeter`` budgets (each call reserves its worst case first, see ``worst_case``: every completion
it can produce, each ``max_tokens`` clipped to its share of the room left, so no budget is ever passed; a
call that does not fit is a 403 with a message the agent can read), and appends every call to the job's
transcript. An upstream that spends more than reserved is charged what it reports, logged and counted.
Streamed calls (``stream: true``) are relayed event by event; the gateway asks the upstream for the
final usage event and charges it when the stream ends.

Each request is handled on its own thread with a pooled HTTP client, so an agent's parallel calls (and
all jobs' calls) reach the upstream at once. Upstream outages are retried with backoff; a call that still
fails is a 502 to the agent and counted in ``upstream_failures``, which the runner turns into an
infrastructure error for the job. Request and response sizes are bounded.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from metasearch.llm.socket_http import Stream, UnixHTTPServer, error_reply, handler_for
from metasearch.llm.usage import BudgetExhausted, Hold, Prices, TokenMeter
from metasearch.llm.worst_case import cap_completions, worst_case

log = logging.getLogger(__name__)

SOCKET_DIR = "/run/metasearch"
SOCKET_PATH = f"{SOCKET_DIR}/llm.sock"
FORWARDER_PATH = f"{SOCKET_DIR}/forwarder.py"
FORWARDER_SOURCE = Path(__file__).with_name("forwarder.py")
ROUTES = {
    ("POST", "/chat/completions"),
    ("POST", "/completions"),
    ("GET", "/models"),
}
RETRY_STATUS = {429, 500, 502, 503, 504}
TRANSCRIPT_CHARS = 20_000


class Gateway:
    """One job's gateway. ``start()`` creates the socket in a fresh directory (``mount_dir``, which the
    sandbox mounts at ``/run/metasearch``, with ``forwarder.py`` beside the socket); ``stop()`` removes it."""

    def __init__(
        self,
        upstream_base_url: str,
        *,
        job_id: str,
        meter: TokenMeter | None = None,
        api_key: str | None = None,
        model: str | None = None,
        prices: Prices | None = None,
        transcript_path: Path | None = None,
        http: httpx.Client | None = None,
        retries: int = 4,
        backoff_s: float = 0.5,
        timeout_s: float = 600.0,
        max_request_bytes: int = 8_000_000,
        max_response_bytes: int = 8_000_000,
        context_tokens: int | None = None,
    ) -> None:
        self.upstream = upstream_base_url.rstrip("/")
        # The served context: a call that names no completion cap is reserved that much, and sent without
        # one while the room left covers it (the server's own limit, context minus prompt, then bounds it).
        self.context_tokens = context_tokens
        self.job_id = job_id
        self.meter = meter or TokenMeter()
        self.api_key = api_key
        self.model = model
        self.prices = prices  # the model's, when the study has several (else the meter's)
        self.transcript_path = transcript_path
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_request_bytes = max_request_bytes
        self.max_response_bytes = max_response_bytes
        self._own_http = http is None
        self.http = http or httpx.Client(timeout=timeout_s, limits=httpx.Limits(max_connections=256))
        self.calls = 0
        self.upstream_failures = 0
        self.last_upstream_error: str | None = None
        self.budget_refusals = 0
        self.study_refusals = 0
        self.overruns = 0  # calls the upstream charged more for than they reserved
        self._lock = threading.Lock()
        self._server: UnixHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.mount_dir: Path | None = None

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> Gateway:
        # Short path: unix socket paths are limited to 107 bytes.
        self.mount_dir = Path(tempfile.mkdtemp(prefix="msgw-", dir="/tmp"))
        self.mount_dir.chmod(0o755)
        shutil.copyfile(FORWARDER_SOURCE, self.mount_dir / "forwarder.py")
        (self.mount_dir / "forwarder.py").chmod(0o644)
        self._server = UnixHTTPServer(
            str(self.socket_path),
            handler_for(self.handle, name=f"gateway {self.job_id}", max_request_bytes=self.max_request_bytes),
        )
        os.chmod(self.socket_path, 0o777)  # the sandbox's unprivileged user connects to it
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=f"gateway-{self.job_id}", daemon=True
        )
        self._thread.start()
        return self

    @property
    def socket_path(self) -> Path:
        assert self.mount_dir is not None, "gateway not started"
        return self.mount_dir / "llm.sock"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._own_http:
            self.http.close()
        if self.mount_dir is not None:
            shutil.rmtree(self.mount_dir, ignore_errors=True)

    def __enter__(self) -> Gateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def usage(self) -> Any:
        return self.meter.job(self.job_id)

    # -- forwarding -------------------------------------------------------------------------------

    def handle(self, method: str, path: str, body: bytes) -> tuple[int, bytes] | Stream:
        """Serve one request from the sandbox: (status, JSON body), or a Stream of server-sent events."""
        route = path.split("?", 1)[0].rstrip("/")
        route = route[3:] if route.startswith("/v1/") else route
        if (method, route) not in ROUTES:
            return error_reply(
                404, f"the gateway serves {sorted(r for _, r in ROUTES)} under /v1, not {method} {path}"
            )
        if method == "GET":
            return self._forward(method, route, None, None)
        if len(body) > self.max_request_bytes:
            return error_reply(413, f"request over {self.max_request_bytes} bytes")
        try:
            request = json.loads(body)
            if not isinstance(request, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            return error_reply(400, f"request body is not a JSON object: {exc}")
        if self.model:  # another model would be metered at this one's price
            request["model"] = self.model
        try:
            ask = worst_case(route, request)
        except ValueError as exc:
            return error_reply(400, str(exc), kind="invalid_request_error")
        uncapped = ask.max_completion is None and bool(self.context_tokens)
        if uncapped:
            ask = dataclasses.replace(ask, max_completion=self.context_tokens)
        try:
            hold = self.meter.reserve(self.job_id, *ask.reservation())
        except BudgetExhausted as exc:
            with self._lock:
                self.budget_refusals += 1
                self.study_refusals += exc.scope == "study"
            many = f"; the call asks for {ask.completions} completions (n, best_of, prompts)"
            message = str(exc) + (many if ask.completions > 1 else "")
            return error_reply(403, message, kind="token_budget_exhausted")
        if hold.max_completion is not None:
            granted = ask.per_completion(hold.max_completion)
            if not (uncapped and granted >= (self.context_tokens or 0)):
                cap_completions(request, granted)
        try:
            if request.get("stream"):
                # Ask for the usage chunk at the end of the stream: it is what the meter charges.
                request["stream_options"] = {**(request.get("stream_options") or {}), "include_usage": True}
                return self._forward_stream(route, request, hold)
            return self._forward(method, route, request, body, hold)
        except BaseException:
            self.meter.release(hold)
            raise

    def _forward(
        self,
        method: str,
        route: str,
        request: dict[str, Any] | None,
        raw: bytes | None,
        hold: Hold | None = None,
    ) -> tuple[int, bytes]:
        headers = self._headers()
        payload = json.dumps(request).encode() if request is not None else None
        started = time.monotonic()
        error = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(min(self.backoff_s * 2 ** (attempt - 1), 30.0))
            try:
                status, data = self._send(method, self.upstream + route, payload, headers)
            except httpx.TransportError as exc:
                error = f"{type(exc).__name__}: {exc}"
                continue
            except _TooLarge:
                return self._record(
                    route,
                    request,
                    502,
                    error_reply(502, f"upstream reply over {self.max_response_bytes} bytes")[1],
                    started,
                    hold,
                )
            if status in RETRY_STATUS:
                error = f"HTTP {status}: {data[:200].decode('utf-8', 'replace')}"
                continue
            return self._record(route, request, status, data, started, hold)
        return self._upstream_failed(route, request, error, started, hold)

    def _upstream_failed(
        self, route: str, request: dict[str, Any] | None, error: str, started: float, hold: Hold | None
    ) -> tuple[int, bytes]:
        if hold is not None:
            self.meter.release(hold)
        with self._lock:
            self.upstream_failures += 1
            self.last_upstream_error = error
        message = f"LLM upstream failed after {self.retries + 1} attempts: {error}"
        return self._record(
            route, request, 502, error_reply(502, message, kind="upstream_unavailable")[1], started
        )

    def _forward_stream(self, route: str, request: dict[str, Any], hold: Hold) -> tuple[int, bytes] | Stream:
        """Open the upstream stream, retrying until its first byte (after that nothing can be retried)."""
        payload = json.dumps(request).encode()
        started = time.monotonic()
        error = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(min(self.backoff_s * 2 ** (attempt - 1), 30.0))
            try:
                upstream = self.http.build_request(
                    "POST", self.upstream + route, content=payload, headers=self._headers()
                )
                response = self.http.send(upstream, stream=True)
            except httpx.TransportError as exc:
                error = f"{type(exc).__name__}: {exc}"
                continue
            if response.status_code != 200:
                data = response.read()[: self.max_response_bytes]
                response.close()
                if response.status_code in RETRY_STATUS:
                    error = f"HTTP {response.status_code}: {data[:200].decode('utf-8', 'replace')}"
                    continue
                return self._record(route, request, response.status_code, data, started, hold)
            return Stream(self._relay(route, request, response, started, hold))
        return self._upstream_failed(route, request, error, started, hold)

    def _relay(
        self, route: str, request: dict[str, Any], response: httpx.Response, started: float, hold: Hold
    ) -> Iterator[bytes]:
        """Pass the events through as they come; meter and record the call when the stream ends.

        The call is charged before the final ``[DONE]`` event is passed on, so an agent that has read
        its whole answer always sees the budget that answer spent (and so does its next call).
        """
        size = 0
        usage: dict[str, Any] = {}
        text: list[str] = []
        pending = b""
        status = 200
        charged = False

        def charge() -> None:
            nonlocal charged
            charged = True
            prompt = int(usage.get("prompt_tokens") or 0)
            completion = int(usage.get("completion_tokens") or 0)
            if not usage:  # no usage chunk: estimate, so a stream never spends the budget for free
                prompt, completion = len(json.dumps(request)) // 4, len("".join(text)) // 4 + 1
            self._settle(hold, prompt, completion)
            with self._lock:
                self.calls += 1
            self._transcript(route, request, status, started, prompt, completion, "".join(text))

        try:
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > self.max_response_bytes:
                    status = 502
                    message = f"upstream stream over {self.max_response_bytes} bytes; cut off by the gateway"
                    charge()
                    yield b"data: " + error_reply(502, message)[1] + b"\n\n"
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip() == b"data: [DONE]" and not charged:
                        charge()
                        continue
                    event = _sse_data(line)
                    if event is not None:
                        usage = event.get("usage") or usage
                        for choice in event.get("choices") or ():
                            piece = (choice.get("delta") or {}).get("content") or choice.get("text") or ""
                            text.append(str(piece))
                yield chunk
        finally:
            response.close()
            if not charged:  # the stream broke off, or the agent went away before the end
                charge()

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def _send(
        self, method: str, url: str, payload: bytes | None, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        with self.http.stream(method, url, content=payload, headers=headers) as response:
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > self.max_response_bytes:
                    raise _TooLarge
                chunks.append(chunk)
            return response.status_code, b"".join(chunks)

    def _record(
        self,
        route: str,
        request: dict[str, Any] | None,
        status: int,
        data: bytes,
        started: float,
        hold: Hold | None = None,
    ) -> tuple[int, bytes]:
        prompt = completion = 0
        settled = False
        if status == 200 and request is not None:
            try:
                reply = json.loads(data)
                if not isinstance(reply, dict) or not reply.get("choices"):
                    raise ValueError("no choices")
                usage = reply.get("usage") or {}
                prompt = int(usage.get("prompt_tokens") or 0)
                completion = int(usage.get("completion_tokens") or 0)
                if not usage:  # a server that reports no usage still spends the budget: estimate
                    prompt, completion = len(json.dumps(request)) // 4, len(data) // 4
                if hold is None:
                    self.meter.charge(self.job_id, prompt, completion, prices=self.prices)
                else:
                    self._settle(hold, prompt, completion)
                settled = True
            except (ValueError, AttributeError, TypeError) as exc:
                status, data = error_reply(502, f"malformed upstream reply ({exc}): {data[:200]!r}")
        if hold is not None and not settled:  # refused or unusable: nothing was spent
            self.meter.release(hold)
        with self._lock:
            self.calls += 1
        self._transcript(route, request, status, started, prompt, completion, data.decode("utf-8", "replace"))
        return status, data

    def _settle(self, hold: Hold, prompt: int, completion: int) -> None:
        """Charge what the upstream reports, even past the reservation (the tokens are spent): the caps
        then refuse the next call, and the overrun is logged and counted rather than lost."""
        self.meter.settle(hold, prompt, completion, prices=self.prices)
        if hold.key and prompt + completion > hold.tokens:  # key 0: no cap applied, nothing was reserved
            with self._lock:
                self.overruns += 1
            spent, job = prompt + completion, self.job_id
            log.warning("gateway %s: upstream charged %d tokens, %d reserved", job, spent, hold.tokens)

    def _transcript(
        self,
        route: str,
        request: dict[str, Any] | None,
        status: int,
        started: float,
        prompt: int,
        completion: int,
        response: str,
    ) -> None:
        if self.transcript_path is None:
            return
        line = {
            "ts": time.time(),
            "job_id": self.job_id,
            "route": route,
            "status": status,
            "latency_s": round(time.monotonic() - started, 4),
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "stream": bool(request and request.get("stream")),
            "request": _clip(json.dumps(request) if request is not None else ""),
            "response": _clip(response),
        }
        with self._lock, self.transcript_path.open("a") as f:
            f.write(json.dumps(line) + "\n")


class _TooLarge(Exception):
    pass


def _sse_data(line: bytes) -> dict[str, Any] | None:
    """The JSON object of one ``data:`` line of a server-sent event stream (None for anything else)."""
    line = line.strip()
    if not line.startswith(b"data:"):
        return None
    try:
        event = json.loads(line[5:].strip())
    except ValueError:  # "[DONE]" and anything else that is not JSON
        return None
    return event if isinstance(event, dict) else None


def _clip(text: str) -> str:
    if len(text) <= TRANSCRIPT_CHARS:
        return text
    return (
        text[: TRANSCRIPT_CHARS // 2]
        + f"\n[... {len(text) - TRANSCRIPT_CHARS} chars ...]\n"
        + text[-TRANSCRIPT_CHARS // 2 :]
    )
