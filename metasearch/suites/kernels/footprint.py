"""How much memory grading a kernels-format problem takes, estimated before any budget is spent on it.

The problem files are evaluated on PyTorch's ``meta`` device (shapes and dtypes, no data) in one
subprocess: ``get_inputs``' tensors, the model's parameters and buffers, and the output of ``forward``.
A forward that the meta device cannot run (data-dependent shapes) counts its output as large as its
largest input, and says why (``failure``): a problem whose forward runs at full size and fails once scaled
down was made too small by the scale (a convolution's input below its kernel). From those sizes, ``grading_mb``
gives the memory a grading run needs: the judge holds the expected output, the inputs it sent and what the
candidate's worker sent back; each of the two workers holds the model, its inputs (briefly twice, while
unpacking) and its output. A model with a convolution also needs a workspace as large as its output while
its forward runs (PyTorch's CPU convolutions compute into a buffer of their own layout and copy the result
out; measured on KernelBench L1/54, a 3D convolution with a 931 MiB output: 1,870 MiB above its inputs at
its peak), in the judge (which computes the expected output) and in each worker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from metasearch.errors import InfrastructureError

MIB = 1 << 20
BASE_MB = 2048  # three Python processes with PyTorch loaded, and the sandbox's own
MARGIN = 1.25
MIN_MB = 4096

_PROBE = r"""
import importlib.util, json, sys, torch

def size(x):
    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, (list, tuple)):
        return sum(size(y) for y in x)
    return 0

out = {}
for path in sys.argv[1:]:
    try:
        spec = importlib.util.spec_from_file_location("_problem", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        with torch.device("meta"):
            inputs = list(module.get_inputs())
            model = module.Model(*module.get_init_inputs())
            largest = max([size(x) for x in inputs] or [0])
            failure = None
            try:
                with torch.no_grad():
                    output = size(model(*inputs))
            except Exception as exc:
                output, failure = largest, f"{type(exc).__name__}: {exc}"[:300]
        params = sum(size(p) for p in model.parameters()) + sum(size(b) for b in model.buffers())
        convolves = any(isinstance(m, torch.nn.modules.conv._ConvNd) for m in model.modules())
        out[path] = {"inputs": size(inputs), "output": output, "params": params, "failure": failure,
                     "workspace": output if convolves else 0}
    except Exception as exc:
        out[path] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
print(json.dumps(out))
"""


@dataclass(frozen=True)
class Footprint:
    inputs: int  # bytes of one call's tensor inputs
    output: int
    params: int
    failure: str | None = None  # why ``forward`` did not run on the meta device (then output is a guess)
    workspace: int = 0  # what ``forward`` holds beside its output while it runs (a convolution's buffer)

    @property
    def grading_mb(self) -> int:
        """Memory for one grading run (judge and both workers), with a margin."""
        judge = 2 * self.inputs + 2 * self.output + self.params + self.workspace
        worker = 2 * self.inputs + self.output + self.params + self.workspace
        return max(MIN_MB, int(BASE_MB + MARGIN * (judge + 2 * worker) / MIB))

    def describe(self) -> str:
        return (
            f"inputs {self.inputs / MIB:.0f} MiB, output {self.output / MIB:.0f} MiB, "
            f"parameters {self.params / MIB:.0f} MiB, workspace {self.workspace / MIB:.0f} MiB"
        )


def estimate(files: Sequence[Path], timeout_s: float = 600.0) -> dict[Path, Footprint | str]:
    """Each problem file's footprint, or why it could not be estimated."""
    if not files:
        return {}
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE, *map(str, files)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
        )
    except subprocess.TimeoutExpired:
        raise InfrastructureError(
            f"estimating the memory of {len(files)} problems took over {timeout_s:g} s"
        ) from None
    if proc.returncode != 0:
        raise InfrastructureError(f"estimating problem sizes failed: {proc.stderr[-500:]}")
    raw = json.loads(proc.stdout.strip().splitlines()[-1])
    found: dict[Path, Footprint | str] = {}
    for path in files:
        entry = raw.get(str(path), {"error": "not estimated"})
        found[path] = (
            str(entry["error"])
            if "error" in entry
            else Footprint(
                int(entry["inputs"]),
                int(entry["output"]),
                int(entry["params"]),
                entry.get("failure"),
                int(entry.get("workspace", 0)),
            )
        )
    return found


def machine_mb() -> int:
    """This machine's memory (what a sandbox here can be given at most)."""
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / MIB)
