"""What a study keeps between jobs, in one place on the head node, reached from every node through Ray.

``StudyHost`` is a Ray actor pinned to the head node (the driver's node, zero CPUs). It owns the study's
``TokenMeter`` (every LLM call of every job, on any node, reserves and settles there, so ``budget.tokens``
and ``llm.max_tokens_per_job`` hold however many jobs run at once) and the knobs proposer's Optuna study
(its journal file stays in the study directory on the head; workers ask the actor for the next values).
The driver takes each job's usage from it when the job ends and journals it: the archive keeps a single
writer. ``LedgerMeter`` is the meter a worker's gateway and LLM client use: the ``TokenMeter`` methods
they call, forwarded to the actor (it lives in ``llm.ledger``, beside the meter it stands in for).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from metasearch.cluster.ray_nodes import NodeLog
from metasearch.llm.ledger import HOST_TIMEOUT_S
from metasearch.llm.usage import BudgetExhausted, Hold, Prices, Tally, TokenMeter
from metasearch.types import Agent


class StudyHost:
    """The actor's class (made remote by ``start_host``). Methods are called concurrently (threaded
    actor); the meter and the knobs proposer lock for themselves."""

    def __init__(
        self,
        *,
        study_limit: int | None,
        job_limit: int | None,
        prices: Prices,
        used_before: int,
        study_dir: str,
        knobs_options: dict[str, Any] | None,
    ) -> None:
        self.meter = TokenMeter(
            study_limit=study_limit, job_limit=job_limit, prices=prices, study_used_before=used_before
        )
        self.study_dir = Path(study_dir)
        self.knobs_options = knobs_options
        self._knobs: Any = None
        self._nodes: Any = None
        self._node_cpus: dict[str, float] = {}

    def started(self, job_id: str, kind: str, node_id: str) -> None:
        """A task reports in from its node: journaled for ``metasearch status`` (see ``ray_nodes``)."""
        import ray

        if node_id not in self._node_cpus:
            self._node_cpus = {
                str(n["NodeID"]): float(n.get("Resources", {}).get("CPU", 0.0)) for n in ray.nodes()
            }
        if self._nodes is None:
            self._nodes = NodeLog(self.study_dir)
        self._nodes.started(job_id, kind, node_id, self._node_cpus.get(node_id, 0.0))

    def node_id(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())

    # -- token ledger -----------------------------------------------------------------------------

    def reserve(self, job_id: str, prompt: int, max_completion: int | None) -> Hold | tuple[str, int, int]:
        try:
            return self.meter.reserve(job_id, prompt, max_completion)
        except BudgetExhausted as exc:  # a custom exception does not survive pickling: send its fields
            return (exc.scope, exc.used, exc.limit)

    def release(self, hold: Hold) -> None:
        self.meter.release(hold)

    def charge(
        self, job_id: str, prompt: int, completion: int, hold: Hold | None, prices: Prices | None = None
    ) -> float:
        return self.meter.charge(job_id, prompt, completion, hold=hold, prices=prices)

    def limit_job(self, job_id: str, tokens: int | None) -> None:
        self.meter.limit_job(job_id, tokens)

    def job(self, job_id: str) -> Tally:
        return self.meter.job(job_id)

    def study_exhausted(self) -> bool:
        return self.meter.study_exhausted

    def take(self, job_id: str) -> Tally:
        """A finished job's usage (for the driver to journal), forgotten here; the study total keeps it."""
        with self.meter._lock:
            self.meter.job_limits.pop(job_id, None)
            return self.meter.jobs.pop(job_id, Tally())

    def study_tokens(self) -> int:
        return self.meter.study_used_before + self.meter.study.tokens

    # -- knobs (Optuna) ---------------------------------------------------------------------------

    def suggest_knobs(
        self, parent: Agent, params: dict[str, Any], current: dict[str, Any], context: Any
    ) -> tuple[dict[str, Any], int]:
        from metasearch.proposers.knobs import KnobsProposer  # imports Optuna: only for a study using knobs

        if self._knobs is None:
            if self.knobs_options is None:
                raise RuntimeError("this study's host was started without the knobs proposer's options")
            config = KnobsProposer.Config.model_validate(self.knobs_options)
            self._knobs = KnobsProposer(config, study_dir=self.study_dir)
        result: tuple[dict[str, Any], int] = self._knobs.suggest(parent, params, current, context)
        return result


def start_host(**kwargs: Any) -> Any:
    """Start the study's host actor on this (the driver's) node and wait until it answers."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = ray.get_runtime_context().get_node_id()
    actor = (
        ray.remote(StudyHost)
        .options(
            num_cpus=0,
            max_concurrency=32,
            scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
        )
        .remote(**kwargs)
    )
    ray.get(actor.node_id.remote(), timeout=HOST_TIMEOUT_S)  # type: ignore[attr-defined]
    return actor
