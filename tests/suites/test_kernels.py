"""The kernels suite and its scorer, with real candidates: every oracle passes and holds its speedup class,
every wrong solution fails, every cheat is flagged and not rewarded, the control task never counts as
faster. Grading runs ``score.py`` in a real sandbox, as the runner does."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kernels_fixtures import (
    CHEATS,
    CUDA_EXPLOITS,
    DOCKER_EXPLOITS,
    EXPLOITS,
    LAZIER,
    ON_CUDA_TOO,
    ORACLES,
    cheat,
    cheat_kind,
    oracle,
    wrong,
)

from metasearch.errors import ConfigError, TaskUnfit
from metasearch.sandboxes.local import LocalSandbox
from metasearch.sandboxes.protocol import ExecResult, RunSpec
from metasearch.suites.kernels import (
    TASKS_DIR,
    KernelsSuite,
    aggregate,
    cuda_available,
    grade_kernel,
    task_specs,
)
from metasearch.suites.protocol import Suite, TaskResult

CPU_TASKS = sorted(n for n, s in task_specs().items() if not s.get("needs_gpu"))
EXPECTED_FLAG = {"inputs": "modified_inputs", "timer": "tampered_timer", "cache": "stale_output"}


def grade(suite: KernelsSuite, task: str, source: str, tmp_path: Path, sandbox=None) -> TaskResult:  # type: ignore[no-untyped-def]
    artifact = tmp_path / f"artifact-{abs(hash(source))}"
    artifact.mkdir(exist_ok=True)
    (artifact / "solution.py").write_text(source)
    return suite.grade(f"kernels/{task}", artifact, sandbox or LocalSandbox())


_HONEST: dict[tuple[str, str, int, str], TaskResult] = {}


def honest_grading(suite: KernelsSuite, task: str, tmp_path: Path, sandbox=None) -> TaskResult:  # type: ignore[no-untyped-def]
    """The honest solution's grading of ``task``, graded once per sandbox and suite settings in this process
    and shared by every attack measured against it (``assert_no_gain`` grades it afresh when one looks ahead)."""
    key = (sandbox.name if sandbox else "local", task, suite.config.reps, suite.config.device)
    if key not in _HONEST:
        _HONEST[key] = grade(suite, task, oracle(task), tmp_path, sandbox)
    return _HONEST[key]


def assert_no_gain(  # type: ignore[no-untyped-def]
    result: TaskResult, suite: KernelsSuite, task: str, source: str, tmp_path: Path, sandbox=None
) -> None:
    """The attack ``source`` (graded as ``result``) scored no higher than the honest solution (its shared
    grading, ``honest_grading``), and, unless it was rejected outright, claimed no larger speedup (timing
    noise between two gradings stays well inside 1.6x; the attacks aim higher). A machine busy at the wrong
    moment can still halve one honest grading, or double one attack's reference (the reference's speed
    varies up to 2x between gradings on a loaded 2-core machine), so when the attack looks ahead of the
    first, the honest solution is graded once more and the better counts; if the attack still looks ahead,
    it is graded again beside a third honest grading, and counts as a gain only if it gains both times: an
    attack that works gains on every grading, one that rode a lucky draw does not repeat it."""
    gradings = [honest_grading(suite, task, tmp_path, sandbox)]
    if not _no_gain(result, _best(gradings)):
        gradings.append(grade(suite, task, oracle(task), tmp_path, sandbox))
    if _no_gain(result, _best(gradings)):
        return
    gradings.append(grade(suite, task, oracle(task), tmp_path, sandbox))
    retry = grade(suite, task, source, tmp_path, sandbox)
    assert _no_gain(result, _best(gradings)) or _no_gain(retry, _best(gradings)), (result, retry, gradings)


def _best(gradings: list[TaskResult]) -> TaskResult:
    return TaskResult(
        score=max(g.score for g in gradings),
        metrics={"speedup": max(g.metrics.get("speedup", 0.0) for g in gradings)},
    )


def _no_gain(result: TaskResult, honest: TaskResult) -> bool:
    if result.score > honest.score:
        return False
    claimed = result.metrics.get("speedup", 0.0)
    return not (result.score > 0 or not result.flags) or claimed <= 1.6 * honest.metrics.get("speedup", 0.0)


def outcome(result: TaskResult) -> str:
    """What was recorded, in one line (the integrity benchmark's table shows it)."""
    speedup = f" speedup {result.metrics['speedup']:.2f}" if "speedup" in result.metrics else ""
    flags = f" flags {','.join(result.flags)}" if result.flags else ""
    return f"score {result.score:.2f}{speedup}{flags}" + (f": {result.error[:80]}" if result.error else "")


def test_the_suite_lists_its_tasks_and_shows_only_visible_files(tmp_path: Path) -> None:
    suite = KernelsSuite()
    assert isinstance(suite, Suite)
    ids = [t.id for t in suite.tasks()]
    assert len(ids) == 9 and "kernels/add_control" in ids and len(set(ids)) == len(ids)
    assert all(not t.needs_gpu for t in suite.tasks())
    assert {t.id for t in suite.tasks("control")} == {"kernels/add_control"}
    suite.prepare("kernels/row_softmax", tmp_path / "task")
    assert sorted(p.name for p in (tmp_path / "task").iterdir()) == [
        "TASK.md",
        "output",
        "reference.py",
        "task.toml",
    ]
    assert "ModelNew" in (tmp_path / "task" / "TASK.md").read_text()
    with pytest.raises(ConfigError, match=r"suite\.subset"):
        KernelsSuite(KernelsSuite.Config(subset="nope"))
    with pytest.raises(ConfigError, match="unknown task"):
        suite.prepare("kernels/nope", tmp_path / "x")


def test_gpu_tasks_are_gated_on_a_cuda_probe() -> None:
    suite = KernelsSuite(KernelsSuite.Config(subset="gpu"))
    assert [t.id for t in suite.tasks()] == ["kernels/gpu_row_softmax"]
    if cuda_available():
        suite.needs()
    else:
        with pytest.raises(ConfigError, match="CUDA"):
            suite.needs()
        assert all(not t.needs_gpu for t in KernelsSuite(KernelsSuite.Config(subset="all")).tasks())


class RecordingSandbox:
    """A Sandbox that records what it is asked to run and answers like a grader that printed nothing."""

    name = "recording"

    def __init__(self) -> None:
        self.specs: list[RunSpec] = []

    def run(self, spec: RunSpec) -> ExecResult:
        self.specs.append(spec)
        return ExecResult(exit_code=0, stdout="", stderr="", duration_s=0.0)


def test_device_cuda_times_every_selected_task_on_the_gpu(tmp_path: Path) -> None:
    suite = KernelsSuite(KernelsSuite.Config(subset="all", device="cuda"))
    tasks = suite.tasks()
    assert len(tasks) >= 9 and all(t.needs_gpu for t in tasks)  # 10 where CUDA answers the probe
    assert all("Timed on a CUDA GPU" in t.statement for t in tasks)
    suite.prepare("kernels/row_softmax", tmp_path / "task")
    assert "Timed on a CUDA GPU" in (tmp_path / "task" / "TASK.md").read_text()
    box = RecordingSandbox()
    suite.grade("kernels/row_softmax", tmp_path / "artifact", box)
    [spec] = box.specs
    assert spec.command[spec.command.index("--device") + 1] == "cuda"
    KernelsSuite().grade("kernels/row_softmax", tmp_path / "artifact", box)  # the default: the task's own
    assert box.specs[1].command[box.specs[1].command.index("--device") + 1] == "cpu"
    if not cuda_available():
        with pytest.raises(ConfigError, match=r"suite\.device"):
            suite.needs()


@pytest.mark.gpu
@pytest.mark.parametrize("task", CPU_TASKS)
def test_every_task_grades_on_cuda(task: str, tmp_path: Path) -> None:
    """The flagship config's benchmark: the CPU tasks' oracles are correct when timed on the GPU too."""
    if not cuda_available():
        pytest.skip("no CUDA GPU")
    suite = KernelsSuite(KernelsSuite.Config(subset="all", device="cuda"))
    good = grade(suite, task, oracle(task), tmp_path)
    print(f"{task}: {outcome(good)} {good.metrics}")
    assert good.error is None and good.metrics["correct"] == 1.0, good
    assert grade(suite, task, wrong(task), tmp_path).score == 0.0


@pytest.mark.parametrize("task", CPU_TASKS)
def test_each_oracle_is_correct_and_holds_its_speedup_class(task: str, tmp_path: Path) -> None:
    suite = KernelsSuite(KernelsSuite.Config(reps=9))
    good = honest_grading(suite, task, tmp_path)
    assert good.error is None and good.metrics["correct"] == 1.0 and good.flags == (), good
    if task_specs()[task].get("control"):
        assert good.metrics["fast_1"] == 0.0 and good.score == pytest.approx(0.1), good  # not faster
    else:  # the naive reference leaves headroom: the oracle is clearly faster
        assert good.metrics["fast_2"] == 1.0 and good.metrics["speedup"] > 3.0 and good.score > 0.4, good


GRADER_MODULES = ("shared", "compare")
LOADED = "_tolerance_check_"  # the prefix of the task files this module loads


@pytest.fixture(scope="module")
def grader_modules() -> Iterator[dict[str, Any]]:
    """The grader's own ``shared`` and ``compare`` modules, as the judge imports them (by bare name, from
    the grader's folder), loaded into this process; afterwards only they and the task files loaded beside
    them leave ``sys.modules`` (torch, imported meanwhile, must stay: a second import of it crashes)."""
    import importlib

    grader = str(TASKS_DIR.parent / "grader")
    sys.path.insert(0, grader)
    try:
        yield {name: importlib.import_module(name) for name in GRADER_MODULES}
    finally:
        sys.path.remove(grader)
        for name in [n for n in sys.modules if n in GRADER_MODULES or n.startswith(LOADED)]:
            del sys.modules[name]


@pytest.mark.parametrize("task", CPU_TASKS)
def test_each_tasks_tolerance_passes_its_oracle_and_fails_its_wrong_solution(
    task: str, grader_modules: dict[str, Any], tmp_path: Path
) -> None:
    """Where a wrong output is decided: the judge's own comparison, under the task's tolerances, on every
    shape set, with models and inputs built as every grading process builds them. (A wrong solution through
    the whole grading: ``test_inputs_drawn_by_the_workers_and_the_digest_grade_right`` and the attack
    table's ``wrong output`` row.)"""
    import torch

    shared, compare = grader_modules["shared"], grader_modules["compare"]
    spec = shared.load_task(TASKS_DIR / task)
    reference = shared.import_file(f"{LOADED}reference_{task}", TASKS_DIR / task / "reference.py")
    candidates = {}
    for kind, source in (("oracle", oracle(task)), ("wrong", wrong(task))):
        (tmp_path / f"{kind}.py").write_text(source)
        candidates[kind] = shared.import_file(f"{LOADED}{kind}_{task}", tmp_path / f"{kind}.py").ModelNew
    cpu = torch.device("cpu")
    for shape in [{}, *spec["shapes"]]:
        inputs = shared.make_inputs(reference, cpu, 7, shape)
        want = shared.as_array(
            shared.call(shared.make_model(reference, reference.Model, cpu, 3, shape), inputs)
        )
        got = {
            kind: shared.as_array(shared.call(shared.make_model(reference, cls, cpu, 3, shape), inputs))
            for kind, cls in candidates.items()
        }
        assert compare.compare(got["oracle"], want, spec["atol"], spec["rtol"]) is None, (task, shape)
        problem = compare.compare(got["wrong"], want, spec["atol"], spec["rtol"])
        assert problem and problem.startswith("wrong output"), (task, shape, problem)


@pytest.mark.parametrize("kind", CHEATS)
def test_each_cheat_is_flagged_and_not_rewarded(kind: str, tmp_path: Path) -> None:
    """Writing into the inputs, replacing the timer, outputs cached across calls: each graded whole, on the
    first task the fixtures give it (the judge's checks do not depend on the task)."""
    task = next(t for t in CPU_TASKS if cheat_kind(t) == kind)
    cheating = grade(KernelsSuite(KernelsSuite.Config(reps=9)), task, cheat(task), tmp_path)
    assert cheating.score == 0.0 and EXPECTED_FLAG[kind] in cheating.flags, cheating


@pytest.mark.parametrize("name", sorted(EXPLOITS))
def test_attacks_on_the_grader_are_caught(name: str, tmp_path: Path, record_property) -> None:  # type: ignore[no-untyped-def]
    """Patched comparisons, tensor subclasses, value caches, extra threads, a slowed, stopped or called
    reference, slowed clocks, a worker that answers before working or leaves work for later, forged answers
    and a killed judge: none of them earns more than the honest solution, and each is caught by the check
    named in the fixture."""
    task, source, caught_by = EXPLOITS[name]
    suite = KernelsSuite(KernelsSuite.Config(reps=9))
    result = grade(suite, task, source, tmp_path)
    record_property("outcome", outcome(result))
    if caught_by == "no gain":
        assert_no_gain(result, suite, task, source, tmp_path)
        return
    assert result.score == 0.0, result
    assert caught_by in result.flags or caught_by in (result.error or ""), result


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CUDA_EXPLOITS) + list(ON_CUDA_TOO))
def test_attacks_on_the_grader_are_caught_on_cuda(name: str, tmp_path: Path, record_property) -> None:  # type: ignore[no-untyped-def]
    """On a GPU the device runs asynchronously to the worker: a candidate can answer the timed command
    before its kernels finish, or finish them in the untimed commands while waiting without spinning the
    CPU. None of that, nor the attacks that mean the same on a GPU, earns more than the honest solution."""
    if not cuda_available():
        pytest.skip("no CUDA GPU")
    task, source, caught_by = CUDA_EXPLOITS.get(name) or EXPLOITS[name]
    suite = KernelsSuite(KernelsSuite.Config(subset="all", device="cuda", reps=9))
    result = grade(suite, task, source, tmp_path)
    record_property("outcome", outcome(result))
    print(f"{name}: {outcome(result)} {result.metrics}")
    if caught_by == "no gain":
        assert_no_gain(result, suite, task, source, tmp_path)
        return
    assert result.score == 0.0, result
    assert caught_by in result.flags or caught_by in (result.error or ""), result


