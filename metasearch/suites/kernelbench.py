"""``kernelbench``: KernelBench problems from a local checkout, scored by our own kernel scorer.

``suite.path`` is a KernelBench checkout: either its root (holding ``KernelBench/level1/``) or the
``KernelBench`` folder itself. Each ``level<N>/<n>_<Name>.py`` file is a task ``kernelbench/L<N>/<n>_<Name>``
(ids are stable: they are the file names, ``-`` and ``.`` included as in level 4's model names). Nothing is
downloaded. ``content_hash`` (sha256 over the sorted loaded files, path and bytes, and the ``scale`` when it
is not 1) identifies exactly which problems, at which sizes, a result was measured on.

``device: auto`` (the default) grades on CUDA where torch sees a GPU, else on the CPU (single-threaded).
``scale`` shrinks a problem for smoke searches on small machines: it multiplies each module-level integer
size that ``get_inputs`` uses and ``get_init_inputs`` does not (batch and spatial sizes; the model's own sizes
and hyper-parameters stay), never below 1. The scaled file is both what the agent sees and what is graded.

Visible to the agent: ``reference.py`` (the problem file: ``Model``, ``get_inputs``, ``get_init_inputs``)
and ``TASK.md``. The agent writes ``output/solution.py`` with ``class ModelNew``. Grading runs the kernels
suite's scorer (``metasearch/suites/kernels/grader/``, through ``grade_kernel``) in a fresh sandbox, on a
task folder made of the problem file and this suite's tolerances.
"""

from __future__ import annotations

import ast
import hashlib
import logging
import re
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from metasearch.errors import ConfigError
from metasearch.sandboxes.protocol import Sandbox
from metasearch.suites.kernels import cuda_available, grade_kernel
from metasearch.suites.kernels.footprint import Footprint, estimate, machine_mb
from metasearch.suites.protocol import Suite, Task, TaskResult

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


