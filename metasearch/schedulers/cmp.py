"""Clade statistics: the numbers clade-metaproductivity (CMP) schedulers decide on.

For every agent: its own (successes, trials) — a score in [0, 1] counts as that fraction of a success —
and the same sums over its clade (the agent and all its descendants), kept current incrementally by
walking the ancestor path once per result (O(depth)), never by re-walking the tree. Also: evaluations in
flight, expansions in flight, failed expansions, children, which tasks each agent has been given, and
each agent's (counted) score per finished task, what diversity-aware parent choice compares: as a dict
per agent (``scores``) and as agents x tasks matrices (``task_matrix``), kept current per result so a
decision reads any agents' rows without a Python loop over the archive.

An evaluation with integrity flags (the grader saw tampering, stale output, work outside the timing...)
counts as a failure: score 0 in the agent's own and every clade sum, whatever score it reported, so a
cheat inflates no ancestor's CMP; the agent is marked ``flagged`` and final selection never picks it.
Its descendants are judged on their own results (graded independently: one that is flagged is marked in
turn), so a lineage that stops cheating can still win, but never on the flagged agent's numbers.

Arrays are numpy and grow by doubling, so schedulers can sample over all agents in one vectorised call.
Not thread-safe by itself: the Study serialises mutations and decisions under one lock.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class SearchTree:
    def __init__(self, capacity: int = 64) -> None:
        self.ids: list[str] = []
        self.index: dict[str, int] = {}
        self.children: list[list[int]] = []
        self.seen: list[set[str]] = []
        self.scores: list[dict[str, float]] = []  # per agent: task -> counted score (latest if repeated)
        self.task_col: dict[str, int] = {}  # task -> its column in task_score / task_has (first result first)
        self._cap = 0
        self._tcap = 8
        self._grow(capacity)

    def _grow(self, capacity: int) -> None:
        def grown(old: np.ndarray | None, dtype: type, fill: float = 0) -> np.ndarray:
            new: np.ndarray = np.full(capacity, fill, dtype=dtype)
            if old is not None:
                new[: len(old)] = old
            return new

        first = self._cap == 0
        self.parent: np.ndarray
        self.depth: np.ndarray
        self.own_s: np.ndarray
        self.own_n: np.ndarray
        self.clade_s: np.ndarray
        self.clade_n: np.ndarray
        self.pending_evals: np.ndarray
        self.pending_expansions: np.ndarray
        self.failed: np.ndarray
        self.n_children: np.ndarray
        self.n_seen: np.ndarray
        self.clade_size: np.ndarray
        self.flagged: np.ndarray
        self.own_time: np.ndarray
        self.parent = grown(None if first else self.parent, np.int64, -1)
        self.depth = grown(None if first else self.depth, np.int64)
        self.own_s = grown(None if first else self.own_s, np.float64)
        self.own_n = grown(None if first else self.own_n, np.float64)
        self.clade_s = grown(None if first else self.clade_s, np.float64)
        self.clade_n = grown(None if first else self.clade_n, np.float64)
        self.pending_evals = grown(None if first else self.pending_evals, np.int64)
        self.pending_expansions = grown(None if first else self.pending_expansions, np.int64)
        self.failed = grown(None if first else self.failed, np.int64)
        self.n_children = grown(None if first else self.n_children, np.int64)
        self.n_seen = grown(None if first else self.n_seen, np.int64)
        self.clade_size = grown(None if first else self.clade_size, np.int64)
        self.flagged = grown(None if first else self.flagged, np.int64)
        self.own_time = grown(None if first else self.own_time, np.float64)
        self.task_score: np.ndarray  # agents x task columns: the counted score, 0 where there is none
        self.task_has: np.ndarray  # agents x task columns: the agent has a result on the task
        self.task_score = _grown_matrix(None if first else self.task_score, capacity, self._tcap, np.float64)
        self.task_has = _grown_matrix(None if first else self.task_has, capacity, self._tcap, bool)
        self._cap = capacity

    def _column(self, task_id: str) -> int:
        """The task's column, added (and the matrices widened) on its first result."""
        col = self.task_col.get(task_id)
        if col is None:
            col = self.task_col[task_id] = len(self.task_col)
            if col == self._tcap:
                self._tcap *= 2
                self.task_score = _grown_matrix(self.task_score, self._cap, self._tcap, np.float64)
                self.task_has = _grown_matrix(self.task_has, self._cap, self._tcap, bool)
        return col

    def _set_score(self, i: int, task_id: str, score: float) -> None:
        self.scores[i][task_id] = score
        col = self._column(task_id)
        self.task_score[i, col] = score
        self.task_has[i, col] = True

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, agent_id: object) -> bool:
        return agent_id in self.index

    @classmethod
    def replayed(
        cls,
        agents: Sequence[tuple[str, str | None]],
        results: Sequence[tuple[str, str, float]],
        flagged: Sequence[str] = (),
        durations: Sequence[float] = (),
    ) -> SearchTree:
        """A tree rebuilt from history in O(agents + results), not O(results x depth).

        ``agents`` come parents first (journal order). Equal to ``add_agent`` then ``add_result`` for
        each, which is what a resumed study or ``metasearch status`` on a large study would otherwise pay.
        ``flagged`` names the agents with a flagged evaluation, whose scores the caller passes as 0
        (``counted``). ``durations``, when given, are the results' seconds, in the same order.
        """
        tree = cls(capacity=max(64, len(agents)))
        n = len(agents)
        parent = np.full(n, -1, dtype=np.int64)
        for k, (agent_id, parent_id) in enumerate(agents):
            if agent_id in tree.index:
                raise ValueError(f"agent {agent_id!r} is already in the tree")
            p = -1 if parent_id is None else tree.index[parent_id]  # KeyError: a parent after its child
            tree.ids.append(agent_id)
            tree.index[agent_id] = k
            tree.children.append([])
            tree.seen.append(set())
            tree.scores.append({})
            parent[k] = p
            if p >= 0:
                tree.children[p].append(k)
        own_s = np.zeros(n)
        own_n = np.zeros(n)
        own_time = np.zeros(n)
        for k, (agent_id, task_id, score) in enumerate(results):
            if not 0.0 <= score <= 1.0:
                raise ValueError(f"score must lie in [0, 1], got {score}")
            i = tree.index[agent_id]
            tree.seen[i].add(task_id)
            tree._set_score(i, task_id, score)
            own_s[i] += score
            own_n[i] += 1
            if durations:
                own_time[i] += durations[k]
        depth = np.zeros(n, dtype=np.int64)
        for k in range(n):  # parents come first: their depth is known
            if parent[k] >= 0:
                depth[k] = depth[parent[k]] + 1
        clade_s, clade_n, size = own_s.copy(), own_n.copy(), np.ones(n, dtype=np.int64)
        for k in range(n - 1, -1, -1):  # children come later: theirs are complete when we reach them
            p = parent[k]
            if p >= 0:
                clade_s[p] += clade_s[k]
                clade_n[p] += clade_n[k]
                size[p] += size[k]
        tree.parent[:n], tree.depth[:n] = parent, depth
        tree.own_s[:n], tree.own_n[:n], tree.clade_s[:n], tree.clade_n[:n] = own_s, own_n, clade_s, clade_n
        tree.clade_size[:n] = size
        tree.own_time[:n] = own_time
        tree.n_children[:n] = [len(c) for c in tree.children]
        tree.n_seen[:n] = [len(t) for t in tree.seen]
        for agent_id in flagged:
            tree.flagged[tree.index[agent_id]] = 1
        return tree

    # -- mutations ---------------------------------------------------------------------------------

    def add_agent(self, agent_id: str, parent_id: str | None) -> None:
        if agent_id in self.index:
            raise ValueError(f"agent {agent_id!r} is already in the tree")
        n = len(self.ids)
        if n == self._cap:
            self._grow(2 * self._cap)
        p = -1 if parent_id is None else self.index[parent_id]
        self.ids.append(agent_id)
        self.index[agent_id] = n
        self.children.append([])
        self.seen.append(set())
        self.scores.append({})
        self.parent[n] = p
        self.depth[n] = 0 if p < 0 else self.depth[p] + 1
        if p >= 0:
            self.children[p].append(n)
            self.n_children[p] += 1
        j = n
        while j >= 0:  # the agent and its ancestors gain one clade member
            self.clade_size[j] += 1
            j = int(self.parent[j])

    def reserve(self, agent_id: str, task_id: str) -> None:
        """An evaluation was dispatched: the pair is taken and visible as pending."""
        i = self.index[agent_id]
        if task_id in self.seen[i]:
            raise ValueError(f"({agent_id}, {task_id}) was already dispatched")
        self.seen[i].add(task_id)
        self.n_seen[i] += 1
        self.pending_evals[i] += 1

    def release(self, agent_id: str, task_id: str) -> None:
        """An evaluation was abandoned (infrastructure fault): the pair goes back to the queue."""
        i = self.index[agent_id]
        if task_id in self.seen[i]:
            self.seen[i].discard(task_id)
            self.n_seen[i] -= 1
            self.pending_evals[i] -= 1

    def add_result(
        self, agent_id: str, task_id: str, score: float, flags: Sequence[str] = (), duration: float = 0.0
    ) -> None:
        """A finished evaluation (of a reserved pair, or replayed from the journal). With ``flags`` it
        counts as a failure and marks the agent flagged (see the module docstring). ``duration`` (seconds)
        adds to the agent's ``own_time``, what cost-aware scheduling reads."""
        if not 0.0 <= score <= 1.0:
            raise ValueError(f"score must lie in [0, 1], got {score}")
        i = self.index[agent_id]
        if flags:
            self.flagged[i] = 1
            score = 0.0
        if task_id in self.seen[i]:
            self.pending_evals[i] -= 1
        else:
            self.seen[i].add(task_id)
            self.n_seen[i] += 1
        self._set_score(i, task_id, score)
        self.own_s[i] += score
        self.own_n[i] += 1
        self.own_time[i] += duration
        j = i
        while j >= 0:
            self.clade_s[j] += score
            self.clade_n[j] += 1
            j = int(self.parent[j])

    def expansion_started(self, parent_id: str) -> None:
        self.pending_expansions[self.index[parent_id]] += 1

    def expansion_finished(self, parent_id: str, *, failed: bool) -> None:
        i = self.index[parent_id]
        self.pending_expansions[i] -= 1
        if failed:
            self.failed[i] += 1

    # -- reads -------------------------------------------------------------------------------------

    def own(self, agent_id: str) -> tuple[float, int]:
        i = self.index[agent_id]
        return float(self.own_s[i]), int(self.own_n[i])

    def clade(self, agent_id: str) -> tuple[float, int]:
        i = self.index[agent_id]
        return float(self.clade_s[i]), int(self.clade_n[i])

    def task_scores(self, agent_id: str) -> dict[str, float]:
        """The agent's counted score on each task it has a result for (a copy)."""
        return dict(self.scores[self.index[agent_id]])

    def task_matrix(self, rows: np.ndarray, tasks: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(scores, has) of the agents at indices ``rows`` on ``tasks``, each rows x tasks: the counted
        score (latest if repeated) and whether there is one; the score is 0 where there is none."""
        rows = np.asarray(rows, dtype=np.int64)
        known = [(k, self.task_col[t]) for k, t in enumerate(tasks) if t in self.task_col]
        cols = np.array([c for _k, c in known], dtype=np.int64)
        if len(known) == len(tasks):  # the usual case: every task has a result somewhere
            return self.task_score.take(rows, 0).take(cols, 1), self.task_has.take(rows, 0).take(cols, 1)
        scores = np.zeros((len(rows), len(tasks)))
        has = np.zeros((len(rows), len(tasks)), dtype=bool)
        if known:
            pos = [k for k, _c in known]
            scores[:, pos] = self.task_score.take(rows, 0).take(cols, 1)
            has[:, pos] = self.task_has.take(rows, 0).take(cols, 1)
        return scores, has

    def is_flagged(self, agent_id: str) -> bool:
        return bool(self.flagged[self.index[agent_id]])

    def failed_expansions(self, agent_id: str) -> int:
        return int(self.failed[self.index[agent_id]])

    def pending(self, agent_id: str) -> int:
        return int(self.pending_evals[self.index[agent_id]])

    def child_ids(self, agent_id: str) -> list[str]:
        return [self.ids[c] for c in self.children[self.index[agent_id]]]

    def unseen_tasks(self, agent_id: str, tasks: Sequence[str]) -> list[str]:
        seen = self.seen[self.index[agent_id]]
        return [t for t in tasks if t not in seen]

    def roots(self) -> list[int]:
        return [i for i in range(len(self.ids)) if self.parent[i] < 0]

    def view(self, name: str) -> np.ndarray:
        """A read-only view of one statistic over the agents that exist (no copy)."""
        arr: np.ndarray = getattr(self, name)[: len(self.ids)]
        view = arr.view()
        view.flags.writeable = False
        return view


def _grown_matrix(old: np.ndarray | None, rows: int, cols: int, dtype: type) -> np.ndarray:
    new: np.ndarray = np.zeros((rows, cols), dtype=dtype)
    if old is not None:
        new[: old.shape[0], : old.shape[1]] = old
    return new


def counted(score: float, flags: Sequence[str]) -> float:
    """The score an evaluation adds to the statistics: 0 when it carries integrity flags."""
    return 0.0 if flags else score


def replay_results(
    agents: Sequence[tuple[str, str | None]],
    evaluations: Sequence[tuple[str, str, float, Sequence[str]]],
    durations: Sequence[float] = (),
) -> SearchTree:
    """``SearchTree.replayed`` from (agent, task, score, flags) records, flagged ones counted as failures."""
    return SearchTree.replayed(
        agents,
        [(a, t, counted(s, f)) for a, t, s, f in evaluations],
        sorted({a for a, _t, _s, f in evaluations if f}),
        durations,
    )
