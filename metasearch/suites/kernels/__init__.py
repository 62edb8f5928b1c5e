"""``kernels``: make a PyTorch module faster without changing what it computes (KernelBench's format).

Each task is a folder under ``tasks/``: ``reference.py`` (``class Model(nn.Module)`` with ``get_inputs()``
and ``get_init_inputs()``; module-level size constants) and ``task.toml`` (tolerances, extra shape sets,
speedup ceiling, GPU need, subsets). The agent sees ``reference.py``, ``TASK.md`` and ``task.toml`` and writes
``output/solution.py`` holding ``class ModelNew(nn.Module)`` with the same constructor and ``forward``
signatures. Grading runs ``grader/score.py`` (see ``grader/judge.py``) in a fresh sandbox: a judge process
that never loads the candidate measures everything that decides the score, the candidate runs in a worker
that only does what the judge asks, and the inputs come from seeds drawn at grading time.

Subsets: ``cpu`` (8 tasks whose naive reference leaves at least 5x headroom on one CPU core, plus the
``add_control`` task, which is already optimal and must not count as faster), ``smoke``, ``control``,
``gpu`` (tasks that need CUDA; listed only where a CUDA probe succeeds, unless asked for by name) and
``all``. ``device: cuda`` times every selected task on the GPU (a task that needs CUDA always is):
``subset: all, device: cuda`` is the GPU benchmark of the flagship config. Suite metrics (``aggregate``): fast_0, fast_1, fast_2 over all tasks, and the geometric-mean speedup
of the correct, unflagged ones.
"""

from __future__ import annotations

import functools
import math
import subprocess
import sys
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from metasearch.errors import ConfigError
from metasearch.sandboxes.protocol import Mount, Sandbox
from metasearch.suites.grading import run_grader
from metasearch.suites.kernels.footprint import machine_mb
from metasearch.suites.protocol import Suite, Task, TaskResult

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


@functools.cache
def task_specs() -> dict[str, dict[str, Any]]:
    specs = {}
    for folder in sorted(p for p in TASKS_DIR.iterdir() if (p / "task.toml").is_file()):
        specs[folder.name] = tomllib.loads((folder / "task.toml").read_text())
    return specs


@functools.cache
def cuda_available() -> bool:
    """A CUDA probe in a subprocess (importing torch's CUDA state here would slow every CLI start)."""
    probe = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    try:
        return subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


class KernelsSuite(Suite):
    name = "kernels"
    description = DESCRIPTION
    artifact_path = "output"
    needs_docker = False
    needs_gpu = False

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")
        subset: str = "cpu"
        reps: int = Field(15, ge=3)
        warmup: int = Field(2, ge=0)
        solve_timeout_s: float = Field(900.0, gt=0)
        grade_timeout_s: float = Field(300.0, gt=0)
        device: Literal["task", "cuda"] = "task"
        """``task``: each task on the device its task.toml names; ``cuda``: every task on the GPU."""

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or KernelsSuite.Config()
        subsets = {s for spec in task_specs().values() for s in spec["subsets"]} | {"all"}
        if self.config.subset not in subsets:
            raise ConfigError(
                f"suite.subset: unknown subset {self.config.subset!r}; allowed: {', '.join(sorted(subsets))}"
            )
        self.needs_gpu = self.config.subset == "gpu" or self.config.device == "cuda"

    def needs(self) -> None:
        if self.needs_gpu and not cuda_available():
            key = "suite.device: 'cuda'" if self.config.device == "cuda" else "suite.subset: 'gpu'"
            raise ConfigError(f"{key} kernels need a CUDA GPU, and torch sees none here")

    def _on_gpu(self, spec: Mapping[str, Any]) -> bool:
        return bool(spec.get("needs_gpu")) or self.config.device == "cuda"

    def tasks(self, subset: str | None = None) -> Sequence[Task]:
        wanted = subset or self.config.subset
        gpu_ok = wanted != "all" or cuda_available()  # "gpu" lists them always; needs() checks the GPU
        return [
            Task(
                id=f"kernels/{name}",
                suite=self.name,
                statement=_statement(name, spec, self._on_gpu(spec)),
                subsets=tuple(spec["subsets"]),
                needs_gpu=self._on_gpu(spec),
                timeout_s=self.config.solve_timeout_s,
            )
            for name, spec in task_specs().items()
            if (wanted == "all" or wanted in spec["subsets"]) and (gpu_ok or not spec.get("needs_gpu"))
        ]

    def prepare(self, task_id: str, dest: Path) -> None:
        name = _name(task_id)
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "reference.py").write_text((TASKS_DIR / name / "reference.py").read_text())
        (dest / "task.toml").write_text((TASKS_DIR / name / "task.toml").read_text())
        spec = task_specs()[name]
        (dest / "TASK.md").write_text(_statement(name, spec, self._on_gpu(spec)))
        (dest / "output").mkdir(exist_ok=True)

    def grader_files(self, task_id: str) -> dict[str, str]:
        name = _name(task_id)
        files = {f"grader/{p.name}": p.read_text() for p in sorted((HERE / "grader").glob("*.py"))}
        return {**files, "grader/task.toml": (TASKS_DIR / name / "task.toml").read_text()}

    def grade(self, task_id: str, artifact_dir: Path, sandbox: Sandbox) -> TaskResult:
        name = _name(task_id)
        spec = task_specs()[name]
        artifact_dir.mkdir(parents=True, exist_ok=True)
        device = "cuda" if self._on_gpu(spec) else "cpu"
        return grade_kernel(
            sandbox,
            HERE / "tasks" / name,
            artifact_dir,
            device=device,
            reps=self.config.reps,
            warmup=self.config.warmup,
            timeout_s=self.config.grade_timeout_s,
        )