class KernelBenchSuite(Suite):
    name = "kernelbench"
    description = (
        "KernelBench GPU kernel problems: rewrite a PyTorch reference Model as a faster ModelNew in "
        "output/solution.py; scored on correctness and speedup over the reference."
    )
    artifact_path = "output"
    needs_docker = False
    needs_gpu = False  # set per instance from the device

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

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or KernelBenchSuite.Config()
        self.root = _problem_root(self.config.path)
        self.files = _load(self.root, self.config.levels, self.config.ids)
        scale = self.config.scale
        self.content_hash = hash_files(
            self.root, self.files.values(), extra="" if scale == 1 else f"{scale!r}"
        )
        device = self.config.device
        self.device: str = device if device != "auto" else ("cuda" if cuda_available() else "cpu")
        self.needs_gpu = self.device == "cuda"
        self._estimated_mb: dict[str, int] | None = None
        self._too_small: dict[str, str] | None = None

    def needs(self) -> None:
        """Refuses ``device: cuda`` where torch sees no GPU; says which device ``auto`` chose."""
        if self.config.device == "cuda" and not cuda_available():
            raise ConfigError("suite.device: 'cuda' but torch sees no CUDA GPU here; use auto or cpu")
        logger.info("kernelbench: grading on %s (device: %s)", self.device, self.config.device)

    def plan_note(self) -> str:
        """One line for ``--dry-run``: where grading runs, at what size, and what does not fit."""
        chosen = f"device {self.device}" + (" (auto)" if self.config.device == "auto" else "")
        note = chosen + ("" if self.config.scale == 1 else f", sizes scaled by {self.config.scale:g}")
        too_big, too_small = self.too_big(), self.too_small()
        if too_big:
            shown = ", ".join(f"{t.split('/', 1)[1]} ({mb} MB)" for t, mb in list(too_big.items())[:5])
            note += (
                f"; {len(too_big)} of {len(self.files)} problems need more than {self.memory_limit_mb()} MB "
                f"to grade and are left out: {shown}{', ...' if len(too_big) > 5 else ''} "
                "(set suite.scale, or suite.memory_limit_mb on a larger machine)"
            )
        if too_small:
            shown = ", ".join(t.split("/", 1)[1] for t in list(too_small)[:5])
            note += (
                f"; {len(too_small)} problems fail at scale {self.config.scale:g} (their reference runs at "
                f"full size) and are left out: {shown}{', ...' if len(too_small) > 5 else ''}"
            )
        return note

    def memory_limit_mb(self) -> int:
        return self.config.memory_limit_mb or int(0.9 * machine_mb())

    def grading_mb(self) -> dict[str, int]:
        """Memory each problem's grading run gets: the estimate (made once, from its sizes on the meta
        device; a problem the estimate cannot size gets the limit), or what a grading run learned it needs
        when that is more (the fact ``grading_mb``, which the study journals and hands back on resume)."""
        if self._estimated_mb is None:
            self._size_problems()
        assert self._estimated_mb is not None
        learned = self.learned()
        return {
            t: max(mb, int(learned.get(t, {}).get("grading_mb", 0))) for t, mb in self._estimated_mb.items()
        }

    def too_big(self) -> dict[str, int]:
        """Problems whose grading needs more memory than the limit: task id -> MB needed."""
        limit = self.memory_limit_mb()
        return {t: mb for t, mb in self.grading_mb().items() if mb > limit}

    def too_small(self) -> dict[str, str]:
        """Problems the ``scale`` broke (their reference runs at full size, not scaled): task id -> why."""
        if self._too_small is None:
            self._size_problems()
        assert self._too_small is not None
        return self._too_small

    def left_out(self) -> dict[str, str]:
        """Problems not offered at all, with the reason: too big for the memory limit, or too small at the
        scale."""
        limit = self.memory_limit_mb()
        out = {t: f"needs {mb} MB to grade, over {limit} MB" for t, mb in self.too_big().items()}
        out.update({t: f"fails at scale {self.config.scale:g}: {why}" for t, why in self.too_small().items()})
        return out

    def _size_problems(self) -> None:
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
        self._estimated_mb, self._too_small = sizes, broken

    def tasks(self, subset: str | None = None) -> Sequence[Task]:
        """All loaded problems; ``subset`` may narrow them to one level (``"L1"``) or be ``"all"``."""
        if subset not in (None, "all") and subset not in {f"L{level}" for level in self.config.levels}:
            raise ConfigError(f"kernelbench: unknown subset {subset!r}; allowed: all, L<level>")
        left_out = self.left_out()
        if left_out:
            logger.warning(
                "kernelbench: %d problems are left out: %s",
                len(left_out), "; ".join(f"{t}: {why}" for t, why in left_out.items()),
            )  # fmt: skip
        return [
            Task(
                id=task_id,
                suite=self.name,
                statement=self._statement(task_id),
                subsets=(task_id.split("/")[1],),
                needs_gpu=self.needs_gpu,
                timeout_s=self.config.solve_timeout_s,
            )
            for task_id in self.files
            if (subset in (None, "all") or task_id.split("/")[1] == subset) and task_id not in left_out
        ]

    def prepare(self, task_id: str, dest: Path) -> None:
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "reference.py").write_bytes(self.reference(task_id))
        (dest / "TASK.md").write_text(self._statement(task_id))
        (dest / "output").mkdir(exist_ok=True)

    def grade(self, task_id: str, artifact_dir: Path, sandbox: Sandbox) -> TaskResult:
        """The kernels suite's scorer on a task folder made of the (scaled) problem file and our tolerances."""
        reference = self.reference(task_id)
        cfg = self.config
        memory_mb = self.grading_mb()[task_id]
        if memory_mb > self.memory_limit_mb():
            raise ConfigError(
                f"kernelbench: {task_id} needs about {memory_mb} MB to grade, over suite.memory_limit_mb "
                f"({self.memory_limit_mb()} MB); grade it smaller with suite.scale"
            )
        if task_id in self.too_small():
            raise ConfigError(
                f"kernelbench: {task_id} fails at suite.scale {cfg.scale:g} ({self.too_small()[task_id]}); "
                "use a larger scale"
            )
        artifact_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="ms-kb-") as tmp:
            task_dir = Path(tmp) / "task"
            task_dir.mkdir()
            (task_dir / "reference.py").write_bytes(reference)
            (task_dir / "task.toml").write_text(
                f'description = "{task_id}"\natol = {cfg.atol!r}\nrtol = {cfg.rtol!r}\n'
                f"ceiling = {cfg.ceiling!r}\nneeds_gpu = {str(self.needs_gpu).lower()}\n"
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
                device=self.device,
                reps=cfg.reps,
                warmup=2,
                timeout_s=cfg.grade_timeout_s,
                memory_mb=memory_mb,
                max_memory_mb=self.memory_limit_mb(),
                resized=lambda mb: self.learn(task_id, {"grading_mb": mb}),  # later grades start there
            )

    def reference(self, task_id: str) -> bytes:
        """The problem file as the agent sees it and the scorer grades it: scaled when ``scale`` is not 1."""
        source = self._file(task_id).read_bytes()
        return source if self.config.scale == 1 else scale_sizes(source, self.config.scale)[0]

    def _file(self, task_id: str) -> Path:
        if task_id not in self.files:
            raise ConfigError(f"kernelbench: unknown task {task_id!r} (not among the loaded problems)")
        return self.files[task_id]

    def _statement(self, task_id: str) -> str:
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


def hash_files(root: Path, files: Iterable[Path], extra: str = "") -> str:
    """sha256 over (relative path, content digest) of ``files``, sorted: order and location independent;
    ``extra`` (how the files are used, e.g. a scale) is hashed too when given."""
    digest = hashlib.sha256()
    if extra:
        digest.update(b"extra\0" + extra.encode() + b"\n")
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
