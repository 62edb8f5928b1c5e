from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import pytest

from metasearch.archive import GitArchive
from metasearch.events import ExpansionRejected
from metasearch.proposers.base import ProposalContext, ProposalFailed
from metasearch.proposers.knobs import MAX_KNOBS_BYTES, OPTUNA_STUDY, TRIAL_META, KnobsProposer, read_knobs
from metasearch.runner import Runner
from metasearch.sandboxes.local import LocalSandbox
from metasearch.suites.protocol import Suite, Task, TaskResult
from metasearch.types import Agent, Evaluation, Expand

MANIFEST = """
name = "demo"
[entry]
solve = ["python3", "solve.py"]
[knobs]
file = "knobs.json"
[knobs.params.lr]
type = "float"
low = 0.0001
high = 1.0
log = true
[knobs.params.width]
type = "int"
low = 4
high = 64
[knobs.params.opt]
type = "categorical"
choices = ["sgd", "adam"]
"""

PARENT = Agent(id="a00000", parent_id=None, commit="0" * 40, branch="agents/a00000", created_at=0.0)


def _workspace(tmp_path: Path, name: str) -> Path:
    ws = tmp_path / name
    ws.mkdir()
    (ws / "agent.toml").write_text(MANIFEST)
    (ws / "knobs.json").write_text(json.dumps({"lr": 0.01, "width": 8, "opt": "sgd", "other": 1}))
    return ws


def _context(tmp_path: Path, job_id: str, **kw: Any) -> ProposalContext:
    return ProposalContext(
        job_id=job_id,
        study_dir=tmp_path,
        log_dir=tmp_path,
        sandbox=None,
        suite_description="",
        **kw,  # type: ignore[arg-type]
    )


def test_writes_sampled_values_within_ranges(tmp_path: Path) -> None:
    proposer = KnobsProposer(KnobsProposer.Config(), study_dir=tmp_path)
    ws = _workspace(tmp_path, "ws")
    proposal = proposer.propose(PARENT, ws, _context(tmp_path, "job-1"))
    values = json.loads((ws / "knobs.json").read_text())
    assert 1e-4 <= values["lr"] <= 1.0 and 4 <= values["width"] <= 64 and values["opt"] in ("sgd", "adam")
    assert values["other"] == 1, "undeclared keys are kept"
    assert proposal.meta[TRIAL_META] == 0
    assert proposal.summary.startswith("knobs:")


def test_tells_optuna_when_child_has_enough_evaluations(tmp_path: Path) -> None:
    proposer = KnobsProposer(KnobsProposer.Config(min_evaluations=2), study_dir=tmp_path)
    p1 = proposer.propose(PARENT, _workspace(tmp_path, "w1"), _context(tmp_path, "job-1"))
    proposer.propose(PARENT, _workspace(tmp_path, "w2"), _context(tmp_path, "job-2"))
    child = Agent("a00001", PARENT.id, "1" * 40, "agents/a00001", 0.0, meta={"job_id": "job-1", **p1.meta})
    evals = [
        Evaluation(job_id=f"e{i}", agent_id=child.id, task_id=f"t{i}", score=s)
        for i, s in enumerate([0.5, 0.7])
    ]
    ctx = _context(
        tmp_path, "job-3", agents={child.id: child}, evaluations=evals, extra={"failed_job_ids": ["job-2"]}
    )
    proposer.propose(PARENT, _workspace(tmp_path, "w3"), ctx)
    # the storage is Optuna's own journal file: reopen it independently
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "optuna.journal"))
    )
    trials = optuna.load_study(study_name=OPTUNA_STUDY, storage=storage).trials
    assert trials[0].state == optuna.trial.TrialState.COMPLETE and trials[0].value == pytest.approx(0.6)
    assert trials[1].state == optuna.trial.TrialState.FAIL
    assert trials[2].state == optuna.trial.TrialState.RUNNING


