"""Every ```bash block of README.md and of the pages under docs/ runs as written, in a fresh shell, after the
set-up commands.

The rule: a fresh shell is ``env -i`` with only HOME, a system PATH, LANG (and PYTHONPATH when the tests
themselves run with one), in which ``source .venv/bin/activate`` has run: set-up command 1 does exactly
that, and README says to in each new shell. Each block runs with ``set -e`` and must exit 0. A comment on
the line before a block's fence decides where it runs:

- none: in the repository root;
- ``<!-- readme-test: study -->``: in a folder where ``archive/quickstart`` is a small finished study (made
  through the archive's API, standing in for the minutes-long quickstart) and configs/ and seeds/ are the
  repository's;
- ``<!-- readme-test: skip: REASON -->``: not run (set-up itself, minutes-long runs, downloads), and the
  reason must be given.

The documentation pages follow the same rule, so a command a page tells a user to type is a command that works.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from studies import make_study

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- readme-test: (study|skip: (?P<reason>.*\S)) -->$")


@dataclass(frozen=True)
class Block:
    line: int
    code: str
    mode: str  # "root" | "study" | "skip"
    reason: str = ""
    file: str = "README.md"

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def bash_blocks(text: str, file: str = "README.md") -> list[Block]:
    lines = text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].strip() == "```bash":
            start, body = i + 1, []
            i += 1
            while lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            previous = next((lines[j].strip() for j in range(start - 2, -1, -1) if lines[j].strip()), "")
            mode, reason = "root", ""
            if previous.startswith("<!-- readme-test"):
                match = MARKER.match(previous)
                assert match, f"{file}:{start}: malformed marker {previous!r}"
                mode = "skip" if match.group("reason") else "study"
                reason = match.group("reason") or ""
            blocks.append(Block(start, "\n".join(body), mode, reason, file))
        i += 1
    return blocks


def documented_files() -> list[Path]:
    """README.md and every documentation page (the site's own build code under docs/hooks aside)."""
    pages = sorted(
        p for p in (ROOT / "docs").rglob("*.md") if "hooks" not in p.relative_to(ROOT / "docs").parts
    )
    return [ROOT / "README.md", *pages]


BLOCKS = [
    block
    for path in documented_files()
    for block in bash_blocks(path.read_text(), str(path.relative_to(ROOT)))
]
README_BLOCKS = [b for b in BLOCKS if b.file == "README.md"]


def activate_script() -> Path:
    """``.venv/bin/activate`` of this checkout; a checkout whose tests run in another environment (a
    worktree) uses that environment's, which is what its set-up would have made."""
    own = ROOT / ".venv" / "bin" / "activate"
    return own if own.is_file() else Path(sys.prefix) / "bin" / "activate"


def fresh_shell(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"HOME": os.environ.get("HOME", "/root"), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    script = f"set -e\nsource {activate_script()}\n{code}\n"
    return subprocess.run(
        ["env", "-i", *(f"{k}={v}" for k, v in env.items()), "bash", "--noprofile", "--norc", "-c", script],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_rule_covers_the_readme() -> None:
    assert README_BLOCKS, "README.md has bash blocks"
    assert any(b.mode == "root" for b in README_BLOCKS) and any(b.mode == "study" for b in README_BLOCKS)
    for block in BLOCKS:
        assert block.mode != "skip" or len(block.reason) > 10, f"{block.where}: say why it is skipped"
    setup = README_BLOCKS[0]
    assert "bash .ci/setup && source .venv/bin/activate" in setup.code and setup.mode == "skip"


def test_the_rule_covers_the_docs() -> None:
    """The how-to pages are read too: getting started has blocks of both kinds that run."""
    started = [b for b in BLOCKS if b.file == "docs/getting-started.md"]
    assert any(b.mode == "root" for b in started) and any(b.mode == "study" for b in started)
    assert {b.file for b in BLOCKS} >= {"README.md", "docs/getting-started.md", "docs/testing.md"}


def test_the_parser_reads_markers() -> None:
    text = "x\n<!-- readme-test: skip: downloads 3 GB -->\n\n```bash\na\nb\n```\n```bash\nc\n```\n"
    assert bash_blocks(text) == [Block(4, "a\nb", "skip", "downloads 3 GB"), Block(8, "c", "root")]
    assert bash_blocks(text, "docs/x.md")[1].where == "docs/x.md:8"
    with pytest.raises(AssertionError, match="malformed"):
        bash_blocks("<!-- readme-test: skip -->\n```bash\na\n```\n")


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.mode != "skip"], ids=lambda b: b.where)
def test_block_runs_verbatim(block: Block, tmp_path: Path) -> None:
    cwd = ROOT
    if block.mode == "study":
        cwd = tmp_path / "checkout"
        (cwd / "archive").mkdir(parents=True)
        for name in ("configs", "seeds"):
            (cwd / name).symlink_to(ROOT / name)
        _, archive = make_study(cwd / "archive", "quickstart", open_jobs=False)
        archive.close()
    result = fresh_shell(block.code, cwd)
    assert result.returncode == 0, (
        f"{block.where}:\n{block.code}\n--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}"
    )


def test_a_failing_block_fails(tmp_path: Path) -> None:
    """The harness is not vacuous: an unknown command, or a command missing from the environment, fails."""
    assert fresh_shell("metasearch no-such-command", tmp_path).returncode != 0
    assert fresh_shell("metasearch --help\nfalse\necho unreachable", tmp_path).returncode != 0
    assert fresh_shell("metasearch --help", tmp_path).returncode == 0