def grade_kernel(
    sandbox: Sandbox,
    problem_dir: Path,
    artifact_dir: Path,
    *,
    device: str,
    reps: int,
    warmup: int,
    timeout_s: float,
    memory_mb: int = 4096,
    max_memory_mb: int | None = None,
    resized: Callable[[int], None] | None = None,
    inputs: str = "auto",
) -> TaskResult:
    """Grade ``artifact_dir/solution.py`` against the problem folder (``reference.py`` and ``task.toml``)
    with the scorer in ``grader/``, in a fresh sandbox run: the one way every kernels-format suite grades.

    A run whose memory leaves the candidate less room than the reference needs (the judge measures it;
    see ``grader/room.py``) is a grader fault with ``need_mb``: ``grading.run_grader`` runs it again with
    that (at most twice), up to ``max_memory_mb`` (default 90% of this machine), and ``resized`` is told
    the new size. ``inputs``: who makes the timed inputs (``grader/score.py --inputs``; auto: drawn by each
    worker on a GPU). Raises ``TaskUnfit`` when the grader itself failed (a broken reference, the judge
    out of memory or time) or cannot fit: no candidate is charged for it."""
    # Docker runs the grading alone in its container, whose CPU counter then covers every process the
    # candidate starts; elsewhere the judge follows the candidate's process tree.
    accounting = "container" if sandbox.name == "docker" else "process"
    command = [
        "python3", "-I", "/grader/score.py", "--task-dir", "/problem", "--candidate", "/artifact/solution.py",
        "--device", device, "--reps", str(reps), "--warmup", str(warmup), "--timeout", str(timeout_s),
        "--accounting", accounting, "--inputs", inputs,
    ]  # fmt: skip
    mounts = [
        Mount(HERE / "grader", "/grader"),
        Mount(problem_dir, "/problem"),
        Mount(artifact_dir, "/artifact"),
    ]
    return run_grader(
        sandbox,
        command,
        mounts,
        timeout_s=timeout_s + 60,  # the judge keeps its own time: running out of this one is its fault
        what=f"kernels grader on {problem_dir.name}",
        memory_mb=memory_mb,
        max_memory_mb=max_memory_mb or int(0.9 * machine_mb()),
        resized=resized,
    ).task_result()


def aggregate(results: Mapping[str, TaskResult]) -> dict[str, float]:
    """Suite metrics over *all* tasks graded (a task that failed counts as not fast)."""
    n = len(results) or 1
    speedups = [
        r.metrics["speedup"]
        for r in results.values()
        if r.metrics.get("correct") and "speedup" in r.metrics and not r.flags  # flagged numbers are suspect
    ]
    return {
        "fast_0": sum(r.metrics.get("fast_0", 0.0) for r in results.values()) / n,
        "fast_1": sum(r.metrics.get("fast_1", 0.0) for r in results.values()) / n,
        "fast_2": sum(r.metrics.get("fast_2", 0.0) for r in results.values()) / n,
        "geomean_speedup": math.exp(sum(math.log(max(s, 1e-9)) for s in speedups) / len(speedups))
        if speedups
        else 0.0,
        "tasks": float(len(results)),
    }


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