def test_agent_without_knobs_is_a_proposal_failure(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "agent.toml").write_text('name = "x"\n[entry]\nsolve = ["true"]\n')
    with pytest.raises(ProposalFailed, match="declares no knobs"):
        KnobsProposer(KnobsProposer.Config(), study_dir=tmp_path).propose(PARENT, ws, _context(tmp_path, "j"))


def test_mutate_mode_changes_one_or_two_knobs_of_the_parent(tmp_path: Path) -> None:
    proposer = KnobsProposer(KnobsProposer.Config(mode="mutate", mutate_k=2), study_dir=tmp_path)
    counts = []
    for i in range(8):
        ws = _workspace(tmp_path, f"m{i}")
        before = json.loads((ws / "knobs.json").read_text())
        proposer.propose(PARENT, ws, _context(tmp_path, f"job-{i}"))
        after = json.loads((ws / "knobs.json").read_text())
        counts.append(sum(before[k] != after[k] for k in ("lr", "width", "opt")))
    assert max(counts) <= 2 and sum(counts) > 0


def test_global_mode_samples_every_knob(tmp_path: Path) -> None:
    proposer = KnobsProposer(KnobsProposer.Config(mode="global"), study_dir=tmp_path)
    ws = _workspace(tmp_path, "g")
    proposer.propose(PARENT, ws, _context(tmp_path, "job-g"))
    after = json.loads((ws / "knobs.json").read_text())
    assert after["lr"] != 0.01 and after["width"] != 8


def test_the_storage_opens_in_optuna_dashboard(tmp_path: Path) -> None:
    """`optuna-dashboard <study_dir>/optuna.journal` serves the knobs study with its trials."""
    import shutil
    import socket
    import subprocess
    import sys
    import time

    import httpx

    dashboard = shutil.which("optuna-dashboard") or str(Path(sys.executable).with_name("optuna-dashboard"))
    if not Path(dashboard).exists():
        pytest.skip("optuna-dashboard is not installed (pip install optuna-dashboard)")
    test_tells_optuna_when_child_has_enough_evaluations(tmp_path)  # one complete, one failed, one running
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [dashboard, str(tmp_path / "optuna.journal"), "--port", str(port), "--host", "127.0.0.1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                studies = httpx.get(f"http://127.0.0.1:{port}/api/studies", timeout=5).json()[
                    "study_summaries"
                ]
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "optuna-dashboard did not answer"
                time.sleep(0.5)
        [study] = [s for s in studies if s["study_name"] == OPTUNA_STUDY]
        detail = httpx.get(f"http://127.0.0.1:{port}/api/studies/{study['study_id']}", timeout=10).json()
        states = sorted(t["state"] for t in detail["trials"])
        assert states == ["Complete", "Fail", "Running"], states
        assert {p["name"] for p in detail["trials"][0]["params"]} >= {"lr", "width", "opt"}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_untried_knobs_come_first_then_the_ones_whose_changes_helped() -> None:
    import random

    from metasearch.proposers.knobs import choose_knobs

    names = ["a", "b", "c", "d"]
    rng = random.Random(0)
    first = [choose_knobs(names, {}, 1, rng)[0] for _ in range(200)]
    assert set(first) == set(names)  # nothing tried: any knob
    assert choose_knobs(names, {"a": (1, 0), "b": (2, 1), "c": (1, 1)}, 1, rng) == ["d"]  # untried first
    credit = {"a": (6, 0), "b": (6, 5), "c": (6, 1), "d": (6, 0)}
    picks = [choose_knobs(names, credit, 1, rng)[0] for _ in range(400)]
    assert picks.count("b") > 300  # the knob whose changes made children better


def test_credit_counts_children_that_beat_their_parent(tmp_path: Path) -> None:
    from metasearch.proposers.knobs import CHANGED_META, _knob_credit

    agents = {
        "p": Agent("p", None, "0" * 40, "agents/p", 0.0),
        "c1": Agent("c1", "p", "1" * 40, "agents/c1", 0.0, meta={CHANGED_META: ["lr"]}),
        "c2": Agent("c2", "p", "2" * 40, "agents/c2", 0.0, meta={CHANGED_META: ["lr", "opt"]}),
        "c3": Agent("c3", "p", "3" * 40, "agents/c3", 0.0, meta={CHANGED_META: ["opt"]}),  # not evaluated yet
    }
    ctx = _context(tmp_path, "job-9", agents=agents)
    ctx = ProposalContext(**{**ctx.__dict__, "lineage_scores": {"p": 0.5, "c1": 0.7, "c2": 0.4}})
    assert _knob_credit(ctx) == {"lr": (2, 1), "opt": (2, 0)}


