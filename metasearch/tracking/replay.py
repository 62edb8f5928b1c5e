"""JournalReplay: the statistics a mirror derives from the journal, and the MLflow writes they imply.

Reads complete journal lines from a byte offset (a torn last line is a write in progress and waits for the
next read; every string in a line is made valid UTF-8, as the journal writes them now, for lines an older
version wrote), keeps the clade statistics current (a ``SearchTree`` like the study's own), and, when given a
``Batch``, fills it with what MLflow should receive for those lines. Without a batch it only rebuilds
statistics, which is how a mirror resumes from the offset MLflow already has. Not thread-safe.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from metasearch.archive.journal import utf8_text
from metasearch.archive.tally import ModelLedger
from metasearch.config import load_config_data
from metasearch.schedulers.base import SearchState
from metasearch.schedulers.cmp import SearchTree
from metasearch.schedulers.final import agent_stats, select_final
from metasearch.tracking import store
from metasearch.tracking.batch import STUDY, Batch, NewRun, flatten, scalar_items
from metasearch.types import Agent, Usage

log = logging.getLogger(__name__)

_AGENT_META_PARAMS = {
    "job_id",
    "summary",
    "rationale",
    "transcript_path",
    "tokens",
    "cost_usd",
    "proposer",
    "model",
}
DIFF_ARTIFACT = "proposal.diff.txt"
_STATISTICS = frozenset({"agent_added", "evaluation_recorded", "expansion_failed", "usage"})
_STATUS_OPS = frozenset({"agent_added", "evaluation_recorded", "job_started", "job_abandoned"})
MODEL_METRICS = ("expansions", "children", "better", "mean_gain", "gain_per_mtok", "tokens", "cost_usd")


class JournalReplay:
    def __init__(self, study_dir: Path, *, max_lines: int = 5000) -> None:
        self.study_dir = Path(study_dir).resolve()
        self.journal = self.study_dir / "journal.jsonl"
        self.study = study_name(self.journal) or self.study_dir.name
        self.max_lines = max_lines
        self.study_run_id = ""  # set by the mirror once it knows it
        self.parsed = 0  # journal bytes read so far
        self.tree = SearchTree()
        self.agents: dict[str, Agent] = {}
        self.summaries: dict[str, str] = {}
        self.tasks: set[str] = set()
        self.flags: dict[str, set[str]] = {}
        self.errors: Counter[str] = Counter()
        self.conditions: dict[str, set[str]] = {}  # agent id -> conditions hashes of its evaluations
        self.failed: Counter[str] = Counter()
        self.failed_kinds: Counter[str] = (
            Counter()
        )  # failed expansions by class (proposers.base.FAILURE_KINDS)
        self.evaluations = 0
        self.tokens = 0
        self.cost_usd = 0.0
        self.finished = False
        self.retired_tasks: dict[str, str] = {}  # task id -> why no candidate can be graded on it here
        self.best: str | None = None
        self.tree_version = 0  # bumps whenever the lineage picture would change
        self.open_evaluations: dict[str, str] = {}  # evaluate job id -> agent id, started and not closed
        self.last_evaluation_ms: dict[str, int] = {}
        self._touched: set[str] = set()
        self._status_touched: set[str] = set()
        self._dirty = False  # the batch changed a statistic (lease and job lines do not)
        self._ts_ms = 0
        self._select = _final_selector(self.study_dir)
        self._model = _configured_model(self.study_dir)
        self.models = ModelLedger()  # per meta-agent model: what its expansions spent and earned

    def best_belief(self) -> str | None:
        """The agent the study's final-selection rule picks now."""
        return self._select(self.tree, self)

    def read(self, batch: Batch | None, stop_at: int | None = None) -> None:
        """Consume up to ``max_lines`` complete lines (all of them up to ``stop_at`` when replaying)."""
        lines = 0
        with open(self.journal, "rb") as f:
            f.seek(self.parsed)
            for raw in f:
                if not raw.endswith(b"\n") or (stop_at is not None and self.parsed >= stop_at):
                    break  # a torn last line is a write in progress: read it next time
                self.parsed += len(raw)
                try:
                    event = utf8_text(json.loads(raw))
                except ValueError:
                    log.warning(
                        "%s: skipping an unreadable journal line at byte %d", self.journal, self.parsed
                    )
                    continue
                self._apply(event, batch)
                lines += 1
                if batch is not None and lines >= self.max_lines:
                    break
        if batch is not None:
            batch.end, batch.lines = self.parsed, lines
            if self._dirty:
                self._close_batch(batch)
            for agent_id in self._status_touched:
                batch.statuses[agent_id] = self.run_status(agent_id)
        elif self._dirty:  # resuming: the best-belief tag MLflow holds is this one
            self.best = self.best_belief()
        self._touched.clear()
        self._status_touched.clear()
        self._dirty = False

    def _apply(self, event: dict[str, Any], batch: Batch | None) -> None:
        op = event.get("op")
        self.models.apply(event)
        if op in _STATUS_OPS:
            self._track_open(op, event)
        if op in _STATISTICS:  # series points carry the time of the last statistic, not of a heartbeat
            self._ts_ms = int(float(event.get("ts", 0)) * 1000)
            self._dirty = True
        if op == "agent_added":
            self._agent_added(event, batch)
        elif op == "evaluation_recorded":
            self._evaluation(event["evaluation"], batch)
        elif op == "expansion_failed":
            self._expansion_failed(event, batch)
        elif op == "usage":
            self.tokens += int(event.get("tokens", 0))
            self.cost_usd += float(event.get("cost_usd", 0.0))
        elif op == "study_finished":
            self.finished = True
            if batch is not None:
                batch.tag(STUDY, "metasearch.finished", str(event.get("reason", "")))
                batch.study_status = "FINISHED"
                batch.study_end_ms = int(float(event.get("ts", 0)) * 1000) or None
        elif op == "drift_accepted" and batch is not None:
            changed = [d for d in event.get("differences") or () if d.get("score_deciding")]
            batch.tag(STUDY, "metasearch.provenance.conditions", str(event.get("conditions")))
            batch.tag(
                STUDY,
                "metasearch.drift_accepted",
                "; ".join(f"{d['key']}: {d['old']} -> {d['new']}" for d in changed),
            )
        elif op == "task_retired":
            self.retired_tasks[str(event.get("task_id"))] = str(event.get("reason", ""))
            if batch is not None:
                retired = "; ".join(
                    f"{t}: {r.splitlines()[0] if r else ''}" for t, r in self.retired_tasks.items()
                )
                batch.tag(STUDY, "metasearch.retired_tasks", retired[:5000])
        elif op == "job_started" and self.finished:
            self.finished = False
            if batch is not None:
                batch.study_status = "RUNNING"

    def run_status(self, agent_id: str) -> tuple[str, int | None]:
        """The MLflow status and end time (ms) of an agent's run: RUNNING while an evaluation of it is in
        flight, SCHEDULED before its first, then FINISHED (FAILED when an evaluation was flagged) ending
        at its latest evaluation. A pure function of the journal prefix, like every mirrored value."""
        if agent_id in self.open_evaluations.values():
            return "RUNNING", None
        end = self.last_evaluation_ms.get(agent_id)
        if end is None:
            return "SCHEDULED", None
        return ("FAILED" if self.flags.get(agent_id) else "FINISHED"), end

    def _track_open(self, op: str, event: dict[str, Any]) -> None:
        job_id = str(event.get("job_id") or "")
        if op == "job_started":
            job = event.get("job") or {}
            if job.get("kind") == "evaluate" and job.get("agent_id") in self.tree:
                self.open_evaluations[job_id] = str(job["agent_id"])
                self._status_touched.add(str(job["agent_id"]))
            return
        if op == "agent_added":
            self._status_touched.add(str(event["agent"]["id"]))
            return
        agent_id = self.open_evaluations.pop(job_id, None)
        if op == "evaluation_recorded" and event["evaluation"]["agent_id"] in self.tree:
            agent_id = str(event["evaluation"]["agent_id"])
            self.last_evaluation_ms[agent_id] = int(float(event.get("ts", 0)) * 1000)
        if agent_id is not None:
            self._status_touched.add(agent_id)

    def _agent_added(self, event: dict[str, Any], batch: Batch | None) -> None:
        a = event["agent"]
        if a["id"] in self.tree or (a["parent_id"] is not None and a["parent_id"] not in self.tree):
            log.warning("journal: skipping agent_added for %s (duplicate or unknown parent)", a["id"])
            return
        agent = Agent(
            a["id"], a["parent_id"], a["commit"], a["branch"], float(a["created_at"]), a.get("meta") or {}
        )
        self.tree.add_agent(agent.id, agent.parent_id)
        self.agents[agent.id] = agent
        meta = dict(agent.meta)
        self.summaries[agent.id] = str(meta.get("summary") or meta.get("seed") or "")
        self.tree_version += 1
        if batch is None:
            return
        note = f"**{self.summaries[agent.id]}**\n\n{meta.get('rationale') or ''}".strip()
        tags = {
            "mlflow.parentRunId": self.study_run_id,
            store.KIND: "agent",
            store.AGENT_ID: agent.id,
            "metasearch.study": self.study,
            "metasearch.parent_id": agent.parent_id or "",
            "metasearch.state": "seed" if agent.parent_id is None else "proposed",
            "mlflow.note.content": note,
        }
        params = {
            "parent_id": agent.parent_id or "none",
            "branch": agent.branch,
            "commit": agent.commit,
            "proposer": str(meta.get("proposer") or ("seed" if agent.parent_id is None else "unknown")),
            "model": str(meta.get("model") or self._model or "none"),
            "job_id": str(meta.get("job_id", "")),
            **scalar_items(meta, _AGENT_META_PARAMS),
        }
        batch.new_runs.append(NewRun(agent, tags, params))
        job_dir = self.study_dir / "logs" / str(meta.get("job_id", ""))
        if (job_dir / "proposal.diff").is_file():  # .txt: the MLflow UI previews it (not a .diff)
            batch.artifact(agent.id, str(job_dir / "proposal.diff"), name=DIFF_ARTIFACT)
        transcript = meta.get("transcript_path")
        if transcript:
            path = Path(transcript) if Path(transcript).is_absolute() else self.study_dir / transcript
            if path.exists():
                batch.artifact(agent.id, str(path), "transcript")

    def _evaluation(self, e: dict[str, Any], batch: Batch | None) -> None:
        agent_id = e["agent_id"]
        if agent_id not in self.tree:
            log.warning("journal: skipping an evaluation of unknown agent %s", agent_id)
            return
        self.tree.add_result(agent_id, e["task_id"], float(e["score"]), tuple(e.get("flags") or ()))
        self.evaluations += 1
        self.tasks.add(e["task_id"])
        self.tree_version += 1
        cursor: str | None = agent_id
        while cursor is not None:
            self._touched.add(cursor)
            cursor = self.agents[cursor].parent_id
        new_flags = set(e.get("flags") or ()) - self.flags.setdefault(agent_id, set())
        self.flags[agent_id] |= new_flags
        self.errors[agent_id] += bool(e.get("error"))
        seen = self.conditions.setdefault(agent_id, set())
        new_conditions = bool(e.get("conditions")) and e.get("conditions") not in seen
        if new_conditions:
            seen.add(str(e["conditions"]))
        if batch is None:
            return
        s, k = self.tree.own(agent_id)
        ts = self._ts_ms
        for key, value in (("score", e["score"]), ("own_mean", s / k), ("trials", k)):
            batch.metric(agent_id, key, value, ts, k)
        batch.metric(agent_id, "duration_s", float(e.get("duration_s") or 0.0), ts, k)
        for key, value in (e.get("metrics") or {}).items():
            if isinstance(value, int | float):
                batch.metric(agent_id, f"suite.{key}", value, ts, k)
        batch.tag(agent_id, "metasearch.state", "evaluated")
        if new_conditions:
            batch.tag(agent_id, "metasearch.conditions", ",".join(sorted(self.conditions[agent_id])))
        if e.get("flags"):  # the agent is never best-belief; say which evaluation flagged it and why
            batch.tag(agent_id, "metasearch.flags", ",".join(sorted(self.flags[agent_id])))
            why = e.get("error") or "the grader flagged this evaluation"
            batch.tag(agent_id, "metasearch.flag_reason", f"{e['task_id']}: {why}"[:500])
        if e.get("error"):
            batch.metric(agent_id, "errors", self.errors[agent_id], ts, k)
            batch.tag(agent_id, "metasearch.last_error", str(e["error"])[:500])
        log_path = e.get("log_path")
        if log_path:
            path = Path(log_path) if Path(log_path).is_absolute() else self.study_dir / log_path
            if (path / "agent.log").is_file():
                batch.artifact(agent_id, str(path / "agent.log"), f"evaluations/{safe_name(e['task_id'])}")

    def _expansion_failed(self, event: dict[str, Any], batch: Batch | None) -> None:
        parent = str(event.get("parent_id") or "")
        if parent not in self.tree:
            return
        self.tree.expansion_started(parent)
        self.tree.expansion_finished(parent, failed=True)
        self.failed[parent] += 1
        self.failed_kinds[str(event.get("kind", "other"))] += 1
        if batch is None:
            return
        batch.metric(parent, "failed_expansions", self.failed[parent], self._ts_ms, self.failed[parent])
        batch.tag(parent, "metasearch.last_failure", str(event.get("reason", ""))[:500])
        batch.tag(parent, "metasearch.last_failure_kind", str(event.get("kind", "other")))
        where = f"failed_expansions/{safe_name(str(event.get('job_id')))}"
        diff = event.get("diff_path")
        if diff and (self.study_dir / diff).is_file():
            batch.artifact(parent, str(self.study_dir / diff), where)
        logs = self.study_dir / "logs" / safe_name(str(event.get("job_id")))
        for name in ("transcript.jsonl", "llm.jsonl", "self_improve.log"):  # what the model wrote
            if (logs / name).is_file() and not (logs / name).is_symlink():
                batch.artifact(parent, str(logs / name), where)

    def _close_batch(self, batch: Batch) -> None:
        """Series that describe the state after the batch: study counters, best belief, clade means."""
        step, ts = self.evaluations, self._ts_ms
        for key, value in (
            ("tree_size", len(self.tree)),
            ("evaluations", self.evaluations),
            ("expansions_failed", sum(self.failed.values())),
            ("tokens", self.tokens),
            ("cost_usd", self.cost_usd),
        ):
            batch.metric(STUDY, key, value, ts, step)
        for kind, count in self.failed_kinds.items():
            batch.metric(STUDY, f"expansions_failed.{safe_name(kind)}", count, ts, step)
        for name, tally in self.models.tallies().items():
            for key in MODEL_METRICS:
                if tally[key] is not None:
                    batch.metric(STUDY, f"models.{safe_name(name)}.{key}", tally[key], ts, step)
        for agent_id in self._touched:
            s, n = self.tree.clade(agent_id)
            batch.metric(agent_id, "cmp", s / n, ts, step)
            batch.metric(agent_id, "clade_trials", n, ts, step)
        best = self.best_belief()
        if best is not None:
            stats = agent_stats(self.tree, best)
            batch.metric(STUDY, "best_score", stats.mean, ts, step)
            batch.metric(STUDY, "best_lower_bound", stats.lower_bound, ts, step)
        if best != self.best:
            if self.best is not None:
                batch.tag(self.best, "metasearch.best_belief", "false")
            if best is not None:
                batch.tag(best, "metasearch.best_belief", "true")
                batch.tag(STUDY, "metasearch.best_agent", best)
            self.best = best


def safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "_"


def study_name(journal: Path) -> str | None:
    with open(journal, "rb") as f:
        first = f.readline()
    try:
        event = json.loads(first)
    except ValueError:
        return None
    if not isinstance(event, dict) or event.get("op") != "study_created" or not event.get("study"):
        return None
    return str(utf8_text(str(event["study"])))


def config_data(study_dir: Path) -> dict[str, Any]:
    import yaml

    path = study_dir / "config.yaml"
    try:
        data = yaml.safe_load(path.read_text()) if path.is_file() else {}
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def model_params(data: dict[str, Any]) -> dict[str, str]:
    """``llm.models`` of a config as one param per entry and key (``llm.models.<name>.base_url``)."""
    llm = data.get("llm") if isinstance(data.get("llm"), dict) else {}
    out: dict[str, str] = {}
    for entry in (llm or {}).get("models") or []:
        if isinstance(entry, dict) and entry.get("name"):
            rest = {k: v for k, v in entry.items() if k != "name"}
            out.update(flatten(rest, f"llm.models.{entry['name']}."))
    return out


def _configured_model(study_dir: Path) -> str | None:
    llm = config_data(study_dir).get("llm") or {}
    model = llm.get("model") if isinstance(llm, dict) else None
    return str(model) if model else None


def _final_selector(study_dir: Path) -> Callable[[SearchTree, JournalReplay], str | None]:
    """The study's own final selection (its scheduler's ``select_final``), or the HGM default."""
    try:
        resolved = load_config_data(config_data(study_dir))
        scheduler = resolved.plugins["scheduler"].create()
        budget = resolved.config.budget.to_budget()
    except Exception as exc:  # a config this version cannot read still gets mirrored
        log.debug("best belief falls back to the default rule: %s", exc)
        return lambda tree, _m: select_final(tree)

    def select(tree: SearchTree, mirror: JournalReplay) -> str | None:
        usage = Usage(evaluations=mirror.evaluations, tokens=mirror.tokens, cost_usd=mirror.cost_usd)
        try:
            state = SearchState(tree, tuple(sorted(mirror.tasks)), budget, usage, 0, 0)
            result: str | None = scheduler.select_final(state)
        except Exception:  # never let a scheduler problem stall the mirror
            log.warning("the study's final selection failed; using the default rule", exc_info=True)
            result = select_final(tree)
        return result

    return select
