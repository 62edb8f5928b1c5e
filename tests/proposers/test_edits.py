"""Edits read from model output: each format, the tolerant anchoring, and each refusal's class. The replies
below are shaped after what SmolLM2-135M and Gemma-3-270M wrote in real studies (prose around the edit,
markdown around file names, wrong diff line counts, names of files that do not exist)."""

from __future__ import annotations

from pathlib import Path

import pytest

from metasearch.proposers.edits import EditError, apply, parse, workspace_files
from metasearch.proposers.llm import repetition

SOLVE = "import json\n\n\ndef main(task):\n    lr = 0.05\n    return lr\n"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "solve.py").write_text(SOLVE)
    (tmp_path / "knobs.json").write_text('{"lr": 0.05}\n')
    return tmp_path


def run(ws: Path, text: str) -> list[str]:
    found, diffs = parse(text, workspace_files(ws))
    return apply(ws, found, diffs)


def test_a_whole_file_named_on_the_line_before_replaces_it(ws: Path) -> None:
    reply = 'Lower the learning rate.\n\nHere is the new `knobs.json`:\n```json\n{"lr": 0.01}\n```\nDone.'
    assert run(ws, reply) == ["knobs.json"]
    assert (ws / "knobs.json").read_text() == '{"lr": 0.01}\n'


@pytest.mark.parametrize(
    "header",
    ["**knobs.json**", "**# Knobs.json**", "### File: knobs.json", "./knobs.json", "/agent/knobs.json"],
)
def test_markdown_around_the_file_name_is_tolerated(ws: Path, header: str) -> None:
    assert run(ws, f'{header}\n```json\n{{"lr": 0.2}}\n```\n') == ["knobs.json"]


def test_the_info_string_may_name_the_file(ws: Path) -> None:
    assert run(ws, '```json knobs.json\n{"lr": 0.3}\n```') == ["knobs.json"]


def test_a_base_name_alone_finds_the_one_file_with_that_name(ws: Path) -> None:
    reply = "solve.py\n<<<<<<< SEARCH\n    lr = 0.05\n=======\n    lr = 0.01\n>>>>>>> REPLACE\n"
    assert run(ws, reply) == ["trainer/solve.py"]
    assert "lr = 0.01" in (ws / "trainer" / "solve.py").read_text()


def test_search_replace_anchors_ignoring_indentation_but_not_ambiguity(ws: Path) -> None:
    reply = "trainer/solve.py\n<<<<<<< SEARCH\nlr = 0.05\n=======\n    lr = 0.02\n>>>>>>> REPLACE\n"
    assert run(ws, reply) == ["trainer/solve.py"]
    (ws / "trainer" / "solve.py").write_text("x = 1\nx = 1\n")
    with pytest.raises(EditError) as err:
        run(ws, "trainer/solve.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n")
    assert err.value.kind == "apply_failed" and "2 times" in str(err.value)


def test_a_diff_with_wrong_line_numbers_applies_by_its_context(ws: Path) -> None:
    reply = (
        "```diff\n--- a/trainer/solve.py\n+++ b/trainer/solve.py\n@@ -40,7 +40,9 @@\n def main(task):\n"
        "-    lr = 0.05\n+    lr = 0.005\n     return lr\n```\n"
    )
    assert run(ws, reply) == ["trainer/solve.py"]
    assert "lr = 0.005" in (ws / "trainer" / "solve.py").read_text()


def test_refusals_are_classified_and_leave_the_workspace_as_it_was(ws: Path) -> None:
    cases = {
        "no_edit": "I would lower the learning rate, it is too high.",
        "unknown_file": 'config/settings.json\n```json\n{"lr": 0.01}\n```',
        "apply_failed": "trainer/solve.py\n<<<<<<< SEARCH\nnot in the file\n=======\nx\n>>>>>>> REPLACE\n",
        "no_change": 'knobs.json\n```json\n{"lr": 0.05}\n```',
        "truncated": 'knobs.json\n```json\n{"lr": 0.01,\n  "epochs": 4',
    }
    for kind, reply in cases.items():
        with pytest.raises(EditError) as err:
            run(ws, reply)
        assert err.value.kind == kind, (kind, str(err.value))
    # all or nothing: a good edit beside a bad one is not applied either
    both = 'knobs.json\n```json\n{"lr": 0.9}\n```\ntrainer/solve.py\n<<<<<<< SEARCH\nmissing\n=======\nx\n>>>>>>> REPLACE\n'
    with pytest.raises(EditError):
        run(ws, both)
    assert (ws / "knobs.json").read_text() == '{"lr": 0.05}\n'
    assert (ws / "trainer" / "solve.py").read_text() == SOLVE


def test_shell_examples_and_prose_blocks_are_not_edits(ws: Path) -> None:
    reply = 'Run it like this:\n```bash\npython3 -m trainer.solve task\n```\nknobs.json\n```json\n{"lr": 0.1}\n```'
    assert run(ws, reply) == ["knobs.json"]


def test_repetition_is_recognised() -> None:
    assert repetition("ok\n" + "    x = x + 1\n" * 20) is not None
    assert repetition("Here is the plan. " + "the learning rate is too high and " * 12) is not None
    assert repetition('knobs.json\n```json\n{"lr": 0.01}\n```\n') is None


def test_a_link_in_the_workspace_is_never_written_through(
    ws: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A parent's tree may hold a link planted by an earlier candidate: an edit naming it is refused, and
    the file it points at (here outside the workspace) is left alone."""
    outside = tmp_path_factory.mktemp("host") / "secrets.json"
    outside.write_text("{}\n")
    (ws / "link.json").symlink_to(outside)
    with pytest.raises(EditError) as err:
        run(ws, 'link.json\n```json\n{"pwned": true}\n```')
    assert err.value.kind == "unknown_file"
    assert outside.read_text() == "{}\n"
