"""The coding-agent seed solves suite tasks end to end: in a Docker sandbox, talking to the scripted
OpenAI-compatible server (playing a competent model) only through the job's gateway, graded by the suite
in a fresh sandbox with hidden tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from metasearch.launch import resolve_seed
from metasearch.llm.config import LLMSection
from metasearch.llm.scripted import ScriptedLLM
from metasearch.llm.service import LLMService
from metasearch.runner import evaluate_in_sandbox
from metasearch.sandboxes.protocol import Limits
from metasearch.suites.code_edit import CodeEditSuite

FIX_TEXTSTATS = """The issue says words separated by several spaces are miscounted; `split(" ")` is the cause.
```bash
cd repo && sed -i 's/text.split(" ")/text.split()/' textstats.py && python3 -m pytest -q 2>&1 | tail -3 && git diff > /task/output/patch.diff && cat /task/output/patch.diff
```"""


def script_for(steps: list[str]) -> Any:
    def competent(body: dict[str, Any]) -> str:
        messages = body["messages"]
        done = sum(1 for m in messages if m["role"] == "assistant")
        if done and "exit code 0" not in messages[-1]["content"]:
            return "SUBMIT\ngave up: " + messages[-1]["content"][:80]
        return steps[done] if done < len(steps) else "SUBMIT\nfixed"

    return competent


def _solve(docker_sandbox_factory: Any, tmp_path: Path, suite: Any, task_id: str, steps: list[str]) -> Any:
    with ScriptedLLM(script_for(steps)) as llm:
        service = LLMService(LLMSection(base_url=llm.base_url, api_key_env=None), study_dir=tmp_path)
        try:
            [task] = [t for t in suite.tasks() if t.id == task_id]
            log_dir = tmp_path / "logs" / "job"
            log_dir.mkdir(parents=True)
            result = evaluate_in_sandbox(
                resolve_seed("coding-agent"),
                task,
                suite,
                docker_sandbox_factory(),
                Limits(timeout_s=300),
                {"metasearch.job": "job-1", "metasearch.study": "pytest"},
                log_dir,
                llm=service,
            )
        finally:
            service.close()
        return result, llm, log_dir, service


@pytest.mark.docker
def test_the_coding_agent_fixes_a_code_edit_bug(docker_sandbox_factory: Any, tmp_path: Path) -> None:
    steps = ["First read the task.\n```bash\ncat TASK.md && ls repo\n```", FIX_TEXTSTATS]
    result, llm, log_dir, service = _solve(
        docker_sandbox_factory, tmp_path, CodeEditSuite(), "code-edit/textstats", steps
    )
    assert result.error is None and result.score == 1.0, result
    assert result.metrics["resolved"] == 1.0
    agent_log = (log_dir / "agent.log").read_text()
    assert "=== result: fixed" in agent_log and "--- step 1 observation" in agent_log
    assert (
        "word_count" in llm.requests[1]["messages"][-1]["content"]
        or "textstats" in llm.requests[1]["messages"][-1]["content"]
    )
    transcript = [json.loads(x) for x in (log_dir / "llm.jsonl").read_text().splitlines()]
    assert len(transcript) == len(llm.requests) == 3 and service.meter.job("job-1").calls == 3
    # every turn is capped (the seed's max_reply_tokens knob): a small model left uncapped fills its context
    assert {r.get("max_tokens") for r in llm.requests} == {768}


WRITE_KERNEL = """The reference loops over rows; one fused library call does the same.
```bash
cat > output/solution.py <<'EOF'
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)
EOF
python3 -c "
import torch, reference, sys
sys.path.insert(0, 'output')
import solution
x = torch.randn(8, 33)
assert torch.allclose(solution.ModelNew()(x), reference.Model()(x), atol=1e-5)
print('matches the reference')
"
```"""


@pytest.mark.docker
def test_the_coding_agent_speeds_up_a_kernel(docker_sandbox_factory: Any, tmp_path: Path) -> None:
    from metasearch.suites.kernels import KernelsSuite

    steps = ["Read the task and the reference.\n```bash\ncat TASK.md reference.py\n```", WRITE_KERNEL]
    suite = KernelsSuite(KernelsSuite.Config(reps=9))
    result, llm, log_dir, service = _solve(
        docker_sandbox_factory, tmp_path, suite, "kernels/row_softmax", steps
    )
    assert result.error is None and result.metrics["correct"] == 1.0, result
    assert result.metrics["fast_2"] == 1.0 and result.score > 0.5, result
    assert "matches the reference" in (log_dir / "agent.log").read_text()
    assert "class Model(nn.Module)" in llm.requests[1]["messages"][-1]["content"]  # it saw the reference
    assert service.meter.job("job-1").calls == 3


def test_the_coding_agent_runs_standalone_against_any_endpoint(tmp_path: Path) -> None:
    """Production use without metasearch: `python3 -m coder.solve TASK_DIR` with OPENAI_BASE_URL."""
    import os
    import shutil
    import subprocess
    import sys

    agent = tmp_path / "agent"
    shutil.copytree(resolve_seed("coding-agent"), agent, ignore=shutil.ignore_patterns("__pycache__"))
    CodeEditSuite().prepare("code-edit/textstats", tmp_path / "task")
    steps = [
        "First read the task.\n```bash\ncat TASK.md && ls repo\n```",
        FIX_TEXTSTATS.replace("/task/", f"{tmp_path}/task/"),
    ]
    with ScriptedLLM(script_for(steps)) as llm:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "OPENAI_BASE_URL": llm.base_url,
            "OPENAI_API_KEY": "sk-test",
            "METASEARCH_LLM_SOCKET": str(tmp_path / "no-such.sock"),
        }
        run = subprocess.run(
            [sys.executable, "-m", "coder.solve", str(tmp_path / "task")],
            cwd=agent, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "=== result: fixed" in run.stdout
    assert "text.split()" in (tmp_path / "task" / "output" / "patch.diff").read_text()
