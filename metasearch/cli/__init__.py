"""The ``metasearch`` command line: run, resume, status, tree, best, export, promote, task, ui, bench, tune,
sim, images, models, doctor, diff-runs.

``--json`` outputs are a stable interface for other tools; their fields are documented in docs/commands.md.
The commands live in ``studies`` (on studies) and ``tools`` (on this machine and the scheduler). Each imports
what it runs inside its own body, so that ``metasearch --help`` and the quick read-only commands start
without loading MLflow, the LLM client or Docker.
"""

from __future__ import annotations

import sys

import typer

from metasearch.cli import studies, tools
from metasearch.cli.common import console

app = typer.Typer(
    name="metasearch",
    help="Search over code-level agent designs: propose, evaluate in sandboxes, schedule by clade metaproductivity.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(studies.app)
app.add_typer(tools.app)
app.add_typer(studies.task_app, name="task")


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        console.print("interrupted")
        sys.exit(130)
