"""The benchmark adapters against small fixture checkouts written in each benchmark's real layout."""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from metasearch.errors import ConfigError, TaskUnfit
from metasearch.sandboxes.local import LocalSandbox
from metasearch.sandboxes.protocol import Sandbox
from metasearch.suites import polyglot, swebench
from metasearch.suites.contract import CandidateFailure, GraderFault
from metasearch.suites.kernelbench import KernelBenchSuite
from metasearch.suites.kernels import cuda_available
from metasearch.suites.polyglot import PolyglotSuite
from metasearch.suites.protocol import Suite, TaskResult
from metasearch.suites.swebench import SWEBenchSuite

# ---------------------------------------------------------------- KernelBench

KB_PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """{doc}"""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return {expr}


N = 16


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
'''
KB_FILES = {
    "level1/1_Square_matrix_multiplication_.py": ("Matrix product.", "torch.matmul(a, b)"),
    "level1/2_Add.py": ("Sum.", "a + b"),
    "level1/10_Mul_ReLU.py": ("ReLU of a product.", "torch.relu(a * b)"),
    "level2/1_Matmul_Add.py": ("Product plus sum.", "torch.matmul(a, b) + a"),
}

# Level 4's files are named after Hugging Face models; their sizes are module constants, and the model's own
# size (here ``hidden``) is passed through get_init_inputs.
KB_LEVEL4 = "level4/1_EleutherAI-gpt-neo-2p7B_bs32_seq256.py"
KB_MODEL_PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x):
        return self.proj(x)


hidden = 8
sequence_length = 2 * 8
batch_size = 32
shape = (batch_size, sequence_length)


def get_inputs():
    return [torch.randn(*shape, hidden)]


def get_init_inputs():
    return [hidden]
"""


def _kernelbench(root: Path) -> Path:
    """A checkout like ScalingIntelligence/KernelBench: problems under KernelBench/level<N>/."""
    for rel, (doc, expr) in KB_FILES.items():
        path = root / "KernelBench" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(KB_PROBLEM.format(doc=doc, expr=expr))
    (root / "KernelBench" / "level1" / "README.md").write_text("not a problem\n")
    (root / "KernelBench" / "level3").mkdir()
    (root / "KernelBench" / "level4").mkdir()
    (root / "KernelBench" / KB_LEVEL4).write_text(KB_MODEL_PROBLEM)
    return root


def _kb(root: Path, **config: object) -> KernelBenchSuite:
    return KernelBenchSuite(KernelBenchSuite.Config(path=str(root), **config))


def test_kernelbench_lists_stable_ids_in_problem_order(tmp_path: Path) -> None:
    root = _kernelbench(tmp_path / "kb")
    suite = _kb(root, levels=[1, 2], device="cuda")
    assert isinstance(suite, Suite) and suite.needs_gpu
    ids = [t.id for t in suite.tasks()]
    assert ids == [
        "kernelbench/L1/1_Square_matrix_multiplication_",
        "kernelbench/L1/2_Add",
        "kernelbench/L1/10_Mul_ReLU",
        "kernelbench/L2/1_Matmul_Add",
    ]
    assert [t.id for t in _kb(root / "KernelBench", levels=[1, 2]).tasks()] == ids  # either folder works
    assert [t.id for t in suite.tasks("L2")] == ids[3:] and all(t.needs_gpu for t in suite.tasks())
    picked = _kb(root, levels=[1, 2], ids=["L1/10", "2_Add", "kernelbench/L2/1_Matmul_Add"]).tasks()
    assert [t.id for t in picked] == [ids[1], ids[2], ids[3]]
    assert [t.id for t in _kb(root).tasks()] == ids  # default levels 1-3; level3 is empty here
    assert [t.id for t in _kb(root, levels=[1]).tasks()] == ids[:3]
    level4 = [t.id for t in _kb(root, levels=[4]).tasks()]  # a "-" in the name, as in the real level 4
    assert level4 == ["kernelbench/L4/1_EleutherAI-gpt-neo-2p7B_bs32_seq256"]
    assert [t.id for t in _kb(root, levels=[4], ids=["L4/1"]).tasks()] == level4


def test_kernelbench_device_auto_follows_the_cuda_probe(tmp_path: Path) -> None:
    root = _kernelbench(tmp_path / "kb")
    suite = _kb(root, levels=[1])
    assert suite.config.device == "auto"
    expected = "cuda" if cuda_available() else "cpu"
    assert suite.source.device == expected and suite.needs_gpu == (expected == "cuda")
    assert all(t.needs_gpu == suite.needs_gpu for t in suite.tasks())
    assert suite.plan_note() == f"device {expected} (auto)"
    suite.needs()
    dest = tmp_path / "task"
    suite.prepare("kernelbench/L1/2_Add", dest)
    assert f"(graded on {'CUDA' if expected == 'cuda' else 'the CPU'}" in (dest / "TASK.md").read_text()
    cpu = _kb(root, levels=[1], device="cpu")
    assert cpu.source.device == "cpu" and not cpu.needs_gpu and cpu.plan_note() == "device cpu"
    if not cuda_available():
        with pytest.raises(ConfigError, match=r"suite\.device: 'cuda' but torch sees no CUDA GPU"):
            _kb(root, levels=[1], device="cuda").needs()


def test_kernelbench_scale_shrinks_input_sizes_only(tmp_path: Path) -> None:
    root = _kernelbench(tmp_path / "kb")
    task = "kernelbench/L4/1_EleutherAI-gpt-neo-2p7B_bs32_seq256"
    whole, quarter = _kb(root, levels=[4]), _kb(root, levels=[4], scale=0.25)
    assert whole.reference(task) == (root / "KernelBench" / KB_LEVEL4).read_bytes()
    dest = tmp_path / "task"
    quarter.prepare(task, dest)
    scaled = (dest / "reference.py").read_text()
    # batch and sequence shrink (the derived shape follows); the model's size, used by get_init_inputs, stays
    assert "hidden = 8\nsequence_length = 4\nbatch_size = 8\nshape = (batch_size, sequence_length)" in scaled
    statement = (dest / "TASK.md").read_text()
    assert "scaled by 0.25" in statement and "batch_size 32 -> 8" in statement and "hidden" not in statement
    namespace: dict[str, object] = {}
    exec(scaled, namespace)
    (x,) = namespace["get_inputs"]()  # type: ignore[operator]
    assert tuple(x.shape) == (8, 4, 8)
    tiny = _kb(root, levels=[1], scale=0.001).reference("kernelbench/L1/2_Add").decode()
    assert "\nN = 1\n" in tiny  # never below 1
    hashes = {_kb(root, scale=s).content_hash for s in (1.0, 0.5, 0.25)}
    assert len(hashes) == 3 and _kb(root).content_hash == _kb(root, scale=1.0).content_hash
    assert "scaled" not in _kb(root, levels=[1]).tasks()[0].statement


def test_kernelbench_prepare_writes_only_visible_files(tmp_path: Path) -> None:
    root = _kernelbench(tmp_path / "kb")
    suite = _kb(root, levels=[1])
    dest = tmp_path / "task"
    suite.prepare("kernelbench/L1/2_Add", dest)
    assert sorted(p.name for p in dest.iterdir()) == ["TASK.md", "output", "reference.py"]
    assert (dest / "reference.py").read_text() == (root / "KernelBench/level1/2_Add.py").read_text()
    assert "ModelNew" in (dest / "TASK.md").read_text() and list((dest / "output").iterdir()) == []


def test_kernelbench_content_hash(tmp_path: Path) -> None:
    root = _kernelbench(tmp_path / "kb")
    first = _kb(root).content_hash
    assert first == _kb(root).content_hash and len(first) == 64
    shutil.copytree(root, tmp_path / "elsewhere")
    assert _kb(tmp_path / "elsewhere").content_hash == first  # location does not matter
    assert _kb(root, levels=[1]).content_hash != first  # the loaded files do
    problem = root / "KernelBench/level1/2_Add.py"
    problem.write_text(problem.read_text().replace("N = 16", "N = 17"))
    assert _kb(root).content_hash != first
    (root / "KernelBench/level1/README.md").write_text("changed\n")
    assert _kb(root).content_hash == _kb(root).content_hash


def test_kernelbench_configuration_errors(tmp_path: Path) -> None:
    root = _kernelbench(tmp_path / "kb")
    with pytest.raises(ConfigError, match=r"suite\.path: .*nope does not exist"):
        _kb(tmp_path / "nope")
    with pytest.raises(ConfigError, match=r"suite\.path: required"):
        KernelBenchSuite()
    with pytest.raises(ConfigError, match=r"suite\.path: .*no level<N>/ folders"):
        _kb(tmp_path)
    with pytest.raises(ConfigError, match=r"suite\.levels: level 5"):
        _kb(root, levels=[1, 5])
    with pytest.raises(ConfigError, match=r"suite\.ids: 'L1/99'"):
        _kb(root, ids=["L1/99"])
    with pytest.raises(ConfigError, match="unknown task 'kernelbench/L2/1_Matmul_Add'"):
        _kb(root, levels=[1]).prepare("kernelbench/L2/1_Matmul_Add", tmp_path / "t")


def test_kernelbench_grades_with_the_kernel_scorer(tmp_path: Path) -> None:
    suite = _kb(_kernelbench(tmp_path / "kb"), levels=[1], device="cpu", reps=5, scale=0.5)
    out = tmp_path / "out"
    out.mkdir()
    solution = (
        "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, a, b):\n"
    )
    (out / "solution.py").write_text(solution + "        return torch.add(a, b)\n")
    good = suite.grade("kernelbench/L1/2_Add", out, LocalSandbox())
    assert good.error is None and good.score > 0, good
    (out / "solution.py").write_text(solution + "        return a - b\n")
    bad = suite.grade("kernelbench/L1/2_Add", out, LocalSandbox())
    assert bad.score == 0 and bad.error


# ---------------------------------------------------------------- Polyglot

LEAP_STUB = "def leap_year(year):\n    pass\n"
LEAP_RIGHT = "def leap_year(year):\n    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)\n"
LEAP_WRONG = "def leap_year(year):\n    return year % 4 == 0\n"
LEAP_TEST = """import unittest

from leap import leap_year


class LeapTest(unittest.TestCase):
    def test_ordinary(self):
        self.assertIs(leap_year(2015), False)
        self.assertIs(leap_year(1996), True)

    def test_centuries(self):
        self.assertIs(leap_year(1900), False)
        self.assertIs(leap_year(2000), True)
"""


def _exercise(root: Path, lang: str, name: str, files: dict[str, str], meta: dict[str, list[str]]) -> Path:
    folder = root / lang / "exercises" / "practice" / name
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    (folder / ".docs").mkdir(parents=True, exist_ok=True)
    (folder / ".docs" / "instructions.md").write_text(f"# {name}\n\nInstructions for {name}.\n")
    (folder / ".meta").mkdir(exist_ok=True)
    (folder / ".meta" / "config.json").write_text(json.dumps({"authors": ["x"], "files": meta}))
    return folder


def _polyglot(root: Path) -> Path:
    """A checkout like Aider-AI/polyglot-benchmark: <language>/exercises/practice/<exercise>/."""
    leap = _exercise(
        root,
        "python",
        "leap",
        {"leap.py": LEAP_STUB, "leap_test.py": LEAP_TEST, ".meta/example.py": LEAP_RIGHT},
        {"solution": ["leap.py"], "test": ["leap_test.py"], "example": [".meta/example.py"]},
    )
    (leap / ".docs" / "instructions.append.md").write_text("Use the Gregorian calendar.\n")
    for name in ("dominoes", "beer-song"):
        module = name.replace("-", "_")
        _exercise(
            root,
            "python",
            name,
            {f"{module}.py": "pass\n", f"{module}_test.py": "def test_x():\n    assert False\n"},
            {"solution": [f"{module}.py"], "test": [f"{module}_test.py"], "example": [".meta/example.py"]},
        )
    for name in ("bowling", "variable-length-quantity"):
        _exercise(
            root,
            "rust",
            name,
            {"src/lib.rs": "// stub\n", "tests/t.rs": "#[test]\nfn t() {}\n", "Cargo.toml": "[package]\n"},
            {"solution": ["src/lib.rs"], "test": ["tests/t.rs"], "example": [".meta/example.rs"]},
        )
    return root


def _pg(root: Path, **config: object) -> PolyglotSuite:
    return PolyglotSuite(PolyglotSuite.Config(path=str(root), **config))


def test_polyglot_lists_stable_ids_and_subsets(tmp_path: Path) -> None:
    root = _polyglot(tmp_path / "pg")
    suite = _pg(root)
    assert isinstance(suite, Suite)
    ids = [t.id for t in suite.tasks()]
    assert ids == [
        "polyglot/python/beer-song",
        "polyglot/python/dominoes",
        "polyglot/python/leap",
        "polyglot/rust/bowling",
        "polyglot/rust/variable-length-quantity",
    ]
    assert [t.id for t in _pg(root).tasks()] == ids and suite.needs_docker  # rust needs the toolchain image
    python_only = _pg(root, languages=["python"])
    assert not python_only.needs_docker and len(python_only.tasks()) == 3
    assert [t.id for t in _pg(root, exercises=["python/leap", "rust__bowling"]).tasks()] == [ids[2], ids[3]]
    small = _pg(root, subset="dgm-small")
    assert [t.id for t in small.tasks()] == [ids[0], ids[1], ids[3], ids[4]]
    assert [t.id for t in suite.tasks("dgm-small")] == [t.id for t in small.tasks()]
    assert "dgm-medium" in {s for t in suite.tasks() if t.id.endswith("dominoes") for s in t.subsets}
    assert len(set(polyglot.DGM_SMALL)) == 10 and len(set(polyglot.DGM_MEDIUM)) == 50


def test_polyglot_prepare_hides_tests_and_examples(tmp_path: Path) -> None:
    root = _polyglot(tmp_path / "pg")
    suite = _pg(root)
    suite.prepare("polyglot/python/leap", tmp_path / "leap")
    files = sorted(
        str(p.relative_to(tmp_path / "leap")) for p in (tmp_path / "leap").rglob("*") if p.is_file()
    )
    assert files == [
        "TASK.md",
        "workspace/.docs/instructions.append.md",
        "workspace/.docs/instructions.md",
        "workspace/leap.py",
    ]
    statement = (tmp_path / "leap" / "TASK.md").read_text()
    assert "Instructions for leap" in statement and "Gregorian" in statement and "leap.py" in statement
    suite.prepare("polyglot/rust/bowling", tmp_path / "bowling")
    workspace = tmp_path / "bowling" / "workspace"
    visible = sorted(str(p.relative_to(workspace)) for p in workspace.rglob("*") if p.is_file())
    assert visible == [".docs/instructions.md", "Cargo.toml", "src/lib.rs"]


def test_a_grading_run_sees_no_reference_material(tmp_path: Path) -> None:
    """The run that executes candidate code gets the stubs, tests and build files, never the example
    solutions or the Exercism folders that hold solutions (``.approaches``, ``.articles``)."""
    root = _polyglot(tmp_path / "pg")
    leap = root / "python" / "exercises" / "practice" / "leap"
    (leap / ".approaches" / "modulo").mkdir(parents=True)
    (leap / ".approaches" / "modulo" / "snippet.txt").write_text("return year % 4 == 0 and ...\n")
    (leap / ".articles").mkdir()
    (leap / ".articles" / "config.json").write_text("{}\n")
    (leap / ".meta" / "example.py").chmod(0o600)
    exercise = _pg(root).exercises["polyglot/python/leap"]
    view = polyglot.grading_view(exercise, tmp_path / "view")
    seen = sorted(str(p.relative_to(view)) for p in view.rglob("*"))
    assert seen == [
        ".docs",
        ".docs/instructions.append.md",
        ".docs/instructions.md",
        "leap.py",
        "leap_test.py",
    ]
    assert all(p.stat().st_mode & 0o005 == 0o005 for p in [view, *view.rglob("*")] if p.is_dir())
    assert all(p.stat().st_mode & 0o004 for p in view.rglob("*"))  # the sandbox's user reads them
    assert (leap / ".meta" / "example.py").is_file()  # the checkout is untouched


def test_polyglot_content_hash_and_errors(tmp_path: Path) -> None:
    root = _polyglot(tmp_path / "pg")
    first = _pg(root).content_hash
    assert first == _pg(root).content_hash
    test_file = root / "python/exercises/practice/leap/leap_test.py"
    test_file.write_text(test_file.read_text() + "\n")
    assert _pg(root).content_hash != first  # hidden files count too
    with pytest.raises(ConfigError, match=r"suite\.path: .*missing does not exist"):
        _pg(tmp_path / "missing")
    with pytest.raises(ConfigError, match=r"suite\.path: required"):
        PolyglotSuite()
    with pytest.raises(ConfigError, match=r"suite\.languages: 'go' not found"):
        _pg(root, languages=["go"])
    with pytest.raises(ConfigError, match=r"suite\.languages: unknown language 'cobol'"):
        _pg(root, languages=["cobol"])
    shutil.rmtree(root / "python/exercises/practice/beer-song")
    with pytest.raises(ConfigError, match=r"suite\.subset: dgm-small exercises missing.*python__beer-song"):
        _pg(root, languages=["python"], subset="dgm-small")
    (root / "python/exercises/practice/leap/.meta/config.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"leap/\.meta/config\.json"):
        _pg(root)


def test_polyglot_grades_a_python_exercise_end_to_end(tmp_path: Path) -> None:
    root = _polyglot(tmp_path / "pg")
    suite = _pg(root, languages=["python"])
    task = tmp_path / "task"
    suite.prepare("polyglot/python/leap", task)
    workspace = task / suite.artifact_path
    sandbox = LocalSandbox()

    unchanged = suite.grade("polyglot/python/leap", workspace, sandbox)
    assert unchanged.score == 0.0 and "tests failed" in (unchanged.error or "")

    (workspace / "leap.py").write_text(LEAP_WRONG)
    # A test file planted in the workspace is ignored: the pristine tests decide.
    (workspace / "leap_test.py").write_text("def test_nothing():\n    pass\n")
    wrong = suite.grade("polyglot/python/leap", workspace, sandbox)
    assert wrong.score == 0.0 and wrong.metrics["passed"] == 1.0 and "1900" in (wrong.error or "")
    assert "1 of 2 tests failed: ['test_centuries']" in (wrong.error or "")

    (workspace / "leap.py").write_text(LEAP_RIGHT)
    right = suite.grade("polyglot/python/leap", workspace, sandbox)
    assert right.score == 1.0 and right.error is None and right.metrics["solution_files"] == 1.0


# ---------------------------------------------------------------- SWE-bench


def _instance(iid: str, n: int = 0) -> dict[str, object]:
    return {
        "instance_id": iid,
        "repo": "owner/project",
        "base_commit": f"{n:040x}",
        "problem_statement": f"Calling frobnicate() crashes ({iid}).",
        "patch": "diff --git a/gold.py b/gold.py\n+GOLD_SECRET\n",
        "test_patch": "diff --git a/tests/t.py b/tests/t.py\n+TEST_SECRET\n",
        "FAIL_TO_PASS": json.dumps(["tests/t.py::test_hidden_fail"]),
        "PASS_TO_PASS": json.dumps(["tests/t.py::test_hidden_pass"]),
        "version": "1.0",
        "environment_setup_commit": f"{n:040x}",
    }


def _instances_file(path: Path, ids: list[str]) -> Path:
    records = [_instance(iid, n) for n, iid in enumerate(ids)]
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
    else:
        path.write_text(json.dumps(records, indent=1))
    return path


def _sb(path: Path, subset: str | list[str] = "all") -> SWEBenchSuite:
    return SWEBenchSuite(SWEBenchSuite.Config(instances=str(path), subset=subset))


def test_swebench_lists_instances_and_dgm_subsets(tmp_path: Path) -> None:
    ids = [*swebench.DGM_SMALL, "owner__project-1", "owner__project-2"]
    path = _instances_file(tmp_path / "instances.jsonl", ids)
    suite = _sb(path)
    assert isinstance(suite, Suite) and suite.needs_docker
    assert [t.id for t in suite.tasks()] == [f"swebench/{i}" for i in ids]
    small = _sb(path, "dgm-10")
    assert [t.id for t in small.tasks()] == [f"swebench/{i}" for i in swebench.DGM_SMALL]
    assert all(t.subsets == ("dgm-10", "dgm-60") for t in small.tasks())
    assert [t.id for t in _sb(path, ["owner__project-2"]).tasks()] == ["swebench/owner__project-2"]
    assert [t.id for t in suite.tasks("dgm-10")] == [t.id for t in small.tasks()]
    with pytest.raises(ConfigError, match=r"suite\.subset: 50 instances missing"):
        _sb(path, "dgm-60")
    assert len(set(swebench.DGM_SMALL)) == 10 and len(set(swebench.DGM_MEDIUM)) == 50
    assert not set(swebench.DGM_SMALL) & set(swebench.DGM_MEDIUM)
    assert suite.image_for("swebench/django__django-10973") == (
        "swebench/sweb.eval.x86_64.django_1776_django-10973:latest"
    )


def test_swebench_prepare_shows_no_gold_or_tests(tmp_path: Path) -> None:
    suite = _sb(_instances_file(tmp_path / "i.json", ["owner__project-1"]))
    dest = tmp_path / "task"
    suite.prepare("swebench/owner__project-1", dest)
    assert sorted(p.name for p in dest.iterdir()) == ["TASK.md", "instance.json", "output"]
    shown = json.loads((dest / "instance.json").read_text())
    assert sorted(shown) == ["base_commit", "instance_id", "problem_statement", "repo"]
    everything = (dest / "TASK.md").read_text() + (dest / "instance.json").read_text()
    assert "frobnicate" in everything
    assert not any(s in everything for s in ("GOLD_SECRET", "TEST_SECRET", "test_hidden"))


def test_swebench_content_hash_and_errors(tmp_path: Path) -> None:
    ids = ["owner__project-1", "owner__project-2"]
    as_json = _sb(_instances_file(tmp_path / "a.json", ids)).content_hash
    assert as_json == _sb(_instances_file(tmp_path / "a.jsonl", ids)).content_hash  # same records, same hash
    changed = _instance("owner__project-2", 1) | {"test_patch": "different"}
    (tmp_path / "b.json").write_text(json.dumps([_instance("owner__project-1"), changed]))
    assert _sb(tmp_path / "b.json").content_hash != as_json
    with pytest.raises(ConfigError, match=r"suite\.instances: .*nope\.json does not exist"):
        _sb(tmp_path / "nope.json")
    with pytest.raises(ConfigError, match=r"suite\.instances: required"):
        SWEBenchSuite()
    broken = _instance("owner__project-9")
    del broken["test_patch"]
    (tmp_path / "c.json").write_text(json.dumps([broken]))
    with pytest.raises(ConfigError, match=r"owner__project-9 lacks test_patch"):
        _sb(tmp_path / "c.json")
    with pytest.raises(ConfigError, match=r"suite\.subset: unknown subset 'lite'"):
        _sb(tmp_path / "a.json", "lite")


@pytest.mark.skipif(importlib.util.find_spec("swebench") is not None, reason="swebench is installed")
def test_swebench_grading_without_the_harness_is_a_config_error(tmp_path: Path) -> None:
    suite = _sb(_instances_file(tmp_path / "i.json", ["owner__project-1"]))
    with pytest.raises(ConfigError, match="needs the swebench package"):
        suite.needs()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "patch.diff").write_text("diff --git a/x b/x\n")
    with pytest.raises(ConfigError, match="swebench"):
        suite.grade("swebench/owner__project-1", tmp_path / "out", LocalSandbox())


def test_swebench_reads_harness_reports(tmp_path: Path) -> None:
    iid = "owner__project-1"
    status = {
        "FAIL_TO_PASS": {"success": ["a"], "failure": []},
        "PASS_TO_PASS": {"success": ["b", "c", "d"], "failure": ["e"]},
    }
    (tmp_path / "report.json").write_text(
        json.dumps({iid: {"resolved": False, "tests_status": status, "patch_successfully_applied": True}})
    )
    partial = swebench.read_report(iid, tmp_path, "")
    assert isinstance(partial, CandidateFailure) and partial.metrics == {
        "resolved": 0.0,
        "fail_to_pass": 1.0,
        "pass_to_pass": 0.75,
    }
    status["PASS_TO_PASS"]["failure"] = []
    (tmp_path / "report.json").write_text(json.dumps({iid: {"resolved": True, "tests_status": status}}))
    assert swebench.read_report(iid, tmp_path, "").score == 1.0
    assert swebench.read_report(iid, tmp_path, "", expected=["a", "b", "c", "d"]).score == 1.0
    # The harness saying "resolved" is not enough: every expected test must be among its successes.
    short = swebench.read_report(iid, tmp_path, "", expected=["a", "b", "c", "d", "x"])
    assert isinstance(short, CandidateFailure)
    assert short.reason == "not resolved: expected tests not reported passed: ['x']"

    (tmp_path / "report.json").unlink()
    (tmp_path / "run_instance.log").write_text(f"{swebench.APPLY_PATCH_FAIL}:\nerror: corrupt patch\n")
    failed = swebench.read_report(iid, tmp_path, "")
    assert failed == CandidateFailure("patch does not apply", {"resolved": 0.0})
    (tmp_path / "run_instance.log").write_text("docker: cannot connect\n")
    fault = swebench.read_report(iid, tmp_path, "")  # the harness's own failure: never the candidate's
    assert isinstance(fault, GraderFault) and "cannot connect" in fault.reason


def test_swebench_screens_patches_before_the_harness(tmp_path: Path) -> None:
    suite = _sb(_instances_file(tmp_path / "i.json", ["owner__project-1"]))
    task, out = "swebench/owner__project-1", tmp_path / "out"
    out.mkdir()
    assert swebench.expected_ids(suite.instances["owner__project-1"]) == [
        "tests/t.py::test_hidden_fail",
        "tests/t.py::test_hidden_pass",
    ]
    honest = "--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1,2 +1,2 @@\n def f(x):\n-    return x\n+    return x + 1\n"
    (out / "patch.diff").write_text(honest)
    assert suite.screen(task, out) == honest
    cases = {
        "+import os\n+os._exit(0)\n": "pkg/core.py: early exit: os._exit",
        "+import sys\n+OPTS = sys.argv[1:]\n": "argv/environment inspection: argv",
        "+print('test_hidden_fail (tests.T) ... ok')\n": "result line:  ... ok",
        "+NAME = 'test_hidden_fail'\n": "result line: test_hidden_fail",
        "+import _pytest.runner\n": "runner import: import _pytest",
    }
    for added, reason in cases.items():
        (out / "patch.diff").write_text(honest + added)
        refused = suite.screen(task, out)
        assert isinstance(refused, TaskResult) and refused.flags == ("tamper_suspect",), added
        assert refused.score == 0.0 and reason in (refused.error or ""), refused
    (out / "patch.diff").unlink()
    (tmp_path / "secret").write_text("diff --git a/x b/x\n")
    (out / "patch.diff").symlink_to(tmp_path / "secret")
    linked = suite.screen(task, out)
    assert isinstance(linked, TaskResult) and "no patch" in (linked.error or "")


@pytest.mark.docker
def test_polyglot_grades_python_in_docker(
    docker_sandbox_factory: Callable[[], Sandbox], tmp_path: Path
) -> None:
    suite = _pg(_polyglot(tmp_path / "pg"), languages=["python"])
    suite.prepare("polyglot/python/leap", tmp_path / "task")
    workspace = tmp_path / "task" / suite.artifact_path
    (workspace / "leap.py").write_text(LEAP_RIGHT)
    assert suite.grade("polyglot/python/leap", workspace, docker_sandbox_factory()).score == 1.0
    (workspace / "leap.py").write_text(LEAP_WRONG)
    assert suite.grade("polyglot/python/leap", workspace, docker_sandbox_factory()).score == 0.0


# KernelBench level 1's real layout for a problem whose output is large (the real 19_ReLU is 4096 x 393216
# fp32, 6 GiB); here 256 MiB, the size at which a grader writing to a small /tmp used to fail correct code.
KB_RELU = '''import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Simple model that performs a ReLU activation.
    """
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)

batch_size = 16
dim = 4194304

def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]

def get_init_inputs():
    return []  # No special initialization inputs needed
'''
KB_RELU_ID = "kernelbench/L1/19_ReLU"


def _kb_relu(root: Path, source: str = KB_RELU) -> Path:
    path = root / "KernelBench" / "level1" / "19_ReLU.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return root


def test_kernelbench_sizes_each_problem_and_leaves_out_what_cannot_fit(tmp_path: Path) -> None:
    root = _kb_relu(_kernelbench(tmp_path / "kb"))
    suite = _kb(root, levels=[1], device="cpu")
    sizes = suite.grading_mb()
    # 256 MiB in, 256 MiB out: the judge and two workers hold a few copies each, and PyTorch itself
    assert 2048 + 1.25 * 9 * 256 <= sizes[KB_RELU_ID] <= 2048 + 1.25 * 12 * 256
    assert sizes["kernelbench/L1/2_Add"] == 4096  # small problems get the floor
    assert KB_RELU_ID in [t.id for t in suite.tasks()] and not suite.too_big()

    small = _kb(root, levels=[1], device="cpu", memory_limit_mb=4096)
    assert small.too_big() == {KB_RELU_ID: sizes[KB_RELU_ID]}
    assert KB_RELU_ID not in [t.id for t in small.tasks()]  # left out before any budget is spent on it
    note = small.plan_note()
    assert "1 of 4 problems need more than 4096 MB" in note and "L1/19_ReLU" in note
    with pytest.raises(ConfigError, match="memory_limit_mb"):
        small.grade(KB_RELU_ID, tmp_path / "out", LocalSandbox())
    # what a grading learned (journaled, handed back on resume) counts as much as the estimate
    small.learn("kernelbench/L1/2_Add", {"grading_mb": 5120})
    assert small.too_big() == {KB_RELU_ID: sizes[KB_RELU_ID], "kernelbench/L1/2_Add": 5120}
    # at a smaller scale it fits again: the scaled file is what is sized
    assert not _kb(root, levels=[1], device="cpu", memory_limit_mb=4096, scale=0.25).too_big()


@pytest.mark.docker
@pytest.mark.timeout(1200)
def test_kernelbench_large_output_grades_right_in_docker(docker_sandbox_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A correct candidate with an output twice the size of the sandbox's scratch space (64 MiB against
    32 MiB of /tmp and of each writable folder) passes in Docker and a wrong one fails on correctness:
    nothing the grader does depends on the sandbox's small scratch space."""
    relu = KB_RELU.replace("batch_size = 16", "batch_size = 4")  # 4 x 4M floats: 64 MiB in, 64 MiB out
    root = _kb_relu(_kernelbench(tmp_path / "kb"), relu)
    suite = _kb(root, levels=[1], ids=["L1/19"], device="cpu", reps=3)
    sandbox = docker_sandbox_factory(tmp_mb=32, disk_mb=32)
    out = tmp_path / "out"
    out.mkdir()
    (out / "solution.py").write_text(relu.replace("Model", "ModelNew"))
    good = suite.grade(KB_RELU_ID, out, sandbox)
    assert good.error is None and good.metrics["correct"] == 1.0, good
    (out / "solution.py").write_text(
        relu.replace("Model", "ModelNew").replace("torch.relu(x)", "torch.relu(x) * 1.1")
    )
    bad = suite.grade(KB_RELU_ID, out, sandbox)
    assert bad.score == 0.0 and "wrong output" in (bad.error or ""), bad


