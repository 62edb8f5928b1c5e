"""What every command of the ``metasearch`` command line shares: its consoles, its error exit, logging."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

console = Console(stderr=True)
out = Console()

StudyDir = Annotated[Path, typer.Argument(help="A study directory, e.g. archive/quickstart.")]
Overrides = Annotated[list[str] | None, typer.Option("-o", "--override", help="key.path=value (repeatable).")]


def fail(exc: BaseException, code: int = 2) -> typer.Exit:
    """Print ``exc`` as the command's error; returns the exit to raise (``raise fail(exc) from None``)."""
    console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def setup_logging(verbose: bool) -> None:
    """Log through rich on stderr (debug lines too when ``verbose``); chatty libraries only warn."""
    from rich.logging import RichHandler

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(message)s",
        handlers=[RichHandler(console=console, show_path=False, rich_tracebacks=True)],
    )
    for noisy in ("urllib3", "docker", "git", "httpx", "alembic", "mlflow", "optuna"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
