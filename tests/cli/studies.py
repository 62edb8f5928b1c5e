"""Small real studies for CLI tests, written through the archive's own API (no run needed)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from metasearch.archive import GitArchive
from metasearch.config import load_config
from metasearch.types import Evaluate, Evaluation, Expand

ROOT = Path(__file__).resolve().parents[2]
TASKS = ("training/xor", "training/spirals")


def make_study(root: Path, name: str = "s", *, open_jobs: bool = True) -> tuple[Path, GitArchive]:
    """The quickstart's config, the trainer seed, two evaluations; with ``open_jobs`` two jobs running
    (the returned archive holds the lease: close it), else a child and a finished study."""
    resolved = load_config(
        ROOT / "configs" / "quickstart.yaml", ["budget.evaluations=8", "budget.tokens=1000"]
    )
    study = root / name
    archive = GitArchive.create(study, study=name, config_text=resolved.to_yaml())
    seed = archive.add_seed("trainer", ROOT / "seeds" / "trainer", job_id="seed-trainer")
    for i, task in enumerate(TASKS):
        archive.record(Evaluation(job_id=f"ev{i}", agent_id=seed.id, task_id=task, score=0.5 + 0.25 * i))
    archive.add_usage("ev0", 250, 0.0)
    archive.heartbeat()
    if open_jobs:
        archive.start_job(Evaluate(agent_id=seed.id, task_id="training/regression", job_id="job-eval"))
        archive.start_job(Expand(parent_id=seed.id, job_id="job-expand"))
        return study, archive
    workspace = root / f"{name}-child"
    shutil.copytree(ROOT / "seeds" / "trainer", workspace)
    knobs = json.loads((workspace / "knobs.json").read_text())
    (workspace / "knobs.json").write_text(json.dumps({**knobs, "hidden": 16}, indent=2) + "\n")
    child = archive.add_child(seed.id, workspace, job_id="expand-1", meta={"summary": "knobs: hidden=16"})
    for i, task in enumerate(TASKS):
        archive.record(Evaluation(job_id=f"ev-child{i}", agent_id=child.id, task_id=task, score=0.9))
    archive.finish("budget exhausted: evaluations")
    return study, archive
