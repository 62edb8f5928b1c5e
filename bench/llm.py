"""LLM path benchmark: `python bench/llm.py [--calls 200] [--delay-ms 100] [--json]`.

Against the scripted OpenAI-compatible server with a fixed per-call service time (standing in for a model):

* the gateway's added latency: the same raw HTTP request straight to the server over TCP and through a
  job's gateway over its unix socket, interleaved; medians compared (target: <= 1.05x);
* throughput at 1..32 concurrent callers, through the gateway and through ``LLMClient`` (the host-side
  meta-agent path), as calls/s and as a ratio against 1 caller: near-linear scaling means nothing
  serialises the calls (the server, like vLLM, handles them at once).
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from metasearch.llm.client import LLMClient
from metasearch.llm.gateway import Gateway
from metasearch.llm.scripted import ScriptedLLM
from metasearch.llm.usage import TokenMeter
from metasearch.report import print_bench_rows

BODY = json.dumps({"messages": [{"role": "user", "content": "benchmark prompt with a few words"}]})


class _Unix(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=60)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self._path)


def _post(conn: http.client.HTTPConnection, path: str) -> float:
    started = time.perf_counter()
    try:
        conn.request("POST", path, BODY, {"Content-Type": "application/json"})
        response = conn.getresponse()
        response.read()
        assert response.status == 200, response.status
    finally:
        conn.close()
    return time.perf_counter() - started


def _throughput(call: Callable[[], object], callers: int, calls: int) -> float:
    started = time.perf_counter()
    with ThreadPoolExecutor(callers) as pool:
        list(pool.map(lambda _: call(), range(calls)))
    return calls / (time.perf_counter() - started)


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="metasearch bench llm", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--delay-ms", type=float, default=100.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows: list[dict[str, object]] = []
    with ScriptedLLM(["a reply of several words"], delay_s=args.delay_ms / 1000) as llm:
        with Gateway(llm.base_url, job_id="bench", meter=TokenMeter(), model="scripted") as gw:
            direct, via = [], []
            for _ in range(args.calls // 2):  # interleaved, so machine drift hits both alike
                direct.append(
                    _post(http.client.HTTPConnection("127.0.0.1", llm.port), "/v1/chat/completions")
                )
                via.append(_post(_Unix(str(gw.socket_path)), "/v1/chat/completions"))
            d, v = statistics.median(direct), statistics.median(via)
            rows.append(
                {
                    "measure": "one call, median ms",
                    "baseline": d * 1000,
                    "value": v * 1000,
                    "ratio": v / d,
                    "target": "<= 1.05x (gateway vs direct)",
                }
            )
            rows.append(
                {
                    "measure": "gateway added latency, median ms",
                    "baseline": 0.0,
                    "value": (v - d) * 1000,
                    "ratio": None,
                    "target": "",
                }
            )
            client = LLMClient(llm.base_url, model="scripted", max_retries=0)
            paths: dict[str, Callable[[], object]] = {
                "gateway": lambda: _post(_Unix(str(gw.socket_path)), "/v1/chat/completions"),
                "LLMClient": lambda: client.chat([{"role": "user", "content": "x"}]),
            }
            for name, call in paths.items():
                base = None
                for callers in (1, 4, 16, 32):
                    n = max(callers * 4, min(args.calls, callers * 10))
                    rate = _throughput(call, callers, n)
                    base = base or rate
                    rows.append(
                        {
                            "measure": f"{name}: {callers} concurrent callers, calls/s",
                            "baseline": base,
                            "value": rate,
                            "ratio": rate / base,
                            "target": f"~{callers}x if never serialised",
                        }
                    )
            client.close()
        peak = llm.max_in_flight
    rows.append(
        {
            "measure": "peak concurrent requests at the server",
            "baseline": None,
            "value": float(peak),
            "ratio": None,
            "target": ">= 32",
        }
    )
    if args.json:
        print(json.dumps(rows))
    else:
        print_bench_rows(rows)
    ratio = rows[0]["ratio"]
    return 0 if isinstance(ratio, float) and ratio <= 1.05 and peak >= 32 else 1


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
