"""Where the kernels suite's problems come from: a ``TaskSource``, and the built-in task folders.

Every problem is in KernelBench's format (``reference.py`` with ``Model``, ``get_inputs`` and
``get_init_inputs``) and graded by the same scorer; a source says which problems there are and what each
one is. ``KernelsSuite`` (``__init__.py``) owns the rest once: listing, ``prepare``, ``grade``, the memory
a grading run gets and what grading learns. Two sources: ``BuiltinTasks`` (``tasks/``) and
``KernelBenchProblems`` (a KernelBench checkout, ``kernelbench.py``).
"""

from __future__ import annotations

import functools
import subprocess
import sys
import tomllib
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from metasearch.errors import ConfigError
from metasearch.suites.kernels.footprint import machine_mb

HERE = Path(__file__).resolve().parent
TASKS_DIR = HERE / "tasks"
DESCRIPTION = (
    "GPU/CPU kernel optimisation in KernelBench's format. Each task directory holds reference.py: a PyTorch "
    "`class Model(nn.Module)` with `get_inputs()` and `get_init_inputs()`. Write output/solution.py with "
    "`class ModelNew(nn.Module)`: same constructor arguments and forward signature, the same outputs within "
    "the tolerances in task.toml, and as fast as possible. Graded on inputs drawn from secret seeds, on several "
    "shapes, timed by the grader's own clock against the reference (single-threaded on CPU) on fresh inputs "
    "each call; writing into inputs, caching outputs across calls, leaving work for later, touching timers "
    "or PyTorch's functions, calling the reference or using more threads scores 0. Do not import reference.py: it is not importable at grading time."
)


class TaskSource(ABC):
    """The problems of one kernels suite, and how each is graded; built once from its options.

    ``KernelsSuite`` calls these and nothing else; a source holds no grading state. Ids are stable across
    runs and machines. ``content_hash`` digests what was loaded from outside the package (None: nothing).
    Where a source sizes its problems (``estimated_mb``), a problem over ``memory_limit_mb`` or broken by
    the sizes (``too_small``) is left out. Unknown ids raise ConfigError.
    """

    name: str
    """How messages name the source: ``kernels``, ``kernelbench``."""
    description: str
    """The benchmark as a proposer reads it."""
    content_hash: str | None = None
    shows_spec: bool = False
    """True: the agent sees the grader's ``task.toml`` and ``grader_files`` lists the grader's files."""
    needs_gpu: bool = False
    scale: float = 1.0
    """What the problems' input sizes were multiplied by (``too_small`` names the ones it broke)."""
    reps: int
    warmup: int
    grade_timeout_s: float
    solve_timeout_s: float

    @abstractmethod
    def ids(self) -> list[str]:
        """Every loaded problem, in listing order."""

    @abstractmethod
    def select(self, subset: str | None) -> list[str]:
        """The problems ``subset`` names (None: the configured default); ConfigError for an unknown one."""

    @abstractmethod
    def subsets(self, task_id: str) -> tuple[str, ...]: ...

    @abstractmethod
    def on_gpu(self, task_id: str) -> bool:
        """Whether the problem is timed on CUDA (else on one CPU core)."""

    @abstractmethod
    def reference(self, task_id: str) -> bytes:
        """``reference.py`` as the agent sees it and the scorer grades it."""

    @abstractmethod
    def spec(self, task_id: str) -> str:
        """``task.toml`` as the scorer reads it: tolerances, ceiling, GPU need, extra shapes."""

    @abstractmethod
    def statement(self, task_id: str) -> str:
        """``TASK.md``."""

    def needs(self) -> None:
        """ConfigError when this machine cannot grade the problems as configured (no GPU for CUDA)."""
        return None

    def plan_note(self) -> str:
        """Where grading runs, for ``--dry-run``; default none."""
        return ""

    def memory_limit_mb(self) -> int:
        """The most memory one grading run may take: 90% of this machine's unless configured."""
        return int(0.9 * machine_mb())

    def estimated_mb(self) -> Mapping[str, int]:
        """Memory each problem's grading needs, estimated before any is graded; default: not sized (each
        problem starts at the scorer's floor and is never left out)."""
        return {}

    def too_small(self) -> Mapping[str, str]:
        """Problems the configured sizes broke: id -> why; default none."""
        return {}


