"""``swebench``: SWE-bench instances from a local JSON/JSONL file, graded by the official harness.

``suite.instances`` is a ``.json`` (list) or ``.jsonl`` file of instances with at least ``instance_id``,
``repo``, ``base_commit``, ``problem_statement``, ``patch``, ``test_patch``, ``FAIL_TO_PASS`` and
``PASS_TO_PASS`` (the harness needs the other SWE-bench fields too, e.g. ``version`` and
``environment_setup_commit``). Tasks are ``swebench/<instance_id>``. ``subset``: ``dgm-10`` (DGM/HGM's
``small.json``), ``dgm-60`` (``small.json`` + ``medium.json``), ``all`` or a list of ids. The id lists are
copied from jennyzzt/dgm ``swe_bench/subsets/{small,medium}.json`` at commit d88fdd6 (Apache-2.0).
``content_hash`` is a sha256 over the selected instances' records (canonical JSON), hidden fields included.

Visible to the agent: ``TASK.md`` and ``instance.json`` (id, repo, base commit, problem statement); never
the gold ``patch``, ``test_patch`` or test lists. The agent works in the instance image (``image_for``;
repository at ``/testbed``) and writes ``git diff`` to ``output/patch.diff``.

Grading reads ``output/patch.diff`` (a link is refused, never followed) and first scans what the patch
adds to Python files (``testrun/scan.py``: early exits, argv/environment inspection, runner or interpreter
patching, file-descriptor games, paths of the grader's files), plus string literals that spell a result
line the harness's log parser would trust (``... ok``, ``PASSED``) or the name of an expected test: a
finding is flag ``tamper_suspect``, score 0, and the harness does not run. Then
``python -m swebench.harness.run_evaluation`` runs for one instance with a fresh ``run_id`` (the harness
caches by run id, not by patch) and its ``report.json`` is read: score 1 only when the harness says
resolved **and** every expected test (the record's FAIL_TO_PASS + PASS_TO_PASS) is among its successes (a
missing one is named in ``error``); metrics hold the FAIL_TO_PASS / PASS_TO_PASS pass fractions. The
harness starts its own Docker containers, so the ``sandbox`` argument is not used. Without the
``swebench`` package, ``needs()`` and ``grade`` raise ``ConfigError``.

Not defended: the harness decides pass/fail by parsing the test command's log inside the instance
container, where the candidate's code runs, so a forged result line built at run time still fools it
(the scan only catches literal ones). Not verified offline: a real harness run (needs Docker Hub images or
network to build them).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import stat
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from metasearch.errors import ConfigError, InfrastructureError
from metasearch.sandboxes.protocol import Sandbox
from metasearch.suites.contract import CandidateFailure, GraderFault, Judged, Outcome, Verdict
from metasearch.suites.files import local_path
from metasearch.suites.grading import settle
from metasearch.suites.hidden_tests import HiddenTestSuite
from metasearch.suites.protocol import TaskResult
from metasearch.suites.testrun import scan

REQUIRED = (
    "instance_id",
    "repo",
    "base_commit",
    "problem_statement",
    "patch",
    "test_patch",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
)
VISIBLE = ("instance_id", "repo", "base_commit", "problem_statement")
DGM_SMALL = [
    "django__django-10973",
    "django__django-11066",
    "django__django-12754",
    "django__django-15930",
    "django__django-13279",
    "django__django-16661",
    "django__django-13346",
    "django__django-10880",
    "django__django-10999",
    "django__django-11087",
]
DGM_MEDIUM = [
    "django__django-11790",
    "django__django-12050",
    "django__django-12262",
    "django__django-12713",
    "sphinx-doc__sphinx-8475",
    "sphinx-doc__sphinx-8721",
    "sphinx-doc__sphinx-9320",
    "sphinx-doc__sphinx-9698",
    "django__django-11848",
    "django__django-12774",
    "sphinx-doc__sphinx-7748",
    "sphinx-doc__sphinx-8035",
    "sphinx-doc__sphinx-8548",
    "sphinx-doc__sphinx-9229",
    "django__django-11880",
    "django__django-12143",
    "django__django-12155",
    "sphinx-doc__sphinx-9367",
    "django__django-12209",
    "django__django-11951",
    "django__django-12193",
    "django__django-12276",
    "django__django-12304",
    "django__django-9296",
    "sphinx-doc__sphinx-10466",
    "django__django-11999",
    "django__django-12039",
    "django__django-12273",
    "django__django-12325",
    "django__django-12406",
    "sphinx-doc__sphinx-10673",
    "sphinx-doc__sphinx-11510",
    "sphinx-doc__sphinx-7757",
    "sphinx-doc__sphinx-8265",
    "sphinx-doc__sphinx-8551",
    "sphinx-doc__sphinx-8638",
    "django__django-11815",
    "django__django-11885",
    "django__django-12708",
    "sphinx-doc__sphinx-7590",
    "sphinx-doc__sphinx-7985",
    "sphinx-doc__sphinx-8056",
    "sphinx-doc__sphinx-9461",
    "django__django-11964",
    "django__django-12308",
    "sphinx-doc__sphinx-10449",
    "sphinx-doc__sphinx-7454",
    "sphinx-doc__sphinx-8269",
    "sphinx-doc__sphinx-9230",
    "sphinx-doc__sphinx-9281",
]
SUBSETS = {"dgm-10": DGM_SMALL, "dgm-60": DGM_SMALL + DGM_MEDIUM}
MODEL = "metasearch"
SUPPORTED = "4."  # the harness releases this adapter is verified with (pyproject's swebench extra)
HARNESS_INSTALL = "pip install 'swebench==4.1.0' (or `pip install -e '.[swebench]'`)"
APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"
TAMPER = "tamper_suspect"
PATCH_BYTES = 20 << 20
# What the harness's log parsers take as a test result (pytest -rA, Django/unittest verbose, sympy).
RESULT_MARKERS = (
    "PASSED ",
    "FAILED ",
    " ... ok",
    " ... FAIL",
    " ... ERROR",
    " ... skipped",
    "[OK]",
    "[FAIL]",
)


class SWEBenchSuite(HiddenTestSuite[dict[str, Any]]):
    """The instances of an instances file; an item is an instance record (``instances``, by instance id)."""

    name = "swebench"
    description = (
        "Resolve a GitHub issue in a real Python repository (/testbed, at the issue's base commit); write "
        "the fix as a git diff to output/patch.diff. Scored by the repository's hidden tests."
    )
    artifact_path = "output"
    needs_docker = True
    needs_gpu = False
    items_noun = "selected instances"
    named_subsets = SUBSETS

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")
        instances: str | None = None  # a local .json or .jsonl file of SWE-bench instances
        subset: str | list[str] = "dgm-10"  # dgm-10 | dgm-60 | all | explicit instance ids
        grade_timeout_s: float = Field(1800.0, gt=0)
        solve_timeout_s: float = Field(3600.0, gt=0)

    config: Config

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or SWEBenchSuite.Config()
        self.instances = self._select(_read(self.config.instances), self.config.subset)
        canonical = json.dumps([self.instances[i] for i in sorted(self.instances)], sort_keys=True)
        self.content_hash = hashlib.sha256(canonical.encode()).hexdigest()
        super().__init__({f"swebench/{iid}": record for iid, record in self.instances.items()})

    def _select(
        self, instances: dict[str, dict[str, Any]], subset: str | list[str]
    ) -> dict[str, dict[str, Any]]:
        """The instances ``subset`` selects: ``all``, a named subset or a list of instance ids."""
        if subset == "all":
            return instances
        if isinstance(subset, str):
            self.check_subset(subset)
            ids = SUBSETS[subset]
        else:
            ids = subset
        if missing := [i for i in ids if i not in instances]:
            raise ConfigError(
                f"suite.subset: {len(missing)} instances missing from suite.instances: {missing[:10]}"
            )
        return {i: instances[i] for i in ids}

    def needs(self) -> None:
        """Raise ``ConfigError`` when grading cannot work here: the ``swebench`` harness is missing or
        of a release the adapter does not support, or an instance image is not in the local engine."""
        harness_version()
        if missing := self.missing_images():
            shown = "; ".join(f"{image}: {load_hint(image)}" for image in missing[:5])
            more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
            raise ConfigError(
                f"swebench: {len(missing)} of {len(self.instances)} instance images are not in the local "
                f"Docker engine{more}: {shown}"
            )

    def missing_images(self) -> list[str]:
        """The instance images (``image_for``) the local Docker engine lacks, in task order."""
        images = [self.image_for(task_id) for task_id in self.items]
        try:
            done = subprocess.run(
                ["docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}"],
                capture_output=True,
                text=True,
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ConfigError(f"swebench: grading needs a Docker engine ({exc})") from exc
        if done.returncode != 0:
            raise ConfigError(f"swebench: grading needs a Docker engine: {done.stderr.strip()[-300:]}")
        present = set(done.stdout.split())
        return [image for image in images if image not in present]

    def plan_note(self) -> str:
        """For ``--dry-run``: the harness release and how many instance images are here."""
        missing = self.missing_images()
        return (
            f"harness swebench {harness_version()}; instance images present: "
            f"{len(self.instances) - len(missing)}/{len(self.instances)}"
        )

    def task_subsets(self, task_id: str, item: dict[str, Any]) -> tuple[str, ...]:
        return tuple(name for name, ids in SUBSETS.items() if item["instance_id"] in ids)  # "all" unsaid

    def statement(self, item: dict[str, Any]) -> str:
        return (
            f"# swebench/{item['instance_id']}\n\nRepository {item['repo']} at commit "
            f"{item['base_commit']} (checked out at /testbed).\n\n## Issue\n\n"
            f"{str(item['problem_statement']).strip()}\n\n## What to do\n\nChange the repository so that the "
            "issue is resolved, then write `git -C /testbed diff` to output/patch.diff. Hidden tests decide.\n"
        )

    def write_visible(self, item: dict[str, Any], dest: Path) -> None:
        """``instance.json``: the record's visible fields only (``VISIBLE``), never the gold or the tests."""
        visible = {key: item[key] for key in VISIBLE}
        (dest / "instance.json").write_text(json.dumps(visible, indent=2) + "\n")

    def image_for(self, task_id: str) -> str:
        """The published instance image the agent should run in (repository at ``/testbed``)."""
        iid = self.item(task_id)["instance_id"]
        return f"swebench/sweb.eval.x86_64.{iid.replace('__', '_1776_')}:latest".lower()

    def judge(self, item: dict[str, Any], artifact_dir: Path, sandbox: Sandbox) -> Judged:
        harness_version()
        patch = _screen(item, artifact_dir)
        if isinstance(patch, CandidateFailure):
            return patch
        image = self.image_for(f"swebench/{item['instance_id']}")
        if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode != 0:
            raise InfrastructureError(
                f"swebench: instance image {image} is not in the local Docker engine: {load_hint(image)}",
                retryable=False,
            )
        what = f"swebench harness on {item['instance_id']}"
        return settle(lambda _mb: self._run_harness(item, patch), what=what)

    def screen(self, task_id: str, artifact_dir: Path) -> str | TaskResult:
        """The candidate's patch text, or the result that refuses it (missing, empty, tamper scan)."""
        found = _screen(self.item(task_id), artifact_dir)
        return found if isinstance(found, str) else found.task_result()

    def _run_harness(self, instance: dict[str, Any], patch: str) -> Outcome:
        """One run of the official harness on the patch, under the grader contract (``read_report``)."""
        with tempfile.TemporaryDirectory(prefix="ms-swebench-") as tmp:
            return self._harness_in(instance, patch, Path(tmp))

    def _harness_in(self, instance: dict[str, Any], patch: str, tmp: Path) -> Outcome:
        iid = instance["instance_id"]
        run_id = f"metasearch-{uuid.uuid4().hex[:16]}"  # the harness caches by run id, never by patch
        (tmp / "dataset.json").write_text(json.dumps([instance]))
        prediction = {"instance_id": iid, "model_name_or_path": MODEL, "model_patch": patch}
        (tmp / "preds.jsonl").write_text(json.dumps(prediction) + "\n")
        command = [sys.executable, "-m", "swebench.harness.run_evaluation", "--dataset_name"]
        command += [str(tmp / "dataset.json"), "--predictions_path", str(tmp / "preds.jsonl")]
        command += ["--instance_ids", iid, "--run_id", run_id, "--max_workers", "1"]
        command += ["--timeout", str(int(self.config.grade_timeout_s)), "--report_dir", str(tmp)]
        try:
            done = subprocess.run(
                command, cwd=tmp, capture_output=True, text=True, timeout=self.config.grade_timeout_s + 900
            )
        except subprocess.TimeoutExpired:  # it keeps each test run to --timeout: this is its own fault
            return GraderFault(f"the harness did not finish grading {iid}")
        logs = tmp / "logs" / "run_evaluation" / run_id / MODEL / iid
        return read_report(iid, logs, done.stdout + done.stderr, expected=expected_ids(instance))