def test_inputs_drawn_by_the_workers_and_the_digest_grade_right(tmp_path: Path) -> None:
    """What a GPU gets (each worker draws its inputs from seeds, and proves its outputs by a digest before
    sending them), run on this CPU: the oracle is correct and faster, a wrong one fails, and a worker that
    answers the digest before computing is caught by it."""

    def grade_drawn(task: str, source: str) -> TaskResult:
        artifact = tmp_path / f"drawn-{abs(hash(source))}"
        artifact.mkdir()
        (artifact / "solution.py").write_text(source)
        return grade_kernel(
            LocalSandbox(), TASKS_DIR / task, artifact, device="cpu", reps=9, warmup=2, timeout_s=120,
            inputs="drawn",
        )  # fmt: skip

    good = grade_drawn("row_softmax", oracle("row_softmax"))
    assert good.error is None and good.metrics["correct"] == 1.0 and good.metrics["speedup"] > 3.0, good
    bad = grade_drawn("row_softmax", wrong("row_softmax"))
    assert bad.score == 0.0 and bad.error and "wrong output" in bad.error, bad
    lazier = grade_drawn("row_softmax", LAZIER)
    assert lazier.score == 0.0 and "stale_output" in lazier.flags, lazier
    assert "digest" in (lazier.error or ""), lazier


