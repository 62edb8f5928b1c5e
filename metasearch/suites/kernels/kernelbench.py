"""KernelBench problems from a local checkout: the kernels suite's ``source: kernelbench``.

``path`` is a KernelBench checkout: either its root (holding ``KernelBench/level1/``) or the ``KernelBench``
folder itself. Each ``level<N>/<n>_<Name>.py`` file is a task ``kernelbench/L<N>/<n>_<Name>`` (ids are
stable: they are the file names, ``-`` and ``.`` included as in level 4's model names). Nothing is
downloaded. ``content_hash`` (sha256 over the sorted loaded files, path and bytes, and the ``scale`` when it
is not 1) identifies exactly which problems, at which sizes, a result was measured on.

``device: auto`` (the default) grades on CUDA where torch sees a GPU, else on the CPU (single-threaded).
``scale`` shrinks a problem for smoke searches on small machines: it multiplies each module-level integer
size that ``get_inputs`` uses and ``get_init_inputs`` does not (batch and spatial sizes; the model's own sizes
and hyper-parameters stay), never below 1. The scaled file is both what the agent sees and what is graded.
Each problem is sized before the study starts (``footprint.py``): one that needs more memory than
``memory_limit_mb``, or that the scale broke, is left out.

Visible to the agent: ``reference.py`` (the problem file) and ``TASK.md`` (tolerances included; no
``task.toml`` is shown). The scorer reads this source's tolerances from a ``task.toml`` beside the problem.
"""

from __future__ import annotations

import ast
import logging
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from metasearch.errors import ConfigError
from metasearch.suites.files import local_path
from metasearch.suites.kernels.footprint import Footprint, estimate, machine_mb
from metasearch.suites.kernels.sources import TaskSource, cuda_available
from metasearch.suites.protocol import hash_files

logger = logging.getLogger(__name__)
PROBLEM_FILE = re.compile(r"^(\d+)_([\w.-]+)\.py$")  # level 4: "1_EleutherAI-gpt-neo-2p7B_bs32_seq256.py"
STATEMENT = """# {task_id}

`reference.py` defines `class Model(nn.Module)`, `get_inputs()` and `get_init_inputs()` (a KernelBench
level {level} problem). Write `output/solution.py` defining `class ModelNew(nn.Module)` with the same
constructor arguments and `forward` signature as `Model`, computing the same outputs (fp32, within
atol = {atol:g}, rtol = {rtol:g}) faster {where}. The solution must not import `reference.py`: it is not
importable at grading time, so copy what you need from it. Correctness is checked on fresh random inputs;
speedups that look implausible are flagged.
{sizes}"""
WHERE = {
    "cuda": "on a CUDA GPU (graded on CUDA): custom CUDA via `torch.utils.cpp_extension.load_inline`, Triton, "
    "or a better use of PyTorch",
    "cpu": "on the CPU (graded on the CPU, single-threaded): a better use of PyTorch or a C++ extension",
}