def harness_version() -> str:
    """The installed ``swebench`` release; ``ConfigError`` when it is missing or unsupported."""
    try:
        version = importlib.metadata.version("swebench")
    except importlib.metadata.PackageNotFoundError:
        version = ""
    if not version or importlib.util.find_spec("swebench") is None:
        raise ConfigError(f"suite.name: 'swebench' grading needs the swebench package: {HARNESS_INSTALL}")
    if not version.startswith(SUPPORTED):
        raise ConfigError(
            f"suite.name: 'swebench': the installed harness is swebench {version}, which this adapter does "
            f"not support (5.x wants records with image/eval_script/log_parser fields, KeyError 'image' "
            f"on standard ones): {HARNESS_INSTALL}"
        )
    return version


def load_hint(image: str) -> str:
    """How to get an instance image into the local engine (the harness never builds one here)."""
    return (
        f"`docker load -i <saved {image.split('/')[-1].split(':')[0]}.tar>` from a copy saved with "
        f"`docker save {image}`, or `docker pull {image}` where Docker Hub is reachable"
    )


def expected_ids(instance: dict[str, Any]) -> list[str]:
    """FAIL_TO_PASS + PASS_TO_PASS of a record (lists, or JSON strings of lists as the dataset has them)."""
    ids: list[str] = []
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        value = instance.get(key) or []
        ids += [str(t) for t in (json.loads(value) if isinstance(value, str) else value)]
    return ids


