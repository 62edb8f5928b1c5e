"""Drift: what changed between two provenance records, and the resume check that refuses it.

``compare`` lists every difference between two records (flattened keys, old and new value) and splits them
into score-deciding ones (``provenance.SCORE_DECIDING``: scores made before and after are not comparable)
and harmless ones (a newer MLflow, another scheduler option). ``check_resume`` is what ``metasearch
resume`` runs before anything is written: score-deciding drift raises ``DriftRefused`` naming each
difference, unless the user accepts it; harmless drift is logged as warnings.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metasearch.archive import read_index
from metasearch.errors import MetasearchError
from metasearch.provenance import conditions_hash, flatten, read_record, score_deciding

log = logging.getLogger(__name__)


class DriftRefused(MetasearchError):
    """Conditions that decide scores changed since the study's record; ``differences`` names them."""

    def __init__(self, message: str, differences: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.differences = differences


@dataclass(frozen=True)
class Drift:
    deciding: list[dict[str, Any]]
    harmless: list[dict[str, Any]]

    @property
    def all(self) -> list[dict[str, Any]]:
        return self.deciding + self.harmless


def compare(old: dict[str, Any], new: dict[str, Any]) -> Drift:
    """Every flattened key whose value differs (or exists on one side only), as ``{key, old, new}``.

    A key is score-deciding when it is under either record's rules (a switch to local sandboxes makes the
    host's numerics decide scores)."""
    a, b = flatten(old), flatten(new)
    deciding: list[dict[str, Any]] = []
    harmless: list[dict[str, Any]] = []
    for key in sorted(set(a) | set(b)):
        if a.get(key) == b.get(key):
            continue
        diff = {"key": key, "old": a.get(key), "new": b.get(key)}
        (deciding if score_deciding(key, old) or score_deciding(key, new) else harmless).append(diff)
    return Drift(deciding, harmless)


def describe(differences: list[dict[str, Any]]) -> str:
    return "\n".join(f"  {d['key']}: {_show(d['old'])} -> {_show(d['new'])}" for d in differences)


def check_resume(study_dir: Path, baseline: dict[str, Any], today: dict[str, Any], *, accept: bool) -> Drift:
    """Raise ``DriftRefused`` when score-deciding conditions changed and ``accept`` is false; log the
    harmless changes as warnings. Returns the drift (the caller journals it when accepted)."""
    drift = compare(baseline, today)
    for d in drift.harmless:
        log.warning("%s: changed since the study's record (harmless): %s", study_dir, describe([d]).strip())
    if drift.deciding and not accept:
        raise DriftRefused(
            f"{study_dir}: conditions that decide scores changed since the study's record, so new scores "
            f"would not be comparable with the old ones:\n{describe(drift.deciding)}\n"
            "Restore them, or resume with --accept-drift to go on anyway (the differences are journaled).",
            drift.deciding,
        )
    return drift


def baseline_record(study_dir: Path, drift_events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The conditions in force: the record of the latest accepted drift, else ``provenance.json``."""
    for event in reversed(drift_events):
        if isinstance(event.get("record"), dict):
            return dict(event["record"])
    return read_record(study_dir)


def diff_runs(study_a: Path, study_b: Path) -> dict[str, Any]:
    """What differs between two studies' conditions (their records in force), for ``metasearch diff-runs``."""
    records = []
    for study in (study_a, study_b):
        record = baseline_record(study, read_index(study).drift)
        if record is None:
            raise MetasearchError(f"{study}: no provenance record (created before metasearch kept one)")
        records.append(record)
    drift = compare(records[0], records[1])
    hashes = [conditions_hash(r) for r in records]
    return {
        "a": str(study_a),
        "b": str(study_b),
        "conditions": hashes,
        "comparable": not drift.deciding,
        "score_deciding": drift.deciding,
        "harmless": drift.harmless,
    }


def _show(value: Any) -> str:
    if value is None:
        return "(none)"
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 120 else text[:117] + "..."
