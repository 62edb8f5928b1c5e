"""``kernels``: make a PyTorch module faster without changing what it computes (KernelBench's format).

Each task is a problem: ``reference.py`` (``class Model(nn.Module)`` with ``get_inputs()`` and
``get_init_inputs()``; module-level size constants) and the scorer's ``task.toml`` (tolerances, extra shape
sets, speedup ceiling, GPU need). The problems come from a task source (``sources.py``): the built-in folders
under ``tasks/`` (the default; ids ``kernels/<folder>``) or a KernelBench checkout (``source: kernelbench``,
``kernelbench.py``; ids ``kernelbench/L<N>/<file>``; the ``kernelbench`` suite name is the same). The agent
writes ``output/solution.py`` holding ``class ModelNew(nn.Module)`` with the same constructor and ``forward``
signatures. Grading runs ``grader/score.py`` (see ``grader/judge.py``) in a fresh sandbox: a judge process
that never loads the candidate measures everything that decides the score, the candidate runs in a worker
that only does what the judge asks, and the inputs come from seeds drawn at grading time.

Built-in subsets: ``cpu`` (8 tasks whose naive reference leaves at least 5x headroom on one CPU core, plus
the ``add_control`` task, which is already optimal and must not count as faster), ``smoke``, ``control``,
``gpu`` (tasks that need CUDA; listed only where a CUDA probe succeeds, unless asked for by name) and
``all``. ``device: cuda`` times every selected task on the GPU (a task that needs CUDA always is):
``subset: all, device: cuda`` is the GPU benchmark of the flagship config. Suite metrics (``aggregate``): fast_0, fast_1, fast_2 over all tasks, and the geometric-mean speedup
of the correct, unflagged ones.
"""

from __future__ import annotations

import logging
import math
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from metasearch.errors import ConfigError
from metasearch.sandboxes.protocol import Mount, Sandbox
from metasearch.suites.grading import run_grader
from metasearch.suites.kernels.footprint import MIN_MB, machine_mb
from metasearch.suites.kernels.kernelbench import KernelBenchProblems
from metasearch.suites.kernels.sources import (
    DESCRIPTION,
    HERE,
    TASKS_DIR,
    BuiltinTasks,
    TaskSource,
    cuda_available,
    task_specs,
)
from metasearch.suites.protocol import Suite, Task, TaskResult

logger = logging.getLogger(__name__)
__all__ = [
    "DESCRIPTION",
    "HERE",
    "TASKS_DIR",
    "KernelsSuite",
    "aggregate",
    "cuda_available",
    "grade_kernel",
    "task_specs",
]