def test_the_digest_of_outputs_is_the_sum_of_their_mixed_words() -> None:
    """What the timed command's digest proves: computed by the worker on its device and by the judge on the
    arrays sent, it must be the same number for every dtype and layout (bfloat16 as sent: widened), and
    differ when one bit of one output does."""
    import importlib.util

    import numpy as np
    import torch

    spec = importlib.util.spec_from_file_location("_shared", TASKS_DIR.parent / "grader" / "shared.py")
    assert spec and spec.loader
    shared = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shared)

    def by_definition(arrays: list[np.ndarray], key: int) -> int:
        data = b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)
        data += bytes(-len(data) % 4)
        words = (int.from_bytes(data[i : i + 4], "little") for i in range(0, len(data), 4))
        return sum(((x := (w ^ key) * shared._MIX) ^ (x >> 31)) & 0xFFFFFFFF for w in words)

    batches = [
        [torch.randn(3, 5)], [torch.randn(7).bfloat16()], [torch.tensor(3.5)], [torch.arange(11, dtype=torch.int16)],
        [torch.tensor([True, False, True])], [torch.randn(4, 3).t(), torch.randn(2)],
        [torch.tensor([-0.0, float("nan"), float("inf")], dtype=torch.float64)],
        [torch.arange(3, dtype=torch.uint8), torch.arange(2, dtype=torch.uint8)], [],
    ]  # fmt: skip
    for outputs in batches:
        for key, words_a_slice in ((0, 3), (12345, 1 << 22), ((1 << 30) - 1, 2)):
            shared.DIGEST_SLICE = words_a_slice
            assert shared.digest(outputs, key) == by_definition([shared.as_array(x) for x in outputs], key)
    x = torch.randn(1000)
    flipped = x.clone()
    flipped.view(torch.int32)[500] ^= 1
    assert shared.digest([x], 7) != shared.digest([flipped], 7)


