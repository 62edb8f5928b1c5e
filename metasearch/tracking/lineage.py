"""The lineage picture: the study's tree as a self-contained SVG, and an interactive HTML page around it.

No plotting library: the layout is a tidy left-to-right tree (depth on x, leaves on consecutive rows, a
parent centred on its children), computed iteratively so that a 5,000-deep chain does not recurse. Each
node is coloured by its own mean score (grey: not evaluated yet), sized by its trials, and carries a
tooltip with its statistics and, when the mirror knows it, a link to its MLflow run; the best-belief agent
is outlined. The HTML page adds a search box and a details panel (plain JavaScript, no network access).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from metasearch.schedulers.cmp import SearchTree

DX = 96  # horizontal distance between depths (px)
DY = 16  # vertical distance between leaf rows (px)
MARGIN = 24


@dataclass(frozen=True)
class LineageNode:
    id: str
    parent_id: str | None
    mean: float | None
    trials: int
    clade_mean: float | None
    clade_trials: int
    summary: str = ""


def nodes_from_tree(tree: SearchTree, summaries: Mapping[str, str] | None = None) -> list[LineageNode]:
    """Snapshot the statistics of every agent in ``tree`` (cheap: one pass over numpy views)."""
    summaries = summaries or {}
    own_s, own_n = tree.view("own_s"), tree.view("own_n")
    clade_s, clade_n = tree.view("clade_s"), tree.view("clade_n")
    parent = tree.view("parent")
    nodes = []
    for i, agent_id in enumerate(tree.ids):
        p = int(parent[i])
        nodes.append(
            LineageNode(
                id=agent_id,
                parent_id=tree.ids[p] if p >= 0 else None,
                mean=float(own_s[i] / own_n[i]) if own_n[i] else None,
                trials=int(own_n[i]),
                clade_mean=float(clade_s[i] / clade_n[i]) if clade_n[i] else None,
                clade_trials=int(clade_n[i]),
                summary=summaries.get(agent_id, ""),
            )
        )
    return nodes


def layout(nodes: Sequence[LineageNode]) -> dict[str, tuple[int, float]]:
    """agent id -> (depth, row). Children keep the order in which they appear in ``nodes``."""
    known = {n.id for n in nodes}
    children: dict[str | None, list[str]] = {}
    for n in nodes:
        parent = n.parent_id if n.parent_id in known else None
        children.setdefault(parent, []).append(n.id)
    pos: dict[str, tuple[int, float]] = {}
    next_row = 0
    # Iterative post-order: (id, depth, expanded?)
    stack: list[tuple[str, int, bool]] = [(r, 0, False) for r in reversed(children.get(None, []))]
    while stack:
        node, depth, expanded = stack.pop()
        kids = children.get(node, [])
        if not kids:
            pos[node] = (depth, float(next_row))
            next_row += 1
        elif expanded:
            pos[node] = (depth, (pos[kids[0]][1] + pos[kids[-1]][1]) / 2)
        else:
            stack.append((node, depth, True))
            stack.extend((k, depth + 1, False) for k in reversed(kids))
    return pos


def _colour(mean: float | None) -> str:
    if mean is None:
        return "#b8b8b8"
    return f"hsl({120 * max(0.0, min(1.0, mean)):.0f},65%,42%)"


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def run_href(experiment_id: str, run_id: str) -> str:
    """A run's page in the MLflow UI, relative to a page the tracking server serves (an artifact)."""
    return f"./#/experiments/{experiment_id}/runs/{run_id}"


