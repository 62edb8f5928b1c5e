"""Solve one task directory: ``python3 -m coder.solve TASK_DIR``."""

from __future__ import annotations

import sys
from pathlib import Path

from coder.llm import chat
from coder.loop import episode, load_knobs

STATEMENT_FILES = ("TASK.md", "README.md", "task.md", "task.json", "task.toml")


def read_statement(task_dir: Path) -> str:
    for name in STATEMENT_FILES:
        path = task_dir / name
        if path.is_file():
            return path.read_text()
    listing = "\n".join(
        sorted(str(p.relative_to(task_dir)) for p in task_dir.rglob("*") if p.is_file())[:200]
    )
    return f"No statement file was found. The task directory holds:\n{listing}"


def main(argv: list[str]) -> int:
    task_dir = Path(argv[1] if len(argv) > 1 else "/task").resolve()
    knobs = load_knobs(Path(__file__).resolve().parents[1])
    task = f"The task directory is {task_dir} (your shell starts there).\n\n{read_statement(task_dir)}"
    summary = episode(task, task_dir, knobs, chat)
    print(f"=== result: {summary or 'no SUBMIT (the step limit, or replies without a command)'}", flush=True)
    return 0 if summary else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
