"""Provenance benchmark: `python bench/provenance.py [--config configs/quickstart.yaml] [--repeat 5] [--json]`.

What the provenance record costs a study, with baselines taken in the same run:
  collect  provenance.collect for CONFIG (git, docker image inspect, nvidia-smi, a content hash per task)
           vs the rest of the study creation it is part of (GitArchive.create + adding the seeds)
  create   GitArchive.create with the record (file, first commit on main, conditions in the journal)
           vs GitArchive.create without it
  record   GitArchive.record of one evaluation, stamped with the conditions hash (a lookup) vs unstamped
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from metasearch import launch, provenance
from metasearch.archive import GitArchive
from metasearch.config import load_config
from metasearch.manifest import load_manifest
from metasearch.report import print_bench_rows
from metasearch.types import Evaluation


def _median_s(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    samples = []
    for i in range(repeat):
        t = time.perf_counter()
        fn(i)
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/provenance.py", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/quickstart.yaml")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--evaluations", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    resolved = load_config(args.config)
    suite = resolved.plugins["suite"].create()
    seeds = launch.preflight(resolved)
    manifests = [load_manifest(p) for p in seeds]
    sandbox = launch.study_sandbox(resolved, study="bench", study_id="bench", seeds=manifests)
    record = provenance.collect(resolved, suite, sandbox)
    text, conditions = provenance.to_json(record), provenance.conditions_hash(record)
    with tempfile.TemporaryDirectory(prefix="ms-bench-provenance-") as tmp:
        root = Path(tmp)

        def bare(i: int) -> GitArchive:
            return GitArchive.create(root / f"bare{i}", study="b", config_text=resolved.to_yaml())

        def recorded(i: int) -> GitArchive:
            return GitArchive.create(
                root / f"rec{i}",
                study="b",
                config_text=resolved.to_yaml(),
                record_files={provenance.RECORD_NAME: text},
                conditions=conditions,
            )

        def creation(i: int) -> None:
            archive = bare(1000 + i)
            for path, manifest in zip(seeds, manifests, strict=True):
                archive.add_seed(manifest.name, path, job_id=f"seed-{path.name}")

        collect_s = _median_s(lambda i: provenance.collect(resolved, suite, sandbox), args.repeat)
        creation_s = _median_s(creation, args.repeat)
        bare_s = _median_s(bare, args.repeat)
        recorded_s = _median_s(recorded, args.repeat)
        stamped, plain = recorded(999), bare(999)
        for archive in (stamped, plain):
            archive.add_seed(manifests[0].name, seeds[0], job_id="seed")
        plain_t, stamped_t = [], []
        for i in range(args.evaluations):  # interleaved, so load and disk warm-up hit both alike
            for archive, samples in ((plain, plain_t), (stamped, stamped_t)):
                t = time.perf_counter()
                archive.record(Evaluation(f"e{i}", "a00000", "t", 0.5))
                samples.append(time.perf_counter() - t)
        plain_s, stamped_s = statistics.median(plain_t), statistics.median(stamped_t)
        assert stamped.index.evaluations["e0"].conditions == conditions
        assert plain.index.evaluations["e0"].conditions is None
    tasks = len(record["suite"]["tasks"])
    rows = [
        {"measure": f"collect ({record['sandbox']['kind']}, {tasks} tasks) vs creating the study, ms",
         "baseline": 1e3 * creation_s, "value": 1e3 * collect_s, "ratio": collect_s / creation_s,
         "target": "once per study"},
        {"measure": "GitArchive.create with the record vs without, ms", "baseline": 1e3 * bare_s,
         "value": 1e3 * recorded_s, "ratio": recorded_s / bare_s, "target": "once per study"},
        {"measure": "record one evaluation, stamped vs unstamped, ms", "baseline": 1e3 * plain_s,
         "value": 1e3 * stamped_s, "ratio": stamped_s / plain_s, "target": "<= 1.1x (a lookup)"},
    ]  # fmt: skip
    if args.json:
        print(json.dumps(rows))
    else:
        print_bench_rows(rows)
    return 0 if stamped_s / plain_s <= 1.1 else 1


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