class KernelsSuite(Suite):
    """The kernels suite over one task source; it owns listing, ``prepare``, ``grade``, the memory each
    grading run gets and what grading learns (``learned``: a problem's ``grading_mb``)."""

    name = "kernels"
    description = DESCRIPTION
    artifact_path = "output"
    needs_docker = False
    needs_gpu = False  # set per instance from the source

    class Config(BuiltinTasks.Config):
        """The built-in tasks' options. With ``source: kernelbench`` the options are KernelBench's
        (``KernelBenchProblems.Config``) and ``model_validate`` returns those; ``source`` itself is not
        part of either's dump."""

        source: Literal["builtin", "kernelbench"] = Field("builtin", exclude=True)
        """``builtin``: the task folders under ``tasks/``, with the options here; ``kernelbench``: the problems
        of a KernelBench checkout, with the options of ``suite: kernelbench`` in place of these."""

        def __init__(self, **options: Any) -> None:
            if options.get("source") == "kernelbench":  # a constructor cannot return another model
                raise TypeError(
                    "KernelsSuite.Config(source='kernelbench'): build KernelBenchProblems.Config(...) instead, "
                    "or KernelsSuite.Config.model_validate(options) as the config loader does"
                )
            super().__init__(**options)

        @model_validator(mode="wrap")
        @classmethod
        def _by_source(cls, data: Any, handler: Any) -> Any:
            if isinstance(data, Mapping) and data.get("source") == "kernelbench":
                return KernelBenchProblems.Config.model_validate(
                    {k: v for k, v in data.items() if k != "source"}
                )
            return handler(data)

    def __init__(self, config: BuiltinTasks.Config | KernelBenchProblems.Config | None = None) -> None:
        """The source follows the options' model: KernelBench's load that checkout (ConfigError when it is
        not one), anything else the built-in tasks."""
        config = config or self.Config()
        self.config = config
        self.source: TaskSource = (
            KernelBenchProblems(config)
            if isinstance(config, KernelBenchProblems.Config)
            else BuiltinTasks(config)
        )
        self.description = self.source.description
        self.content_hash = self.source.content_hash
        self.needs_gpu = self.source.needs_gpu

    def needs(self) -> None:
        self.source.needs()

    def plan_note(self) -> str:
        """One line for ``--dry-run``: where grading runs, at what size, and what does not fit."""
        note = self.source.plan_note()
        too_big, too_small, scale = self.too_big(), self.source.too_small(), self.source.scale
        if too_big:
            shown = ", ".join(f"{t.split('/', 1)[1]} ({mb} MB)" for t, mb in list(too_big.items())[:5])
            note += (
                f"; {len(too_big)} of {len(self.source.ids())} problems need more than "
                f"{self.memory_limit_mb()} MB to grade and are left out: {shown}"
                f"{', ...' if len(too_big) > 5 else ''} (set suite.scale, or suite.memory_limit_mb on a "
                "larger machine)"
            )
        if too_small:
            shown = ", ".join(t.split("/", 1)[1] for t in list(too_small)[:5])
            note += (
                f"; {len(too_small)} problems fail at scale {scale:g} (their reference runs at "
                f"full size) and are left out: {shown}{', ...' if len(too_small) > 5 else ''}"
            )
        return note

    def memory_limit_mb(self) -> int:
        return self.source.memory_limit_mb()

    def grading_mb(self) -> dict[str, int]:
        """Memory each sized problem's grading run gets: the source's estimate, or what a grading run
        learned it needs when that is more (the fact ``grading_mb``, which the study journals and hands back
        on resume)."""
        learned = self.learned()
        return {
            t: max(mb, int(learned.get(t, {}).get("grading_mb", 0)))
            for t, mb in self.source.estimated_mb().items()
        }

    def too_big(self) -> dict[str, int]:
        """Problems whose grading needs more memory than the limit: task id -> MB needed."""
        limit = self.memory_limit_mb()
        return {t: mb for t, mb in self.grading_mb().items() if mb > limit}

    def too_small(self) -> dict[str, str]:
        """Problems the sizes broke (``scale``): task id -> why."""
        return dict(self.source.too_small())

    def left_out(self) -> dict[str, str]:
        """Problems not offered at all, with the reason: too big for the memory limit, or too small at the
        scale."""
        limit = self.memory_limit_mb()
        out = {t: f"needs {mb} MB to grade, over {limit} MB" for t, mb in self.too_big().items()}
        out.update({t: f"fails at scale {self.source.scale:g}: {why}" for t, why in self.too_small().items()})
        return out

    def reference(self, task_id: str) -> bytes:
        """``reference.py`` of ``task_id`` as the agent sees it and the scorer grades it."""
        return self.source.reference(task_id)

    def tasks(self, subset: str | None = None) -> Sequence[Task]:
        selected = self.source.select(subset)
        left_out = self.left_out()
        if left_out:
            logger.warning(
                "%s: %d problems are left out: %s",
                self.source.name, len(left_out), "; ".join(f"{t}: {why}" for t, why in left_out.items()),
            )  # fmt: skip
        return [
            Task(
                id=task_id,
                suite=self.name,
                statement=self.source.statement(task_id),
                subsets=self.source.subsets(task_id),
                needs_gpu=self.source.on_gpu(task_id),
                timeout_s=self.source.solve_timeout_s,
            )
            for task_id in selected
            if task_id not in left_out
        ]

    def prepare(self, task_id: str, dest: Path) -> None:
        reference = self.source.reference(task_id)
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "reference.py").write_bytes(reference)
        if self.source.shows_spec:
            (dest / "task.toml").write_text(self.source.spec(task_id))
        (dest / "TASK.md").write_text(self.source.statement(task_id))
        (dest / "output").mkdir(exist_ok=True)

    def grader_files(self, task_id: str) -> dict[str, str]:
        if not self.source.shows_spec:
            return {}
        spec = self.source.spec(task_id)
        files = {f"grader/{p.name}": p.read_text() for p in sorted((HERE / "grader").glob("*.py"))}
        return {**files, "grader/task.toml": spec}

    def grade(self, task_id: str, artifact_dir: Path, sandbox: Sandbox) -> TaskResult:
        """The scorer on a problem folder made of the source's ``reference.py`` and ``task.toml``, given the
        memory the problem needs; a grading run that needed more is learned (``grading_mb``), so later
        grades start there. ConfigError for a problem left out (too big for the limit, broken by the
        scale)."""
        reference, spec = self.source.reference(task_id), self.source.spec(task_id)
        sized = self.grading_mb()  # an unsized problem starts at the scorer's floor and is never refused
        learned = int(self.learned().get(task_id, {}).get("grading_mb", 0))
        memory_mb = sized.get(task_id, max(MIN_MB, learned))
        limit = self.memory_limit_mb()
        if task_id in sized and memory_mb > limit:
            raise ConfigError(
                f"{self.source.name}: {task_id} needs about {memory_mb} MB to grade, over "
                f"suite.memory_limit_mb ({limit} MB); grade it smaller with suite.scale"
            )
        if task_id in self.source.too_small():
            raise ConfigError(
                f"{self.source.name}: {task_id} fails at suite.scale {self.source.scale:g} "
                f"({self.source.too_small()[task_id]}); use a larger scale"
            )
        artifact_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="ms-kernel-") as tmp:
            problem_dir = Path(tmp) / task_id.rsplit("/", 1)[-1]  # names the problem in grader messages
            problem_dir.mkdir()
            (problem_dir / "reference.py").write_bytes(reference)
            (problem_dir / "task.toml").write_text(spec)
            Path(tmp).chmod(0o755)  # the sandbox's user reads it
            for path in problem_dir.iterdir():
                path.chmod(0o644)
            problem_dir.chmod(0o755)
            return grade_kernel(
                sandbox,
                problem_dir,
                artifact_dir,
                device="cuda" if self.source.on_gpu(task_id) else "cpu",
                reps=self.source.reps,
                warmup=self.source.warmup,
                timeout_s=self.source.grade_timeout_s,
                memory_mb=memory_mb,
                max_memory_mb=limit,
                resized=lambda mb: self.learn(task_id, {"grading_mb": mb}),
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
