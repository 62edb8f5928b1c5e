"""``kernelbench``: KernelBench problems from a local checkout, scored by our own kernel scorer.

``suite.path`` is a KernelBench checkout: either its root (holding ``KernelBench/level1/``) or the
``KernelBench`` folder itself. Each ``level<N>/<n>_<Name>.py`` file is a task ``kernelbench/L<N>/<n>_<Name>``
(ids are stable: they are the file names). Nothing is downloaded. ``content_hash`` (sha256 over the sorted
loaded files, path and bytes) identifies exactly which problem files a result was measured on.

Visible to the agent: ``reference.py`` (the problem file: ``Model``, ``get_inputs``, ``get_init_inputs``)
and ``TASK.md``. The agent writes ``output/solution.py`` with ``class ModelNew``. Grading runs the kernels
suite's scorer (``metasearch/suites/kernels/grader/``, through ``grade_kernel``) in a fresh sandbox, on a
task folder made of the problem file and this suite's tolerances.

Not verified offline: the real KernelBench problem sizes, which need a GPU (v0.1 sizes are far too large
for a CPU); scores on a real KernelBench checkout.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from metasearch.errors import ConfigError
from metasearch.sandboxes.protocol import Sandbox
from metasearch.suites.kernels import grade_kernel
from metasearch.suites.protocol import Task, TaskResult

PROBLEM_FILE = re.compile(r"^(\d+)_(\w+)\.py$")
STATEMENT = """# {task_id}

`reference.py` defines `class Model(nn.Module)`, `get_inputs()` and `get_init_inputs()` (a KernelBench
level {level} problem). Write `output/solution.py` defining `class ModelNew(nn.Module)` with the same
constructor arguments and `forward` signature as `Model`, computing the same outputs (fp32, within
atol = {atol:g}, rtol = {rtol:g}) faster on the GPU: custom CUDA via `torch.utils.cpp_extension.load_inline`, Triton,
or a better use of PyTorch. The solution must not import `reference.py`: it is not importable at grading
time. Correctness is checked on fresh random inputs; speedups that look implausible are flagged.
"""


class KernelBenchSuite:
    name = "kernelbench"
    description = (
        "KernelBench GPU kernel problems: rewrite a PyTorch reference Model as a faster ModelNew in "
        "output/solution.py; scored on correctness and speedup over the reference."
    )
    artifact_path = "output"
    needs_docker = False
    needs_gpu = True

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")
        path: str | None = None  # a KernelBench checkout (root or its KernelBench/ folder)
        levels: list[int] = Field(default_factory=lambda: [1, 2, 3])
        ids: list[str] | None = None  # "L1/19", "19_ReLU" or full task ids; None = every problem
        grade_timeout_s: float = Field(900.0, gt=0)
        solve_timeout_s: float = Field(3600.0, gt=0)
        device: Literal["cuda", "cpu"] = "cuda"  # where the scorer runs and times both models
        atol: float = Field(1e-2, gt=0)  # KernelBench's tolerances
        rtol: float = Field(1e-2, gt=0)
        reps: int = Field(30, ge=3)
        ceiling: float = Field(1000.0, gt=1)

    def __init__(self, config: Config | None = None, **_: object) -> None:
        self.config = config or KernelBenchSuite.Config()
        self.root = _problem_root(self.config.path)
        self.files = _load(self.root, self.config.levels, self.config.ids)
        self.content_hash = hash_files(self.root, self.files.values())

    def tasks(self, subset: str | None = None) -> Sequence[Task]:
        """All loaded problems; ``subset`` may narrow them to one level (``"L1"``) or be ``"all"``."""
        if subset not in (None, "all") and subset not in {f"L{level}" for level in self.config.levels}:
            raise ConfigError(f"kernelbench: unknown subset {subset!r}; allowed: all, L<level>")
        return [
            Task(
                id=task_id,
                suite=self.name,
                statement=_statement(task_id, self.config.atol, self.config.rtol),
                subsets=(task_id.split("/")[1],),
                needs_gpu=True,
                timeout_s=self.config.solve_timeout_s,
            )
            for task_id in self.files
            if subset in (None, "all") or task_id.split("/")[1] == subset
        ]

    def prepare(self, task_id: str, dest: Path) -> None:
        source = self._file(task_id)
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "reference.py").write_bytes(source.read_bytes())
        (dest / "TASK.md").write_text(_statement(task_id, self.config.atol, self.config.rtol))
        (dest / "output").mkdir(exist_ok=True)

    def grade(self, task_id: str, artifact_dir: Path, sandbox: Sandbox) -> TaskResult:
        """The kernels suite's scorer on a task folder made of the problem file and our tolerances."""
        source = self._file(task_id)
        cfg = self.config
        artifact_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="ms-kb-") as tmp:
            task_dir = Path(tmp) / "task"
            task_dir.mkdir()
            shutil.copyfile(source, task_dir / "reference.py")
            (task_dir / "task.toml").write_text(
                f'description = "{task_id}"\natol = {cfg.atol!r}\nrtol = {cfg.rtol!r}\n'
                f"ceiling = {cfg.ceiling!r}\nneeds_gpu = {str(cfg.device == 'cuda').lower()}\n"
                'subsets = ["all"]\n'
            )
            Path(tmp).chmod(0o755)
            for path in task_dir.iterdir():
                path.chmod(0o644)
            task_dir.chmod(0o755)
            return grade_kernel(
                sandbox,
                task_dir,
                artifact_dir,
                device=cfg.device,
                reps=cfg.reps,
                warmup=2,
                timeout_s=cfg.grade_timeout_s,
                memory_mb=16384,
            )

    def _file(self, task_id: str) -> Path:
        if task_id not in self.files:
            raise ConfigError(f"kernelbench: unknown task {task_id!r} (not among the loaded problems)")
        return self.files[task_id]