def test_torch_compile_is_not_mistaken_for_tampering(tmp_path: Path) -> None:
    """torch.compile patches a few of PyTorch's own functions when it loads; that is not the candidate's doing."""
    source = (
        "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.fn = torch.compile(lambda x: torch.softmax(x, dim=-1), backend='eager', dynamic=True)\n\n"
        "    def forward(self, x):\n        return self.fn(x)\n"
    )
    result = grade(KernelsSuite(KernelsSuite.Config(reps=9)), "row_softmax", source, tmp_path)
    assert result.flags == () and result.metrics["fast_2"] == 1.0, result


def test_every_cheat_kind_is_exercised() -> None:
    assert {cheat_kind(t) for t in CPU_TASKS} == set(EXPECTED_FLAG)


def test_missing_artifacts_and_crashes_are_failures_with_reasons(tmp_path: Path) -> None:
    suite = KernelsSuite(KernelsSuite.Config(reps=3))
    empty = tmp_path / "empty"
    empty.mkdir()
    result = suite.grade("kernels/add_control", empty, LocalSandbox())
    assert result.score == 0.0 and "no artifact" in (result.error or "")
    result = grade(suite, "add_control", "raise RuntimeError('boom')\n", tmp_path)
    assert result.score == 0.0 and "boom" in (result.error or "")
    result = grade(suite, "add_control", "from reference import Model as ModelNew\n", tmp_path)
    assert result.score == 0.0 and "ModuleNotFoundError" in (result.error or ""), result


