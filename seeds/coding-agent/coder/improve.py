"""Self-improvement: ``python3 -m coder.improve PROBLEM_FILE`` edits this agent's own code."""

from __future__ import annotations

import sys
from pathlib import Path

from coder.llm import chat
from coder.loop import episode, load_knobs


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parents[1]
    problem = Path(argv[1]).read_text() if len(argv) > 1 else "Improve this agent."
    task = (
        f"Your own source code is in {root} (your shell starts there). Keep `agent.toml`'s name and entry points, "
        f"and keep `python3 -m unittest discover -s tests` passing.\n\n{problem}"
    )
    summary = episode(task, root, load_knobs(root), chat, log=sys.stderr)
    print(summary or "self-improvement reached the step limit")
    return 0 if summary else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