def hash_files(root: Path, files: Iterable[Path]) -> str:
    """sha256 over (relative path, content digest) of ``files``, sorted: order and location independent."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).hexdigest().encode() + b"\n")
    return digest.hexdigest()


def _problem_root(path: str | None) -> Path:
    if not path:
        raise ConfigError("suite.path: required; set it to a local KernelBench checkout")
    root = Path(path).expanduser()
    if not root.is_dir():
        raise ConfigError(f"suite.path: {root} does not exist or is not a directory")
    if (root / "KernelBench").is_dir():
        root = root / "KernelBench"
    if not any(root.glob("level*/")):
        raise ConfigError(f"suite.path: {root} holds no level<N>/ folders; is it a KernelBench checkout?")
    return root


def _load(root: Path, levels: list[int], ids: list[str] | None) -> dict[str, Path]:
    """Task id -> problem file, ordered by level and problem number."""
    found: dict[str, Path] = {}
    for level in sorted(set(levels)):
        folder = root / f"level{level}"
        if not folder.is_dir():
            raise ConfigError(f"suite.levels: level {level} not found ({folder} does not exist)")
        problems = [(int(m.group(1)), p) for p in folder.iterdir() if (m := PROBLEM_FILE.match(p.name))]
        for _, path in sorted(problems):
            found[f"kernelbench/L{level}/{path.stem}"] = path
    if ids is None:
        return found
    chosen: dict[str, Path] = {}
    for wanted in ids:
        matches = [
            t for t in found if wanted in (t, t.split("/", 1)[1], t.rsplit("/", 1)[1]) or _short(t) == wanted
        ]
        if not matches:
            raise ConfigError(
                f"suite.ids: {wanted!r} matches no loaded problem (levels {sorted(set(levels))})"
            )
        chosen.update((t, found[t]) for t in matches)
    return {t: chosen[t] for t in found if t in chosen}


def _short(task_id: str) -> str:
    """``kernelbench/L1/19_ReLU`` -> ``L1/19``."""
    _, level, stem = task_id.split("/")
    return f"{level}/{stem.split('_', 1)[0]}"


def _statement(task_id: str, atol: float, rtol: float) -> str:
    return STATEMENT.format(task_id=task_id, level=task_id.split("/")[1][1:], atol=atol, rtol=rtol)