def edit_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, task: str, file: str, old: str, new: str
) -> None:
    """The suite from a copy of its folder in which one file of one task has ``old`` replaced by ``new``."""
    import metasearch.suites.kernels as kernels
    from metasearch.suites.kernels import sources

    here = tmp_path / "suite"
    shutil.copytree(kernels.HERE, here, ignore=shutil.ignore_patterns("__pycache__"))
    path = here / "tasks" / task / file
    path.write_text(path.read_text().replace(old, new))
    monkeypatch.setattr(kernels, "HERE", here)  # the grader
    monkeypatch.setattr(sources, "TASKS_DIR", here / "tasks")  # the built-in source's problems


def test_a_speedup_above_the_ceiling_is_flagged_not_rewarded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    edit_task(tmp_path, monkeypatch, "layer_norm", "task.toml", "ceiling = 1000.0", "ceiling = 2.0")
    result = grade(KernelsSuite(KernelsSuite.Config(reps=5)), "layer_norm", oracle("layer_norm"), tmp_path)
    assert "speedup_above_ceiling" in result.flags and result.score == pytest.approx(0.1), result


# 5 ms more per call while this grading's candidate worker is alive (looked up at most every 20 ms); a call
# takes ~1 ms.
SLOWER_BESIDE_A_CANDIDATE = """rows = []
        now = __import__("time").monotonic()
        seen = globals().setdefault("_seen", [-1.0, False])
        if now - seen[0] > 0.02:
            import os

            def cmdline(pid):
                try:
                    return open(f"/proc/{pid}/cmdline", "rb").read()
                except OSError:
                    return b""

            def task_dir(cmd):
                args = cmd.split(b"\\0")
                return args[args.index(b"--task-dir") + 1] if b"--task-dir" in args else None

            def name(pid):
                try:
                    return open(f"/proc/{pid}/comm", "rb").read().strip()
                except OSError:
                    return b""

            mine = task_dir(cmdline("self"))
            found = [cmdline(p) for p in os.listdir("/proc") if p.isdigit() and name(p) == b"kernels-cand"]
            seen[:] = [now, any(task_dir(c) == mine for c in found)]
        if seen[1]:  # busy, not asleep: the judge times a CPU worker by the CPU it spends
            end = __import__("time").monotonic() + 0.005
            while __import__("time").monotonic() < end:
                pass"""


