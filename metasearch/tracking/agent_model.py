"""The MLflow pyfunc model of a promoted agent (models-from-code: MLflow executes this file on load).

Standalone on purpose: it imports neither metasearch nor anything outside the standard library, pandas
and MLflow, so a registered agent runs wherever the model is loaded. The model's ``agent`` artifact is the
agent's exported directory (its ``agent.toml`` names the ``solve`` entry point).

``predict`` takes a DataFrame (or a dict / list of dicts) with a ``task_dir`` column. For each row it runs
``solve`` as a subprocess with the agent directory as working directory and ``PYTHONPATH``, on that task
directory, and returns one row per task: ``task_dir``, ``status`` (ok | failed | timeout), ``exit_code``,
``duration_s``, ``artifacts`` (files under ``<task_dir>/<artifact_path>``, or every file in the task
directory when the suite named no artifact path) and the tail of the output. The agent's code runs
unconfined with the caller's rights: promote only agents you trust, or call this inside a sandbox.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
from mlflow.pyfunc import PythonModel


class AgentModel(PythonModel):
    def load_context(self, context: Any) -> None:
        self.agent_dir = Path(context.artifacts["agent"]).resolve()
        manifest = tomllib.loads((self.agent_dir / "agent.toml").read_text())
        self.solve: list[str] = list(manifest["entry"]["solve"])
        config = dict(context.model_config or {})
        self.artifact_path = str(config.get("artifact_path") or "")
        self.timeout_s = float(config.get("timeout_s") or 3600)

    def predict(
        self, context: Any, model_input: pd.DataFrame, params: dict[str, Any] | None = None
    ) -> pd.DataFrame:
        # The signature makes MLflow hand over a DataFrame; a direct caller may pass records.
        frame = model_input if isinstance(model_input, pd.DataFrame) else pd.DataFrame(model_input)
        if "task_dir" not in frame.columns:
            raise ValueError(f"input needs a task_dir column; got {list(frame.columns)}")
        timeout_s = float((params or {}).get("timeout_s") or self.timeout_s)
        return pd.DataFrame([self._solve(Path(str(d)).resolve(), timeout_s) for d in frame["task_dir"]])

    def _solve(self, task_dir: Path, timeout_s: float) -> dict[str, Any]:
        values = {"task_dir": str(task_dir), "agent_dir": str(self.agent_dir)}
        argv = [arg.format(**values) if "{" in arg else arg for arg in self.solve]
        if argv and argv[0] in ("python", "python3"):
            argv[0] = sys.executable  # the interpreter serving the model, not whatever PATH finds first
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(self.agent_dir), os.environ.get("PYTHONPATH")])),
            "METASEARCH_TASK_DIR": str(task_dir),
        }
        started = time.monotonic()
        try:
            done = subprocess.run(
                argv,
                cwd=self.agent_dir,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
            status = "ok" if done.returncode == 0 else "failed"
            code, output = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as exc:
            status, code = "timeout", -1
            output = "".join(_text(x) for x in (exc.stdout, exc.stderr))
        except OSError as exc:
            status, code, output = "failed", -1, str(exc)
        root = task_dir / self.artifact_path if self.artifact_path else task_dir
        files = sorted(str(p) for p in root.rglob("*") if p.is_file()) if root.exists() else []
        return {
            "task_dir": str(task_dir),
            "status": status,
            "exit_code": code,
            "duration_s": round(time.monotonic() - started, 3),
            "artifacts": files,
            "output_tail": str(output)[-2000:],
        }


def _text(data: str | bytes | None) -> str:
    # TimeoutExpired carries bytes even for text-mode runs
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


mlflow.models.set_model(AgentModel())
