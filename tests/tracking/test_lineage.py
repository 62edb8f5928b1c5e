"""The lineage picture: layout, SVG well-formedness, the interactive page, and a 5,000-deep chain."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET

from metasearch.schedulers.cmp import SearchTree
from metasearch.tracking.lineage import LineageNode, layout, lineage_html, lineage_svg, nodes_from_tree

SVG = "{http://www.w3.org/2000/svg}"


def small_tree() -> SearchTree:
    tree = SearchTree()
    tree.add_agent("a0", None)
    tree.add_agent("a1", "a0")
    tree.add_agent("a2", "a0")
    tree.add_agent("a3", "a1")
    tree.add_agent("a4", "a1")
    for task, score in (("t0", 1.0), ("t1", 0.0)):
        tree.add_result("a3", task, score)
    tree.add_result("a2", "t0", 1.0)
    return tree


def test_layout_puts_parents_between_their_children() -> None:
    nodes = nodes_from_tree(small_tree())
    pos = layout(nodes)
    assert {a: d for a, (d, _) in pos.items()} == {"a0": 0, "a1": 1, "a2": 1, "a3": 2, "a4": 2}
    rows = {a: r for a, (_, r) in pos.items()}
    assert rows["a3"] == 0 and rows["a4"] == 1 and rows["a2"] == 2  # leaves on consecutive rows
    assert rows["a1"] == 0.5 and rows["a0"] == (0.5 + 2) / 2


def test_nodes_carry_own_and_clade_statistics() -> None:
    by_id = {n.id: n for n in nodes_from_tree(small_tree(), {"a3": "raise lr"})}
    assert by_id["a3"].mean == 0.5 and by_id["a3"].trials == 2 and by_id["a3"].summary == "raise lr"
    assert by_id["a1"].mean is None and by_id["a1"].clade_mean == 0.5 and by_id["a1"].clade_trials == 2
    assert by_id["a0"].clade_mean == 2 / 3 and by_id["a0"].clade_trials == 3


def test_svg_is_well_formed_and_marks_the_best_agent() -> None:
    nodes = nodes_from_tree(small_tree(), {"a2": 'quotes " and <tags> & co'})
    root = ET.fromstring(lineage_svg(nodes, best="a2", title="study <s>"))
    groups = root.findall(f"{SVG}g[@class='node']")
    assert [g.get("data-id") for g in groups] == ["a0", "a1", "a2", "a3", "a4"]
    assert len(root.findall(f"{SVG}g/{SVG}path")) == 4  # one edge per non-root agent
    circles = {g.get("data-id"): g.find(f"{SVG}circle") for g in groups}
    assert circles["a2"].get("stroke") == "#000" and circles["a3"].get("stroke") is None
    assert circles["a1"].get("fill") == "#b8b8b8"  # not evaluated: grey
    assert "best belief" in circles["a2"].find(f"{SVG}title").text


def test_html_page_is_self_contained() -> None:
    page = lineage_html(nodes_from_tree(small_tree()), best="a3", title="s")
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and 'getElementById("q")' in page
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")  # nothing fetched from outside
    assert "5 agents, 2 evaluated, best belief a3" in page


def test_a_5000_deep_chain_draws_without_recursion_quickly() -> None:
    nodes = [LineageNode(f"a{i}", f"a{i - 1}" if i else None, None, 0, None, 0) for i in range(5000)]
    started = time.perf_counter()
    svg = lineage_svg(nodes)
    assert time.perf_counter() - started < 5.0
    assert svg.count('class="node"') == 5000
    assert layout(nodes)["a4999"] == (4999, 0.0)


def test_nodes_link_to_their_runs_when_the_mirror_knows_them() -> None:
    nodes = nodes_from_tree(small_tree())
    runs = {"a0": "r0", "a2": "r2"}  # a run the mirror has not created yet gets no link
    root = ET.fromstring(lineage_svg(nodes, runs=runs, experiment_id="7"))
    links = {g.get("data-id"): g.find(f"{SVG}a") for g in root.findall(f"{SVG}g[@class='node']")}
    assert links["a0"].get("href") == "./#/experiments/7/runs/r0"
    assert links["a2"].get("href") == "./#/experiments/7/runs/r2"
    assert links["a1"] is None and links["a0"].find(f"{SVG}circle") is not None
    page = lineage_html(nodes, runs=runs, experiment_id="7")
    assert page.count('class="run" href="./#/experiments/7/runs/') == 2
    assert "./#/experiments" not in lineage_html(nodes, runs=runs)  # no experiment: no links