# Level 1's convolution layout: the kernel size goes through get_init_inputs (never scaled), the image size
# through get_inputs (scaled); a small enough scale leaves an image smaller than the kernel.
KB_CONV = """import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super(Model, self).__init__()
        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2d(x)

batch_size = 4
in_channels = 3
out_channels = 8
kernel_size = 5
height = 16
width = 16

def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
"""


def test_kernelbench_leaves_out_problems_the_scale_breaks(tmp_path: Path) -> None:
    root = _kernelbench(tmp_path / "kb")
    (root / "KernelBench" / "level1" / "55_conv_standard_2D.py").write_text(KB_CONV)
    conv = "kernelbench/L1/55_conv_standard_2D"
    assert conv in [t.id for t in _kb(root, levels=[1], device="cpu", scale=0.5).tasks()]  # 8x8 image: fine
    small = _kb(root, levels=[1], device="cpu", scale=0.125)  # a 2x2 image under a 5x5 kernel
    assert list(small.too_small()) == [conv] and "Kernel size" in small.too_small()[conv]
    assert conv not in [t.id for t in small.tasks()] and len(small.tasks()) == 3
    assert (
        "1 problems fail at scale 0.125" in small.plan_note()
        and "L1/55_conv_standard_2D" in small.plan_note()
    )
    with pytest.raises(ConfigError, match="use a larger scale"):
        small.grade(conv, tmp_path / "out", LocalSandbox())