@functools.cache
def cuda_available() -> bool:
    """A CUDA probe in a subprocess (importing torch's CUDA state here would slow every CLI start)."""
    probe = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    try:
        return subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@functools.cache
def task_specs() -> dict[str, dict[str, Any]]:
    specs = {}
    for folder in sorted(p for p in TASKS_DIR.iterdir() if (p / "task.toml").is_file()):
        specs[folder.name] = tomllib.loads((folder / "task.toml").read_text())
    return specs


class BuiltinTasks(TaskSource):
    """The folders under ``tasks/``: ``reference.py`` and ``task.toml`` each (tolerances, extra shape sets,
    speedup ceiling, GPU need, subsets); ids ``kernels/<folder>``."""

    name = "kernels"
    description = DESCRIPTION
    shows_spec = True

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")
        subset: str = "cpu"
        reps: int = Field(15, ge=3)
        warmup: int = Field(2, ge=0)
        solve_timeout_s: float = Field(900.0, gt=0)
        grade_timeout_s: float = Field(300.0, gt=0)
        device: Literal["task", "cuda"] = "task"
        """``task``: each task on the device its task.toml names; ``cuda``: every task on the GPU."""

    def __init__(self, config: Config) -> None:
        self.config = config
        subsets = {s for spec in task_specs().values() for s in spec["subsets"]} | {"all"}
        if config.subset not in subsets:
            raise ConfigError(
                f"suite.subset: unknown subset {config.subset!r}; allowed: {', '.join(sorted(subsets))}"
            )
        self.needs_gpu = config.subset == "gpu" or config.device == "cuda"
        self.reps, self.warmup = config.reps, config.warmup
        self.grade_timeout_s, self.solve_timeout_s = config.grade_timeout_s, config.solve_timeout_s

    def needs(self) -> None:
        if self.needs_gpu and not cuda_available():
            key = "suite.device: 'cuda'" if self.config.device == "cuda" else "suite.subset: 'gpu'"
            raise ConfigError(f"{key} kernels need a CUDA GPU, and torch sees none here")

    def ids(self) -> list[str]:
        return [f"kernels/{name}" for name in task_specs()]

    def select(self, subset: str | None) -> list[str]:
        wanted = subset or self.config.subset
        gpu_ok = wanted != "all" or cuda_available()  # "gpu" lists them always; needs() checks the GPU
        return [
            f"kernels/{name}"
            for name, spec in task_specs().items()
            if (wanted == "all" or wanted in spec["subsets"]) and (gpu_ok or not spec.get("needs_gpu"))
        ]

    def subsets(self, task_id: str) -> tuple[str, ...]:
        return tuple(task_specs()[_name(task_id)]["subsets"])

    def on_gpu(self, task_id: str) -> bool:
        return bool(task_specs()[_name(task_id)].get("needs_gpu")) or self.config.device == "cuda"

    def reference(self, task_id: str) -> bytes:
        return (TASKS_DIR / _name(task_id) / "reference.py").read_bytes()

    def spec(self, task_id: str) -> str:
        return (TASKS_DIR / _name(task_id) / "task.toml").read_text()

    def statement(self, task_id: str) -> str:
        name = _name(task_id)
        return _statement(name, task_specs()[name], self.on_gpu(task_id))


def _statement(name: str, spec: Mapping[str, Any], on_gpu: bool) -> str:
    where = "on a CUDA GPU" if on_gpu else "on one CPU core (single-threaded)"
    return (
        f"# kernels/{name}\n\n{spec['description']}\n\n{DESCRIPTION}\n\nTimed {where}. Tolerances: atol "
        f"{spec['atol']}, rtol {spec['rtol']}. The sizes in reference.py are the timed ones; other shapes are "
        "checked for correctness too, so do not hard-code sizes.\n"
    )


def _name(task_id: str) -> str:
    name = task_id.split("/", 1)[-1]
    if name not in task_specs():
        raise ConfigError(f"kernels: unknown task {task_id!r}")
    return name