def test_a_reference_slower_beside_the_candidate_is_timed_alone_not_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reference slower while the candidate lives is what a candidate that slows it looks like, and also
    what a machine that got faster afterwards looks like: the speedup uses the reference timed alone (the
    candidate gains nothing), and the honest candidate is not disqualified."""
    edit_task(tmp_path, monkeypatch, "row_softmax", "reference.py", "rows = []", SLOWER_BESIDE_A_CANDIDATE)
    result = grade(KernelsSuite(KernelsSuite.Config(reps=9)), "row_softmax", oracle("row_softmax"), tmp_path)
    metrics = result.metrics
    assert result.error is None and not result.flags and result.score > 0.1, result
    assert metrics["ref_beside_ms"] > 2 * metrics["ref_solo_ms"], metrics
    assert metrics["ref_ms"] == metrics["ref_solo_ms"], metrics
    assert metrics["speedup"] == pytest.approx(metrics["ref_solo_ms"] / metrics["cand_ms"]), metrics


def test_a_broken_reference_is_the_graders_fault_not_the_candidates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    edit_task(
        tmp_path, monkeypatch, "row_softmax", "reference.py", "rows = []", "raise RuntimeError('task bug')"
    )
    # a grader fault: run again once, then the task is retired (TaskUnfit), never a 0 for the candidate
    with pytest.raises(TaskUnfit, match=r"kernels grader on row_softmax: the reference failed.*task bug"):
        grade(KernelsSuite(KernelsSuite.Config(reps=3)), "row_softmax", oracle("row_softmax"), tmp_path)


def test_a_scalar_output_is_compared_as_a_scalar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Losses return 0-d tensors; they must come back from the workers with their shape."""
    edit_task(tmp_path, monkeypatch, "add_control", "reference.py", "return x + y", "return (x * y).mean()")
    source = oracle("add_control").replace("out = x + y", "out = (x * y).mean()")
    result = grade(KernelsSuite(KernelsSuite.Config(reps=3)), "add_control", source, tmp_path)
    assert result.metrics.get("correct") == 1.0 and result.error is None, result


def test_aggregate_divides_by_all_tasks() -> None:
    results = {
        "a": TaskResult(0.8, {"correct": 1.0, "speedup": 4.0, "fast_0": 1.0, "fast_1": 1.0, "fast_2": 1.0}),
        "b": TaskResult(0.1, {"correct": 1.0, "speedup": 1.0, "fast_0": 1.0, "fast_1": 0.0, "fast_2": 0.0}),
        "c": TaskResult(0.0, {"correct": 0.0}, error="wrong"),
        "d": TaskResult(0.0, {"correct": 0.0}, flags=("tampered_timer",), error="rejected"),
        "e": TaskResult(0.0, {"correct": 1.0, "speedup": 50.0}, flags=("multithreaded",), error="rejected"),
    }
    metrics = aggregate(results)
    assert metrics["fast_0"] == 0.4 and metrics["fast_1"] == 0.2 and metrics["fast_2"] == 0.2
    assert metrics["geomean_speedup"] == pytest.approx(2.0)