# A level-2 style problem whose forward holds a temporary 64 times its input (2.7 GB): the estimate on the
# meta device sees inputs, parameters and output only (as it misses a convolution's unfolded input), so the
# run it sizes (the 4096 MB floor) leaves the candidate's worker less room than the reference's needs.
KB_WIDE = '''import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Scales the input by each of 64 factors and sums the results.
    """
    def __init__(self, factors: int):
        super(Model, self).__init__()
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, factors))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x.unsqueeze(0) * self.scale.view(-1, 1, 1)).sum(0)

batch_size = 160
dim = 65536
factors = 64

def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]

def get_init_inputs():
    return [factors]
'''
KB_WIDE_ID = "kernelbench/L2/7_Scale_Sum"


@pytest.mark.docker
@pytest.mark.timeout(1200)
def test_kernelbench_grading_room_follows_what_the_reference_needs(
    docker_sandbox_factory, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Too little memory for the problem is the grader's fault: the judge measures the reference's worker
    and asks for more before the candidate runs, and the suite grades again with it. A candidate that blows
    its memory with that room is the candidate's failure, never an infrastructure error."""
    root = _kernelbench(tmp_path / "kb")
    (root / "KernelBench" / "level2" / "7_Scale_Sum.py").write_text(KB_WIDE)
    suite = _kb(root, levels=[2], ids=["L2/7"], device="cpu", reps=3)
    assert suite.grading_mb()[KB_WIDE_ID] == 4096  # the estimate: the floor
    sandbox = docker_sandbox_factory()
    out = tmp_path / "out"
    out.mkdir()
    (out / "solution.py").write_text(KB_WIDE.replace("Model", "ModelNew"))
    good = suite.grade(KB_WIDE_ID, out, sandbox)
    assert good.error is None and good.metrics["correct"] == 1.0, good
    grown = suite.grading_mb()[KB_WIDE_ID]
    assert 4096 < grown <= suite.memory_limit_mb()  # later grades start with the room the judge asked for
    assert suite.learned() == {KB_WIDE_ID: {"grading_mb": grown}}  # for the study to journal

    (out / "solution.py").write_text(
        KB_WIDE.replace("Model", "ModelNew").replace(
            "        return (x",
            f"        torch.ones({grown} << 18).sum()  # all of the run's memory, and more\n        return (x",
        )
    )
    greedy = suite.grade(KB_WIDE_ID, out, sandbox)
    assert greedy.score == 0.0 and "candidate crashed" in (greedy.error or ""), greedy

    capped = _kb(root, levels=[2], ids=["L2/7"], device="cpu", reps=3, memory_limit_mb=4096)
    (out / "solution.py").write_text(KB_WIDE.replace("Model", "ModelNew"))
    # no candidate can be graded on it under this cap: the study retires the task (errors.TaskUnfit)
    with pytest.raises(TaskUnfit, match=r"less than the reference's worker needs.*over the cap of 4096 MB"):
        capped.grade(KB_WIDE_ID, out, sandbox)