def lineage_svg(
    nodes: Sequence[LineageNode],
    *,
    best: str | None = None,
    title: str = "",
    runs: Mapping[str, str] | None = None,
    experiment_id: str | None = None,
) -> str:
    """The tree as one standalone SVG document (tooltips via ``<title>``). With ``runs`` (agent id -> MLflow
    run id) and ``experiment_id``, each node links to its run's page."""
    runs = runs if experiment_id else {}
    pos = layout(nodes)
    depth = max((d for d, _ in pos.values()), default=0)
    rows = max((r for _, r in pos.values()), default=0.0)
    width = int(2 * MARGIN + (depth + 1) * DX + 120)
    height = int(2 * MARGIN + (rows + 1) * DY + 20)

    def xy(agent_id: str) -> tuple[float, float]:
        d, r = pos[agent_id]
        return MARGIN + d * DX, MARGIN + 20 + r * DY

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="10">',
        f'<text x="{MARGIN}" y="{MARGIN}" font-size="13" font-weight="bold">{html.escape(title)}</text>',
        '<g fill="none" stroke="#999" stroke-width="1">',
    ]
    for n in nodes:
        if n.parent_id is not None and n.parent_id in pos:
            (px, py), (cx, cy) = xy(n.parent_id), xy(n.id)
            out.append(f'<path d="M{px:.0f},{py:.1f}H{px + DX / 2:.0f}V{cy:.1f}H{cx:.0f}"/>')
    out.append("</g>")
    for n in nodes:
        x, y = xy(n.id)
        radius = 3 + min(5.0, math.sqrt(n.trials))
        stroke = ' stroke="#000" stroke-width="2.5"' if n.id == best else ""
        tip = (
            f"{n.id}: mean {_fmt(n.mean)} over {n.trials} trials; clade mean {_fmt(n.clade_mean)} over "
            f"{n.clade_trials}"
            + (" (best belief)" if n.id == best else "")
            + (f"\n{n.summary}" if n.summary else "")
        )
        data = (
            f'data-id="{html.escape(n.id)}" data-mean="{_fmt(n.mean)}" data-trials="{n.trials}" '
            f'data-clade="{_fmt(n.clade_mean)}" data-clade-trials="{n.clade_trials}" '
            f'data-parent="{html.escape(n.parent_id or "")}" data-summary="{html.escape(n.summary[:300])}"'
        )
        shape = (
            f'<circle cx="{x:.0f}" cy="{y:.1f}" r="{radius:.1f}" '
            f'fill="{_colour(n.mean)}"{stroke}><title>{html.escape(tip)}</title></circle>'
            f'<text x="{x + radius + 2:.0f}" y="{y + 3.5:.1f}">{html.escape(n.id)}</text>'
        )
        run_id = (runs or {}).get(n.id)
        if run_id is not None and experiment_id:
            href = html.escape(run_href(experiment_id, run_id))
            data += f' data-run="{html.escape(run_id)}"'
            shape = f'<a class="run" href="{href}">{shape}</a>'
        out.append(f'<g class="node" {data}>{shape}</g>')
    out.append("</svg>")
    return "\n".join(out)


_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 0; }}
header {{ position: sticky; top: 0; background: #fafafa; border-bottom: 1px solid #ddd; padding: 6px 10px; }}
#details {{ font-size: 12px; color: #333; margin-top: 4px; min-height: 1.2em; white-space: pre-wrap; }}
.hit circle {{ stroke: #06f; stroke-width: 3; }}
.node {{ cursor: pointer; }}
</style></head>
<body><header><b>{title}</b> &mdash; {summary}
&nbsp; <input id="q" placeholder="find agent id" size="14">
&nbsp; colour: own mean (red 0 &rarr; green 1, grey: not evaluated); size: trials; thick outline: best belief
<div id="details">click a node for its statistics</div></header>
<div id="tree">{svg}</div>
<script>
const stats = {stats};
document.getElementById("q").addEventListener("input", (e) => {{
  const q = e.target.value.trim();
  let first = null;
  document.querySelectorAll(".node").forEach((g) => {{
    const hit = q !== "" && g.dataset.id.includes(q);
    g.classList.toggle("hit", hit);
    if (hit && first === null) first = g;
  }});
  if (first) first.scrollIntoView({{block: "center", inline: "center"}});
}});
// Shown by the MLflow UI, the page lives in a blob: URL, against which ./#... cannot resolve: link to
// the server the blob came from instead.
if (location.protocol === "blob:") {{
  const origin = new URL(location.pathname).origin;
  document.querySelectorAll("a.run").forEach((a) => {{
    a.setAttribute("href", origin + "/" + a.getAttribute("href").slice(2));
  }});
}}
document.querySelectorAll(".node").forEach((g) => g.addEventListener("click", () => {{
  const d = g.dataset;
  document.getElementById("details").textContent = `${{d.id}} (parent ${{d.parent || "none"}}): own mean ${{d.mean}} ` +
    `over ${{d.trials}} trials; clade mean ${{d.clade}} over ${{d.cladeTrials}}\\n${{d.summary}}`;
}}));
</script></body></html>
"""


def lineage_html(
    nodes: Sequence[LineageNode],
    *,
    best: str | None = None,
    title: str = "",
    runs: Mapping[str, str] | None = None,
    experiment_id: str | None = None,
) -> str:
    """An interactive page: the SVG, a search box and a details panel. Self-contained; each node links to
    its MLflow run when ``runs`` and ``experiment_id`` are given (see ``lineage_svg``)."""
    evaluated = sum(1 for n in nodes if n.trials)
    stats = {"agents": len(nodes), "evaluated": evaluated, "best": best}
    summary = f"{len(nodes)} agents, {evaluated} evaluated, best belief {html.escape(best or 'none')}"
    return _PAGE.format(
        title=html.escape(title or "lineage"),
        summary=summary,
        svg=lineage_svg(nodes, best=best, title="", runs=runs, experiment_id=experiment_id),
        stats=json.dumps(stats),
    )
