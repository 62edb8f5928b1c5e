"""SWE-bench graded through the pinned harness (``swebench`` 4.x) on a standard, hand-made record.

The record has the standard dataset fields only (``FAIL_TO_PASS`` as a JSON string, ``version``,
``environment_setup_commit``; no ``image``/``eval_script``, which the 5.x harness requires). Its
instance image is made here from the default sandbox image (a git repository at ``/testbed`` and a
no-op ``conda``), tagged as the harness names instance images, so ``run_evaluation`` runs as it does on
the real images: applies the patch, runs the eval script (the pytest repository's ``pytest -rA``) and
writes ``report.json``. Skips without Docker, the sandbox image or the harness.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from metasearch.errors import ConfigError, InfrastructureError
from metasearch.suites.swebench import SWEBenchSuite, harness_version

IID = "pytest-dev__pytest-900001"  # a made-up instance of a repository the harness has specs for
IMAGE = f"swebench/sweb.eval.x86_64.{IID.replace('__', '_1776_')}:latest"
BUGGY = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"
TESTS = (
    "from calc import add, sub\n\n\ndef test_adds():\n    assert add(2, 3) == 5\n\n\n"
    "def test_subtracts():\n    assert sub(5, 3) == 2\n"
)
SETUP = (
    "set -e; mkdir -p /opt/miniconda3/bin; printf 'conda() { :; }\\n' > /opt/miniconda3/bin/activate; "
    "printf '[global]\\nno-index = true\\n' > /etc/pip.conf; cp -a /seed/repo /testbed; "
    "git config --global --add safe.directory /testbed"
)


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout


def _docker(*args: str) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(scope="module")
def standard_record(
    docker_sandbox_factory: Callable[[], object], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """A standard record and its instance image (removed afterwards: this test made it)."""
    try:
        harness_version()
    except ConfigError as exc:
        pytest.skip(str(exc))
    from metasearch.sandboxes.images import default_image_tag

    seed = tmp_path_factory.mktemp("swebench-seed")
    repo = seed / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "calc.py").write_text(BUGGY)
    _git(repo, "add", "calc.py")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    base = _git(repo, "rev-parse", "HEAD").strip()
    (repo / "test_calc.py").write_text(TESTS)
    _git(repo, "add", "-N", "test_calc.py")
    test_patch = _git(repo, "diff", "--", "test_calc.py")
    _git(repo, "rm", "-q", "--cached", "test_calc.py")
    (repo / "test_calc.py").unlink()
    (repo / "calc.py").write_text(BUGGY.replace("a - b", "a + b", 1))
    gold = _git(repo, "diff")
    _git(repo, "checkout", "-q", "calc.py")
    seed.chmod(0o755)
    name = f"i21-swebench-{IID}"
    _docker(
        "create",
        "--name",
        name,
        "--user",
        "root",
        "-v",
        f"{seed}:/seed:ro",
        default_image_tag(),
        "sleep",
        "600",
    )
    try:
        _docker("start", name)
        _docker("exec", name, "bash", "-c", SETUP)
        _docker("commit", "--change", "USER root", "--change", "WORKDIR /testbed", name, IMAGE)
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
    record = {
        "repo": "pytest-dev/pytest",
        "instance_id": IID,
        "base_commit": base,
        "patch": gold,
        "test_patch": test_patch,
        "problem_statement": "add() subtracts",
        "hints_text": "",
        "created_at": "2024-01-01T00:00:00Z",
        "version": "5.4",
        "FAIL_TO_PASS": json.dumps(["test_calc.py::test_adds"]),
        "PASS_TO_PASS": json.dumps(["test_calc.py::test_subtracts"]),
        "environment_setup_commit": base,
    }
    yield record
    subprocess.run(["docker", "rmi", "-f", IMAGE], capture_output=True)


def _grade(record: dict[str, Any], patch: str, tmp_path: Path) -> Any:
    tmp_path.mkdir()
    instances = tmp_path / "instances.jsonl"
    instances.write_text(json.dumps(record) + "\n")
    suite = SWEBenchSuite(SWEBenchSuite.Config(instances=str(instances), subset=[IID], grade_timeout_s=600))
    suite.needs()  # the harness release is supported and the instance image is here
    assert suite.plan_note().endswith("instance images present: 1/1")
    output = tmp_path / "output"
    output.mkdir(exist_ok=True)
    (output / "patch.diff").write_text(patch)
    return suite.grade(f"swebench/{IID}", output, None)  # type: ignore[arg-type]


@pytest.mark.docker
def test_a_standard_record_grades_through_the_pinned_harness(
    standard_record: dict[str, Any], tmp_path: Path
) -> None:
    right = _grade(standard_record, standard_record["patch"], tmp_path / "gold")
    assert right.score == 1.0 and right.error is None, right
    assert right.metrics == {"resolved": 1.0, "fail_to_pass": 1.0, "pass_to_pass": 1.0}
    wrong_patch = standard_record["patch"].replace("+    return a + b", "+    return a * b")
    wrong = _grade(standard_record, wrong_patch, tmp_path / "wrong")
    assert wrong.score == 0.0 and wrong.metrics["fail_to_pass"] == 0.0, wrong
    assert wrong.metrics["pass_to_pass"] == 1.0


@pytest.mark.docker
def test_a_missing_instance_image_is_named_with_the_command_that_loads_it(
    docker_sandbox_factory: Callable[[], object], tmp_path: Path
) -> None:
    try:
        harness_version()
    except ConfigError as exc:
        pytest.skip(str(exc))
    record = {
        "instance_id": "astropy__astropy-0",
        "repo": "astropy/astropy",
        "base_commit": "0" * 40,
        "problem_statement": "x",
        "patch": "",
        "test_patch": "",
        "FAIL_TO_PASS": "[]",
        "PASS_TO_PASS": "[]",
    }
    (tmp_path / "i.json").write_text(json.dumps([record]))
    suite = SWEBenchSuite(SWEBenchSuite.Config(instances=str(tmp_path / "i.json"), subset="all"))
    image = "swebench/sweb.eval.x86_64.astropy_1776_astropy-0:latest"
    with pytest.raises(ConfigError, match=r"1 of 1 instance images .*docker load -i"):
        suite.needs()
    assert suite.missing_images() == [image]
    (tmp_path / "output").mkdir()
    (tmp_path / "output" / "patch.diff").write_text("diff --git a/x b/x\n+y\n")
    with pytest.raises(InfrastructureError, match=rf"{image}.*docker pull {image}"):
        suite.grade("swebench/astropy__astropy-0", tmp_path / "output", None)  # type: ignore[arg-type]