def read_report(iid: str, logs: Path, output: str, *, expected: Sequence[str] = ()) -> Outcome:
    """The harness's ``report.json`` under the grader contract: a verdict; a patch that does not apply is
    a candidate failure; no report at all is a grader fault (the harness, its Docker engine or the
    instance image failed). With ``expected``, resolved also needs every expected test among the
    harness's successes."""
    report = logs / "report.json"
    if not report.is_file():
        log = logs / "run_instance.log"
        text = log.read_text(errors="replace") if log.is_file() else ""
        if APPLY_PATCH_FAIL in text:
            return CandidateFailure("patch does not apply", {"resolved": 0.0})
        return GraderFault(f"the harness wrote no report for {iid}: {(text or output)[-800:]}")
    entry = json.loads(report.read_text()).get(iid, {})
    resolved = bool(entry.get("resolved"))
    metrics: dict[str, float] = {}
    passed: set[str] = set()
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        status = (entry.get("tests_status") or {}).get(key) or {}
        ok, bad = len(status.get("success", [])), len(status.get("failure", []))
        passed |= {str(t) for t in status.get("success", [])}
        if ok + bad:
            metrics[key.lower()] = ok / (ok + bad)
    missing = [t for t in expected if t not in passed]
    error = None if resolved else "not resolved: FAIL_TO_PASS or PASS_TO_PASS tests fail"
    if resolved and missing:
        resolved, error = False, f"not resolved: expected tests not reported passed: {missing[:5]}"
    metrics = {"resolved": float(resolved), **metrics}
    return Verdict(1.0, metrics) if resolved else CandidateFailure(error or "not resolved", metrics)