class KernelBenchProblems(TaskSource):
    """Every problem of the chosen ``levels`` (or the ``ids`` among them) of a KernelBench checkout."""

    name = "kernelbench"
    description = (
        "KernelBench GPU kernel problems: rewrite a PyTorch reference Model as a faster ModelNew in "
        "output/solution.py; scored on correctness and speedup over the reference."
    )

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")
        path: str | None = None  # a KernelBench checkout (root or its KernelBench/ folder)
        levels: list[int] = Field(default_factory=lambda: [1, 2, 3])
        ids: list[str] | None = None  # "L1/19", "19_ReLU" or full task ids; None = every problem
        grade_timeout_s: float = Field(900.0, gt=0)
        solve_timeout_s: float = Field(3600.0, gt=0)
        # where the scorer runs and times both models; auto: CUDA where torch sees a GPU, else the CPU
        device: Literal["auto", "cuda", "cpu"] = "auto"
        scale: float = Field(1.0, gt=0)  # multiplies get_inputs-only integer sizes (never below 1)
        atol: float = Field(1e-2, gt=0)  # KernelBench's tolerances
        rtol: float = Field(1e-2, gt=0)
        reps: int = Field(30, ge=3)
        ceiling: float = Field(1000.0, gt=1)
        # the most memory one grading run may take; default: 90% of this machine's. Each problem's run gets
        # what its sizes need (estimated before the study starts); problems needing more are left out.
        memory_limit_mb: int | None = Field(None, gt=0)

    def __init__(self, config: Config) -> None:
        self.config = config
        self.root = _problem_root(config.path)
        self.files = _load(self.root, config.levels, config.ids)
        self.scale = scale = config.scale
        self.content_hash = hash_files(
            self.root, self.files.values(), extra="" if scale == 1 else f"{scale!r}"
        )
        device = config.device
        self.device: str = device if device != "auto" else ("cuda" if cuda_available() else "cpu")
        self.needs_gpu = self.device == "cuda"
        self.reps, self.warmup = config.reps, 2
        self.grade_timeout_s, self.solve_timeout_s = config.grade_timeout_s, config.solve_timeout_s
        self._sizes: tuple[dict[str, int], dict[str, str]] | None = None

    def needs(self) -> None:
        """Refuses ``device: cuda`` where torch sees no GPU; says which device ``auto`` chose."""
        if self.config.device == "cuda" and not cuda_available():
            raise ConfigError("suite.device: 'cuda' but torch sees no CUDA GPU here; use auto or cpu")
        logger.info("kernelbench: grading on %s (device: %s)", self.device, self.config.device)

    def plan_note(self) -> str:
        chosen = f"device {self.device}" + (" (auto)" if self.config.device == "auto" else "")
        return chosen + ("" if self.config.scale == 1 else f", sizes scaled by {self.config.scale:g}")

    def memory_limit_mb(self) -> int:
        return self.config.memory_limit_mb or int(0.9 * machine_mb())

    def ids(self) -> list[str]:
        return list(self.files)

    def select(self, subset: str | None) -> list[str]:
        """All loaded problems; ``subset`` may narrow them to one level (``"L1"``) or be ``"all"``."""
        if subset not in (None, "all") and subset not in {f"L{level}" for level in self.config.levels}:
            raise ConfigError(f"kernelbench: unknown subset {subset!r}; allowed: all, L<level>")
        return [t for t in self.files if subset in (None, "all") or t.split("/")[1] == subset]

    def subsets(self, task_id: str) -> tuple[str, ...]:
        return (task_id.split("/")[1],)

    def on_gpu(self, task_id: str) -> bool:
        return self.needs_gpu

    def reference(self, task_id: str) -> bytes:
        """The problem file as the agent sees it and the scorer grades it: scaled when ``scale`` is not 1."""
        source = self._file(task_id).read_bytes()
        return source if self.config.scale == 1 else scale_sizes(source, self.config.scale)[0]

    def spec(self, task_id: str) -> str:
        cfg = self.config
        return (
            f'description = "{task_id}"\natol = {cfg.atol!r}\nrtol = {cfg.rtol!r}\n'
            f"ceiling = {cfg.ceiling!r}\nneeds_gpu = {str(self.needs_gpu).lower()}\n"
            'subsets = ["all"]\n'
        )

    def statement(self, task_id: str) -> str:
        sizes = ""
        if self.config.scale != 1:
            changed = scale_sizes(self._file(task_id).read_bytes(), self.config.scale)[1]
            listed = ", ".join(f"{name} {old} -> {new}" for name, (old, new) in changed.items()) or "none"
            sizes = (
                f"\nSizes are KernelBench's scaled by {self.config.scale:g} (`reference.py` holds the "
                f"graded ones): {listed}.\n"
            )
        return STATEMENT.format(
            task_id=task_id,
            level=task_id.split("/")[1][1:],
            atol=self.config.atol,
            rtol=self.config.rtol,
            where=WHERE[self.device],
            sizes=sizes,
        )

    def estimated_mb(self) -> Mapping[str, int]:
        """Each problem's grading memory from its (scaled) sizes on the meta device, made once; a problem
        the estimate cannot size gets the limit."""
        return self._size_problems()[0]

    def too_small(self) -> Mapping[str, str]:
        """Problems the ``scale`` broke (their reference runs at full size, not scaled): task id -> why."""
        return self._size_problems()[1]

    def _size_problems(self) -> tuple[dict[str, int], dict[str, str]]:
        if self._sizes is not None:
            return self._sizes
        with tempfile.TemporaryDirectory(prefix="ms-kb-size-") as tmp:
            scaled: dict[str, Path] = {}
            full: dict[str, Path] = {}
            for n, task_id in enumerate(self.files):
                scaled[task_id] = Path(tmp) / f"{n}.py"
                scaled[task_id].write_bytes(self.reference(task_id))
                if self.config.scale != 1:
                    full[task_id] = self.files[task_id]
            found = estimate([*scaled.values(), *full.values()])
        limit, sizes, broken = self.memory_limit_mb(), {}, {}
        for task_id, path in scaled.items():
            footprint = found[path]
            if isinstance(footprint, str):
                logger.info("kernelbench: %s not sized (%s); it gets %d MB", task_id, footprint, limit)
                sizes[task_id] = limit
                continue
            sizes[task_id] = footprint.grading_mb
            whole = found.get(full[task_id]) if task_id in full else None
            if footprint.failure and isinstance(whole, Footprint) and not whole.failure:
                broken[task_id] = footprint.failure
        self._sizes = sizes, broken
        return self._sizes

    def _file(self, task_id: str) -> Path:
        if task_id not in self.files:
            raise ConfigError(f"kernelbench: unknown task {task_id!r} (not among the loaded problems)")
        return self.files[task_id]