def _proposed(tmp_path: Path, name: str, config: KnobsProposer.Config, history: int = 4) -> list[dict]:
    """Values of the children proposed after ``history`` finished trials (told a score by lr)."""
    study_dir = tmp_path / name
    study_dir.mkdir()
    proposer = KnobsProposer(config, study_dir=study_dir)
    study = proposer._optuna()
    dist = {"lr": optuna.distributions.FloatDistribution(1e-4, 1.0, log=True)}
    for i in range(history):
        trial = study.ask(dist)
        study.tell(trial, -abs(trial.params["lr"] - 0.05) + 0.001 * i)
    out = []
    for i in range(3):
        ws = _workspace(study_dir, f"w{i}")
        proposer.propose(PARENT, ws, _context(study_dir, f"job-{i}"))
        out.append(json.loads((ws / "knobs.json").read_text()))
    return out


@pytest.mark.parametrize(
    ("base", "changed"),
    [
        ({"mode": "global", "sampler": "tpe", "n_startup_trials": 0}, {"sampler": "random"}),
        ({"mode": "global", "n_startup_trials": 0}, {"n_startup_trials": 10}),
        ({"mode": "global"}, {"seed": 1}),
        ({"mode": "mutate"}, {"seed": 1}),
        ({"mode": "mutate"}, {"mode": "global"}),
    ],
)
def test_each_option_changes_the_children(tmp_path: Path, base: dict, changed: dict) -> None:
    before = _proposed(tmp_path, "a", KnobsProposer.Config(**base))
    after = _proposed(tmp_path, "b", KnobsProposer.Config(**base | changed))
    assert before != after


def test_mutate_k_bounds_how_many_knobs_change(tmp_path: Path) -> None:
    for k, expected in ((1, {1}), (3, {1, 2, 3})):
        (tmp_path / f"k{k}").mkdir()
        proposer = KnobsProposer(KnobsProposer.Config(mutate_k=k), study_dir=tmp_path / f"k{k}")
        counts = set()
        for i in range(12):
            ws = _workspace(tmp_path, f"k{k}-{i}")
            proposer.propose(PARENT, ws, _context(tmp_path, f"job-{k}-{i}"))
            after = json.loads((ws / "knobs.json").read_text())
            counts.add(sum(after[n] != v for n, v in {"lr": 0.01, "width": 8, "opt": "sgd"}.items()))
        assert counts <= expected and (k == 1 or len(counts) > 1)


def test_sampler_options_need_global_mode() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="only used with mode: global"):
        KnobsProposer.Config(mode="mutate", sampler="random")
    assert KnobsProposer.Config(mode="global", sampler="random").sampler == "random"


@pytest.mark.parametrize(("min_evaluations", "state"), [(2, "COMPLETE"), (3, "RUNNING")])
def test_min_evaluations_decides_when_optuna_hears_the_score(
    tmp_path: Path, min_evaluations: int, state: str
) -> None:
    proposer = KnobsProposer(KnobsProposer.Config(min_evaluations=min_evaluations), study_dir=tmp_path)
    p1 = proposer.propose(PARENT, _workspace(tmp_path, "w1"), _context(tmp_path, "job-1"))
    child = Agent("a00001", PARENT.id, "1" * 40, "agents/a00001", 0.0, meta={"job_id": "job-1", **p1.meta})
    evals = [Evaluation(job_id=f"e{i}", agent_id=child.id, task_id=f"t{i}", score=0.5) for i in range(2)]
    ctx = _context(tmp_path, "job-2", agents={child.id: child}, evaluations=evals)
    proposer.propose(PARENT, _workspace(tmp_path, "w2"), ctx)
    assert proposer._optuna().trials[0].state == getattr(optuna.trial.TrialState, state)