def _read_patch(path: Path) -> str | None:
    """The patch text, or None when there is no regular file there; a link is never followed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        return f.read(PATCH_BYTES).decode("utf-8", "replace")


def _screen(instance: dict[str, Any], artifact_dir: Path) -> str | CandidateFailure:
    """The patch in ``artifact_dir``, or why it is refused before the harness runs: none, empty, or what the
    tamper scan finds in what it adds (``scan.patch_findings``: result lines, expected test names)."""
    patch = _read_patch(artifact_dir / "patch.diff")
    if patch is None:
        return CandidateFailure("no patch: expected output/patch.diff (a regular file)")
    if not patch.strip():
        return CandidateFailure("empty patch: output/patch.diff holds no changes")
    names = {_test_name(t) for t in expected_ids(instance)}
    markers = RESULT_MARKERS + tuple(sorted(n for n in names if len(n) >= 8))
    if found := scan.patch_findings(patch, markers):
        return CandidateFailure(f"{TAMPER}: {', '.join(found[:3])}", flags=(TAMPER,))
    return patch


def _test_name(test_id: str) -> str:
    """The function part of a test id: pytest ``path::Class::name[param]``, Django ``name (module.Class)``."""
    return test_id.split(" (", 1)[0].rsplit("::", 1)[-1].split("[", 1)[0]


def _read(path: str | None) -> dict[str, dict[str, Any]]:
    file = local_path(path, "suite.instances", "a local SWE-bench .json or .jsonl file", kind="file")
    text = file.read_text()
    try:
        if file.suffix == ".jsonl":
            records = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            records = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"suite.instances: {file} is not valid JSON/JSONL: {exc}") from exc
    if not isinstance(records, list):
        raise ConfigError(f"suite.instances: {file} must hold a list of instances")
    instances: dict[str, dict[str, Any]] = {}
    for n, record in enumerate(records):
        if not isinstance(record, dict):
            raise ConfigError(f"suite.instances: {file}: entry {n} is not an object")
        if missing := [key for key in REQUIRED if key not in record]:
            name = record.get("instance_id", f"entry {n}")
            raise ConfigError(f"suite.instances: {file}: {name} lacks {', '.join(missing)}")
        instances[str(record["instance_id"])] = record
    return instances
