"""One kernels suite, two task sources: the built-in folders and a KernelBench checkout, named either way."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from test_adapters import _kernelbench

from metasearch.config import load_config_data, suite_class
from metasearch.errors import ConfigError
from metasearch.provenance import task_hash
from metasearch.suites.kernelbench import KernelBenchSuite
from metasearch.suites.kernels import KernelsSuite
from metasearch.suites.kernels.kernelbench import KernelBenchProblems
from metasearch.suites.kernels.sources import BuiltinTasks

# What results on the fixture problems were measured on before the two suites became one: the ids, the
# content hash and the statements must not move, or old results no longer name what they were measured on.
FIXTURE_IDS = [
    "kernelbench/L1/1_Square_matrix_multiplication_",
    "kernelbench/L1/2_Add",
    "kernelbench/L1/10_Mul_ReLU",
    "kernelbench/L2/1_Matmul_Add",
]
PINNED = {  # options -> (content hash, sha256 of the statements joined)
    "all": (
        "dee881d669179a3519f85f6d03f4664cefcae2b6b661ec562a1b285450576e58",
        "9754e41a5281dff3f8d9304cddf19a315a3ef1e993167c393150265dbcadd159",
    ),
    "L1 at half size": (
        "d807bbc2fd9154fb713383800186adab6218137361efe910e32f371d9d10d534",
        "2e768d8c3a1ca4d198d9a856fd518ebe769935d68396937a120bc46fccedcd56",
    ),
}


def _suite(name: str, **options: object) -> KernelsSuite:
    suite = load_config_data({"suite": {"name": name, **options}}).plugins["suite"].create()
    assert isinstance(suite, KernelsSuite)
    return suite


def test_kernelbench_is_the_kernels_suite_with_its_source_fixed() -> None:
    assert suite_class("kernelbench") is KernelBenchSuite and issubclass(KernelBenchSuite, KernelsSuite)
    own = {k for k in vars(KernelBenchSuite) if not k.startswith("_")}
    assert own == {"name", "description", "Config"}  # a name and options; no second implementation
    assert KernelBenchSuite.Config is KernelBenchProblems.Config
    builtin = _suite("kernels", subset="all")
    assert type(builtin) is KernelsSuite and isinstance(builtin.source, BuiltinTasks)
    assert "kernels/row_softmax" in [t.id for t in builtin.tasks()] and builtin.content_hash is None


def test_both_names_give_the_same_problems_ids_and_hashes(tmp_path: Path) -> None:
    root = _kernelbench(tmp_path / "kb")
    options = {"path": str(root), "levels": [1, 2], "device": "cpu"}
    via_kernels = _suite("kernels", source="kernelbench", **options)
    via_alias = _suite("kernelbench", **options)
    assert type(via_kernels) is KernelsSuite and isinstance(via_kernels.source, KernelBenchProblems)
    assert [t.id for t in via_kernels.tasks()] == [t.id for t in via_alias.tasks()] == FIXTURE_IDS
    assert via_kernels.content_hash == via_alias.content_hash == PINNED["all"][0]
    assert via_kernels.description == via_alias.description == KernelBenchProblems.description
    for a, b in zip(via_kernels.tasks(), via_alias.tasks(), strict=True):
        assert task_hash(via_kernels, a) == task_hash(via_alias, b)  # what the agent and grader see
    # the option that picks the source is not recorded among the options: old records read the same
    assert via_kernels.config.model_dump() == via_alias.config.model_dump()
    chosen = KernelsSuite.Config.model_validate({"source": "kernelbench", **options})
    assert isinstance(chosen, KernelBenchProblems.Config)
    with pytest.raises(TypeError, match=r"KernelBenchProblems\.Config"):  # a constructor cannot switch models
        KernelsSuite.Config(source="kernelbench", **options)


@pytest.mark.parametrize("case", sorted(PINNED))
def test_fixture_ids_content_hashes_and_statements_are_unchanged(case: str, tmp_path: Path) -> None:
    root = _kernelbench(tmp_path / "kb")
    options: dict[str, object] = {"path": str(root), "device": "cpu"}
    if case == "L1 at half size":
        options.update(levels=[1], scale=0.5)
    suite = _suite("kernels", source="kernelbench", **options)
    tasks = suite.tasks()
    assert [t.id for t in tasks] == FIXTURE_IDS[: len(tasks)] and len(tasks) in (3, 4)
    statements = hashlib.sha256("".join(t.statement for t in tasks).encode()).hexdigest()
    assert (suite.content_hash, statements) == PINNED[case]


def test_options_of_the_other_source_are_refused_by_name(tmp_path: Path) -> None:
    root = str(_kernelbench(tmp_path / "kb"))
    cases = {
        "suite.subset: Extra inputs": {"source": "kernelbench", "path": root, "subset": "cpu"},
        "suite.pathh: Extra inputs": {"source": "kernelbench", "pathh": root},
        "suite.path: Extra inputs": {"path": root},  # KernelBench's option without the source
        "suite.source: Input should be 'builtin' or 'kernelbench'": {"source": "KernelBench"},
    }
    for message, options in cases.items():
        with pytest.raises(ConfigError, match=re.escape(message)):
            load_config_data({"suite": {"name": "kernels", **options}})
    with pytest.raises(ConfigError, match=r"suite\.source: Extra inputs"):  # the alias's source is fixed
        load_config_data({"suite": {"name": "kernelbench", "source": "kernelbench", "path": root}})


def test_grading_memory_is_learned_whichever_name_built_the_suite(tmp_path: Path) -> None:
    root = _kernelbench(tmp_path / "kb")
    suite = _suite("kernels", source="kernelbench", path=str(root), levels=[1], device="cpu")
    task = FIXTURE_IDS[1]
    assert suite.grading_mb()[task] == 4096  # a small problem gets the floor
    suite.learn(task, {"grading_mb": 5120})
    assert suite.grading_mb()[task] == 5120 and suite.learned() == {task: {"grading_mb": 5120}}
    assert _suite("kernels").grading_mb() == {}  # built-in tasks are not sized: none is ever left out


def test_a_missing_checkout_gets_the_clone_command_under_either_name(tmp_path: Path) -> None:
    from metasearch.readiness import _suite_checks

    missing = str(tmp_path / "KernelBench")
    for suite in ({"name": "kernelbench"}, {"name": "kernels", "source": "kernelbench"}):
        [check] = _suite_checks(load_config_data({"suite": {**suite, "path": missing}}))
        assert check.state == "missing" and check.fix.startswith("git clone https://github.com/Scaling")