HOST_FILE = '{"credsStore": "desktop"}\n'


def _link_to_host(ws: Path, host: Path) -> None:
    (ws / "knobs.json").unlink()
    (ws / "knobs.json").symlink_to(host / "victim.json")


def _folder_link_to_host(ws: Path, host: Path) -> None:
    (ws / "agent.toml").write_text(MANIFEST.replace('"knobs.json"', '"conf/victim.json"'))
    (ws / "conf").symlink_to(host)


@pytest.mark.parametrize(
    ("plant", "reason"),
    [
        (_link_to_host, "not links"),
        (_folder_link_to_host, "not links"),
        (lambda ws, host: ((ws / "knobs.json").unlink(), os.mkfifo(ws / "knobs.json")), "not a regular file"),
        (lambda ws, host: ((ws / "knobs.json").unlink(), (ws / "knobs.json").mkdir()), "not a regular file"),
        (lambda ws, host: (ws / "knobs.json").write_text(" " * (MAX_KNOBS_BYTES + 1)), "larger than"),
        (lambda ws, host: (ws / "knobs.json").write_text("[" * 100_000), "nested too deeply"),
        (lambda ws, host: (ws / "knobs.json").write_bytes(b'{"lr": "\xff"}'), "not valid UTF-8 JSON"),
        (lambda ws, host: (ws / "knobs.json").write_text("[1, 2]"), "JSON object"),
    ],
)
def test_a_bad_knobs_file_fails_the_proposal_and_no_host_file_is_touched(
    tmp_path: Path, plant: Callable[[Path, Path], object], reason: str
) -> None:
    host = tmp_path / "host"
    host.mkdir()
    (host / "victim.json").write_text(HOST_FILE)
    ws = _workspace(tmp_path, "ws")
    plant(ws, host)
    proposer = KnobsProposer(KnobsProposer.Config(), study_dir=tmp_path)
    with pytest.raises(ProposalFailed, match=r"knobs\.file .*" + reason):
        proposer.propose(PARENT, ws, _context(tmp_path, "job-1"))
    assert (host / "victim.json").read_text() == HOST_FILE
    assert sorted(p.name for p in host.iterdir()) == ["victim.json"]


def test_the_reader_refuses_paths_that_leave_the_tree(tmp_path: Path) -> None:
    for name in ("/dev/zero", "../victim.json"):  # the manifest refuses these first; the reader again
        with pytest.raises(ProposalFailed, match="relative path inside the agent's tree"):
            read_knobs(tmp_path, name)
    assert read_knobs(tmp_path, "missing.json") == {}


class _OneTask(Suite):
    name = "s"
    description = "d"

    def tasks(self, subset: str | None = None) -> list[Task]:
        return [Task(id="t1", suite="s", statement="x", timeout_s=60)]

    def prepare(self, task_id: str, dest: Path) -> None:
        (dest / "output").mkdir()

    def grade(self, task_id: str, artifact_dir: Path, sandbox: Any) -> TaskResult:
        return TaskResult(score=0.5)


def test_a_committed_link_as_knobs_file_is_a_rejected_expansion(tmp_path: Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    (host / "victim.json").write_text(HOST_FILE)
    seed = _workspace(tmp_path, "seed")
    _link_to_host(seed, host)  # committed by an earlier (code-writing) proposer, say
    archive = GitArchive.create(tmp_path / "study", study="s", config_text="{}\n")
    parent = archive.add_seed("s", seed, job_id="seed")
    suite = _OneTask()
    proposer = KnobsProposer(KnobsProposer.Config(), study_dir=archive.root)
    runner = Runner(archive, suite, LocalSandbox(), proposer, "knobs", {t.id: t for t in suite.tasks()})
    outcome = runner(Expand(parent.id))
    assert isinstance(outcome, ExpansionRejected) and "knobs.file 'knobs.json'" in outcome.reason
    assert (host / "victim.json").read_text() == HOST_FILE
    archive.close()