@pytest.mark.docker
def test_grading_in_docker(docker_sandbox_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    suite = KernelsSuite(KernelsSuite.Config(reps=7))
    sandbox = docker_sandbox_factory()
    tmp_path.chmod(0o755)
    good = grade(suite, "row_softmax", oracle("row_softmax"), tmp_path, sandbox)
    assert good.error is None and good.metrics["fast_2"] == 1.0, good
    cheating = grade(suite, "conv1d_taps", cheat("conv1d_taps"), tmp_path, sandbox)
    assert "tampered_timer" in cheating.flags and cheating.score == 0.0


DOCKER_CASES = [
    *DOCKER_EXPLOITS,
    "lazy_outputs",
    "eager_outputs",
    "background_work",
    "waits_for_a_detached_process",
    "stopped_reference",
    "killed_judge",
]


@pytest.mark.docker
@pytest.mark.parametrize("name", DOCKER_CASES)
def test_attacks_in_docker(name: str, docker_sandbox_factory, tmp_path: Path, record_property) -> None:  # type: ignore[no-untyped-def]
    """In a container the judge's memory is out of the candidate's reach, and the container's CPU counter
    sees a process the candidate detached; the attacks that the local sandbox also stops stay stopped."""
    suite = KernelsSuite(KernelsSuite.Config(reps=9))
    sandbox = docker_sandbox_factory()
    tmp_path.chmod(0o755)
    if name in DOCKER_EXPLOITS:
        task, source, flags = DOCKER_EXPLOITS[name]
        result = grade(suite, task, source, tmp_path, sandbox)
        record_property("outcome", outcome(result))
        assert "JUDGE_MEMORY_OPEN" not in (result.error or ""), result
        if flags:
            assert result.score == 0.0, result
            assert set(flags) & set(result.flags) or any(f in (result.error or "") for f in flags), result
        else:
            assert result.metrics.get("correct") == 1.0 and not result.flags, result
        return
    task, source, caught_by = EXPLOITS[name]
    result = grade(suite, task, source, tmp_path, sandbox)
    record_property("outcome", outcome(result))
    if caught_by == "no gain":
        assert_no_gain(result, suite, task, source, tmp_path, sandbox)
    else:
        assert result.score == 0.0 and (caught_by in result.flags or caught_by in (result.error or "")), (
            result
        )


@pytest.mark.gpu
def test_gpu_task_on_cuda(tmp_path: Path) -> None:
    if not cuda_available():
        pytest.skip("no CUDA GPU")
    suite = KernelsSuite(KernelsSuite.Config(subset="gpu", reps=20))
    good = grade(suite, "gpu_row_softmax", oracle("gpu_row_softmax"), tmp_path)
    print(f"gpu_row_softmax: {outcome(good)} {good.metrics}")
    assert good.error is None and good.metrics["correct"] == 1.0 and good.metrics["speedup"] > 1.0, good
    bad = grade(suite, "gpu_row_softmax", wrong("gpu_row_softmax"), tmp_path)
    assert bad.score == 0.0
    assert set(ORACLES) >= {p.name for p in TASKS_DIR.iterdir() if p.is_dir() and p.name != "__pycache__"}


def test_the_flagship_config_benchmarks_at_least_8_kernels_tasks_on_the_gpu() -> None:
    from metasearch.config import load_config

    config = Path(__file__).parents[2] / "configs" / "hgm-kernels-vllm.yaml"
    suite = load_config(config, []).plugins["suite"].create()
    tasks = suite.tasks()
    assert len(tasks) >= 8 and all(t.needs_gpu for t in tasks), [t.id for t in tasks]
    if not cuda_available():  # a CPU-only machine: the dry run's readiness check names what is missing
        with pytest.raises(ConfigError, match="CUDA"):
            suite.needs()


def test_the_oracles_benchmark_grades_both_sides_and_times_them_plainly(tmp_path: Path) -> None:
    """`metasearch bench oracles` grades the oracle with this checkout and with another commit (here the
    same one, checked out into a worktree), times it plainly beside them, and prints the table."""
    log = tmp_path / "gradings.jsonl"
    args = ["bench", "oracles", "--against", "HEAD", "--runs", "1", "--tasks", "add_control", "--reps", "3"]
    done = subprocess.run(
        [sys.executable, "-m", "metasearch.cli", *args, "--jsonl", str(log)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted(r["side"] for r in rows) == ["now", "plain", "then"]
    for row in rows:
        assert 0.5 < row["speedup"] < 2.0, row  # the control: the oracle is the reference's own code
        if row["side"] != "plain":
            assert row["score"] == 0.1 and not row["flags"], row
    assert "add_control" in done.stdout and "now / plain" in done.stdout


INHERITED_DESCRIPTORS = """import os, sys

_own = {0, 1, 2, int(sys.argv[sys.argv.index("--cmd-fd") + 1]), int(sys.argv[sys.argv.index("--reply-fd") + 1])}
_links = {}
for _fd in map(int, os.listdir("/proc/self/fd")):
    try:
        _links[_fd] = os.readlink(f"/proc/self/fd/{_fd}")
    except OSError:
        pass  # the listing's own descriptor, closed by now
_extra = {fd: link for fd, link in _links.items() if fd not in _own}
if _extra:
    raise RuntimeError(f"inherited descriptors {_extra}")
"""


def test_a_forked_worker_holds_only_its_own_pipes(tmp_path: Path) -> None:
    """The workers fork from the judge: the candidate's worker must hold none of the judge's descriptors, the
    reference's worker's pipes among them (it could write commands to the reference, or read its outputs),
    and it runs as the worker program, under its own name."""
    source = INHERITED_DESCRIPTORS + "assert sys.modules['__main__'].Worker\n"
    source += "assert open('/proc/self/comm').read().strip() == 'kernels-cand'\n"
    source += oracle("row_softmax")
    result = grade(KernelsSuite(KernelsSuite.Config(reps=5)), "row_softmax", source, tmp_path)
    assert result.error is None and result.metrics["correct"] == 1.0, result