def scale_sizes(source: bytes, scale: float) -> tuple[bytes, dict[str, tuple[object, object]]]:
    """``source`` with each module-level integer size (an int or a tuple of ints, written as literals and
    arithmetic) that ``get_inputs`` uses and ``get_init_inputs`` does not multiplied by ``scale``, rounded and
    at least 1; sizes computed from others follow them. Returns the new source and ``name: (old, new)``."""
    tree = ast.parse(source)
    constants: dict[str, ast.Assign] = {}
    functions: dict[str, ast.FunctionDef] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            constants[node.targets[0].id] = node
        elif isinstance(node, ast.FunctionDef):
            functions[node.name] = node

    def used_by(function: str) -> set[str]:
        todo = (
            [n.id for n in ast.walk(functions[function]) if isinstance(n, ast.Name)]
            if function in functions
            else []
        )
        seen: set[str] = set()
        while todo:
            name = todo.pop()
            if name in constants and name not in seen:
                seen.add(name)
                todo.extend(n.id for n in ast.walk(constants[name].value) if isinstance(n, ast.Name))
        return seen

    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    edits: list[tuple[int, int, bytes]] = []
    changed: dict[str, tuple[object, object]] = {}
    for name in sorted(used_by("get_inputs") - used_by("get_init_inputs")):
        value = constants[name].value
        old = _literal_size(value)
        if old is None:
            continue
        new: object = (
            tuple(max(1, round(v * scale)) for v in old)
            if isinstance(old, tuple)
            else max(1, round(old * scale))
        )
        if new == old:
            continue
        assert value.end_lineno is not None and value.end_col_offset is not None
        begin = starts[value.lineno - 1] + value.col_offset
        end = starts[value.end_lineno - 1] + value.end_col_offset
        edits.append((begin, end, repr(new).encode()))
        changed[name] = (old, new)
    for begin, end, text in sorted(edits, reverse=True):
        source = source[:begin] + text + source[end:]
    return source, changed


def _literal_size(value: ast.expr) -> int | tuple[int, ...] | None:
    """The value of an integer (or tuple of integers) written with literals and arithmetic only, else None."""
    allowed = (ast.Constant, ast.BinOp, ast.UnaryOp, ast.Tuple, ast.Load, ast.operator, ast.unaryop)
    if not all(isinstance(n, allowed) for n in ast.walk(value)):
        return None
    try:
        # only literals and arithmetic reach eval (checked above), with no builtins
        result = eval(compile(ast.Expression(value), "<size>", "eval"), {"__builtins__": {}})
    except Exception:
        return None
    if isinstance(result, bool):
        return None
    if isinstance(result, int):
        return result
    if (
        isinstance(result, tuple)
        and result
        and all(isinstance(v, int) and not isinstance(v, bool) for v in result)
    ):
        return result
    return None


def _problem_root(path: str | None) -> Path:
    root = local_path(path, "suite.path", "a local KernelBench checkout")
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
