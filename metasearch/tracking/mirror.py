"""JournalMirror: replays a study's journal into MLflow, idempotently and resumably.

The journal is the only input. The mirror remembers (in ``mlflow-mirror.json``, per tracking URI) how many
journal bytes MLflow has accepted; on start it rebuilds its statistics from the journal up to there, then
mirrors the rest in batches. A batch whose writes fail stays pending and is retried (see batch.py); a
crash between MLflow accepting a batch and the state file being saved only makes the next start re-send
that batch, which writes nothing new. Agent runs are matched by tag, so a lost state file (or a second
machine) never duplicates them. Not thread-safe: one thread owns a mirror; the process-wide owner is
decided by the lock in ``mlflow_callback``.

What lands in MLflow: one experiment per study; a study run (params: the frozen config, flattened; series
against the evaluation count: tree_size, evaluations, expansions_failed, tokens, cost_usd, best_score,
best_lower_bound; the lineage picture) and one nested run per agent (params: parent_id, branch, commit,
proposer, model, job_id and scalar proposal meta; series: score, own_mean, trials, duration_s and the
suite's metrics against the agent's trial count, cmp and clade_trials against the evaluation count; tags:
state, flags, errors, best_belief; artifacts: proposal.diff.txt, the transcript, per-task evaluation logs,
rejected diffs of failed expansions; start time: the agent's creation; status: SCHEDULED until its first
evaluation starts, RUNNING while one is in flight, then FINISHED, or FAILED once flagged, with the end time
of its latest evaluation). The experiment carries the agents view (``store.view_tags``); the lineage
picture links each node to its agent's run.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from metasearch.archive.journal import utf8_text
from metasearch.errors import ArchiveError, InfrastructureError
from metasearch.provenance import RECORD_NAME, headline, read_record
from metasearch.tracking import store
from metasearch.tracking.batch import STUDY, Batch, NewRun, flatten, log_params
from metasearch.tracking.lineage import lineage_html, lineage_svg, nodes_from_tree
from metasearch.tracking.replay import JournalReplay, config_data, model_params

log = logging.getLogger(__name__)


def provenance_to_run(client: Any, run_id: str, study_dir: Path) -> None:
    """The study's provenance record on its run: params ``provenance.*`` (the record never changes, so a
    repeat is a no-op), headline tags ``metasearch.provenance.*`` and the file as an artifact."""
    record = read_record(study_dir)
    if record is None:
        return
    log_params(client, run_id, flatten(record, "provenance."))
    run_tags = client.get_run(run_id).data.tags
    for key, value in (headline(record) or {}).items():
        if f"metasearch.provenance.{key}" not in run_tags:  # accepted drift may have moved conditions on
            client.set_tag(run_id, utf8_text(f"metasearch.provenance.{key}"), utf8_text(str(value)))
    if "metasearch.provenance.logged" not in run_tags:
        client.log_artifact(run_id, str(Path(study_dir) / RECORD_NAME))
        client.set_tag(run_id, "metasearch.provenance.logged", "true")


class JournalMirror:
    def __init__(
        self,
        study_dir: Path,
        tracking_uri: str | None = None,
        *,
        max_lines: int = 5000,
        lineage_interval_s: float = 30.0,
    ) -> None:
        self.study_dir = Path(study_dir).resolve()
        if not (self.study_dir / "journal.jsonl").is_file():
            raise ArchiveError(f"{self.study_dir}: not a study directory (no journal.jsonl)")
        self.tracking_uri = store.study_tracking_uri(self.study_dir, tracking_uri)
        self.replay = JournalReplay(self.study_dir, max_lines=max_lines)
        self.lineage_interval_s = lineage_interval_s
        self.mirrored = 0  # journal bytes MLflow has accepted
        self.client: Any = None
        self.experiment_id = ""
        self.runs: dict[str, str] = {}  # owner (STUDY or agent id) -> run id
        self._incomplete: set[str] = set()  # agent runs a crash left without their params
        self._status: dict[str, tuple[str, int | None]] = {}  # run id -> (status, end ms) MLflow holds
        self._pending: Batch | None = None
        self._suspect = False  # a write failed: MLflow may hold effects we never saw confirmed
        self._drawn_version = 0
        self._drawn_at = 0.0

    # -- connection -------------------------------------------------------------------------------

    def connect(self) -> None:
        """Find or create the experiment and study run, then rebuild statistics up to the saved offset."""
        self.probe()
        client = store.make_client(self.tracking_uri)
        study = self.replay.study
        exp = store.experiment_for(client, self.study_dir, study, self.tracking_uri)
        store.set_view_tags(client, exp)
        studies = sorted(store.runs_by_kind(client, exp, "study"), key=lambda r: r.info.start_time or 0)
        if studies:
            study_run = studies[0].info.run_id
        else:
            tags = {store.KIND: "study", "metasearch.study": study, store.STUDY_DIR_TAG: str(self.study_dir)}
            tags = utf8_text(tags)
            study_run = client.create_run(exp, run_name=study, tags=tags).info.run_id
        # Every time, not only on creation: a crash may have come between the two (same values: no-op).
        config = config_data(self.study_dir)
        params = {**flatten(config), **model_params(config), "study_dir": str(self.study_dir)}
        log_params(client, study_run, params)
        provenance_to_run(client, study_run, self.study_dir)
        runs: dict[str, str] = {}
        for run in sorted(store.runs_by_kind(client, exp, "agent"), key=lambda r: r.info.start_time or 0):
            agent_id = run.data.tags.get(store.AGENT_ID, "")
            if agent_id and agent_id not in runs:
                runs[agent_id] = run.info.run_id
                self._status[run.info.run_id] = (run.info.status, run.info.end_time)
                if "commit" not in run.data.params:  # params go in the first write after the create
                    self._incomplete.add(agent_id)
        state = store.load_state(self.study_dir, self.tracking_uri)
        trusted = state.get("experiment_id") == exp and state.get("study_run_id") == study_run
        offset = int(state.get("offset", 0)) if trusted else 0
        self.client, self.experiment_id = client, exp
        self.runs = {**runs, STUDY: study_run}
        self.replay.study_run_id = study_run
        if offset > self.replay.parsed:  # statistics only: MLflow already has these lines
            self.replay.read(None, stop_at=offset)
            self.mirrored = self.replay.parsed
        log.info(
            "mirroring %s to %s (experiment %s) from byte %d", self.study_dir, self.tracking_uri, exp, offset
        )

    def probe(self) -> None:
        """Fail fast when an HTTP tracking server is down (MLflow's own retries take minutes)."""
        if not self.tracking_uri.startswith(("http://", "https://")):
            return
        import httpx

        try:
            httpx.get(self.tracking_uri.rstrip("/") + "/health", timeout=3.0).raise_for_status()
        except httpx.HTTPError as exc:
            raise InfrastructureError(f"MLflow server {self.tracking_uri} is not answering: {exc}") from exc

    # -- mirroring --------------------------------------------------------------------------------

    def step(self) -> int:
        """Mirror up to ``max_lines`` new journal lines. Returns how many were mirrored (0: caught up).

        Raises whatever MLflow raises; the batch stays pending and the next call retries it.
        """
        if self.client is None:
            self.connect()
        elif self._suspect:
            self.probe()
        if self._pending is None:
            batch = Batch(start=self.replay.parsed)
            self.replay.read(batch)
            self._pending = batch
        batch = self._pending
        try:
            batch.send(self.client, self.runs.__getitem__, self._create_run, self._set_status)
        except Exception:
            self._suspect = True
            raise
        self._pending = None
        self._suspect = False
        if batch.end > self.mirrored:
            self.mirrored = batch.end
            state = {
                "experiment_id": self.experiment_id,
                "study_run_id": self.runs[STUDY],
                "offset": batch.end,
            }
            store.save_state(self.study_dir, self.tracking_uri, state)
        return batch.lines

    def catch_up(self, deadline: float | None = None) -> int:
        """``step`` until caught up (or past ``deadline``, a ``time.monotonic`` value); returns lines mirrored."""
        total = 0
        while deadline is None or time.monotonic() < deadline:
            n = self.step()
            total += n
            if n == 0:
                break
        return total

    def draw_lineage(self, *, force: bool = False) -> bool:
        """Log lineage.html and lineage.svg on the study run if the tree changed (at most every interval)."""
        version = self.replay.tree_version
        if self.client is None or self._drawn_version == version:
            return False
        if not force and time.monotonic() - self._drawn_at < self.lineage_interval_s:
            return False
        nodes = nodes_from_tree(self.replay.tree, self.replay.summaries)
        best = self.replay.best
        title = f"{self.replay.study}: lineage of {len(nodes)} agents"
        links: dict[str, Any] = {"runs": self.runs, "experiment_id": self.experiment_id}
        with tempfile.TemporaryDirectory(prefix="ms-lineage-") as tmp:
            for name, text in (
                ("lineage.html", lineage_html(nodes, best=best, title=title, **links)),
                ("lineage.svg", lineage_svg(nodes, best=best, title=title, **links)),
            ):
                path = Path(tmp) / name
                path.write_text(text)
                self.client.log_artifact(self.runs[STUDY], str(path), "lineage")
        self._drawn_version, self._drawn_at = version, time.monotonic()
        return True

    def _create_run(self, new: NewRun, log_first: Callable[[str], None]) -> str:
        """Create (or complete) an agent's run; its params, written first, mark it complete. The status
        comes with the batch (``_set_status``)."""
        agent_id = new.agent.id
        run_id = self.runs.get(agent_id)
        if run_id is None and self._suspect:  # a create may have succeeded before the failure
            found = self.client.search_runs(
                [self.experiment_id], f"tags.`{store.AGENT_ID}` = '{agent_id}'", max_results=1
            )
            if found:
                run_id = found[0].info.run_id
                self._incomplete.add(agent_id)
        if run_id is not None and agent_id not in self._incomplete:
            self.runs[agent_id] = run_id
            return run_id
        if run_id is None:
            start_ms = int(new.agent.created_at * 1000)
            run = self.client.create_run(
                self.experiment_id, start_time=start_ms, tags=new.tags, run_name=agent_id
            )
            run_id = run.info.run_id
            self.runs[agent_id] = run_id
            self._status[run_id] = (run.info.status, None)
            self._incomplete.add(agent_id)
        log_first(run_id)
        self._incomplete.discard(agent_id)
        return run_id

    def _set_status(self, run_id: str, status: str, end_ms: int | None) -> None:
        """Write an agent run's status when it differs from what MLflow holds: a terminal one with its
        end time, a live one (RUNNING, SCHEDULED) keeping the end time it had (MLflow cannot clear it)."""
        known = self._status.get(run_id)
        if end_ms is None:
            if known is not None and known[0] == status:
                return
            self.client.update_run(run_id, status=status)
            self._status[run_id] = (status, known[1] if known else None)
        else:
            if known == (status, end_ms):
                return
            self.client.set_terminated(run_id, status, end_ms)
            self._status[run_id] = (status, end_ms)
