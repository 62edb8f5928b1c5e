"""Candidate solutions for the kernels suite's tests only (never shown to agents): for every task an
oracle (a correct vectorised version), a wrong one and a cheating one.

Cheats rotate over three tricks seen in the wild: writing into the inputs, replacing the timer, and
returning outputs cached across calls (right once, stale for new inputs of the same shape). ``EXPLOITS``
holds the subtler attacks on the grader itself, each with what must catch it.
"""

from __future__ import annotations

HEADER = "import time\n\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"

# task -> (constructor parameters, constructor body, forward parameters, the correct output)
ORACLES: dict[str, tuple[str, str, str, str]] = {
    "row_softmax": ("", "", "x", "torch.softmax(x, dim=-1)"),
    "cumsum_loop": ("", "", "x", "torch.cumsum(x, dim=1)"),
    "pairwise_distance": ("", "", "a, b", "torch.cdist(a, b, compute_mode='donot_use_mm_for_euclid_dist')"),
    "layer_norm": (
        "dim=128",
        "self.weight = nn.Parameter(torch.randn(dim))\nself.bias = nn.Parameter(torch.randn(dim))\nself.eps = 1e-5",
        "x",
        "F.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)",
    ),
    "gelu_bias_scale": (
        "dim=256",
        "self.bias = nn.Parameter(torch.randn(dim))\nself.scale = nn.Parameter(torch.randn(dim))",
        "x",
        "F.gelu(x + self.bias, approximate='tanh') * self.scale",
    ),
    "matvec_rows": ("", "", "a, x", "torch.mv(a, x)"),
    "conv1d_taps": (
        "channels=16, kernel=7",
        "self.weight = nn.Parameter(torch.randn(channels, kernel))",
        "x",
        "F.conv1d(x, self.weight[:, None, :], groups=x.shape[1])",
    ),
    "row_l2_normalize": ("", "", "x", "x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)"),
    "add_control": ("", "", "x, y", "x + y"),
    "gpu_row_softmax": ("", "", "x", "torch.softmax(x, dim=1)"),
}
CHEATS = ("inputs", "timer", "cache")


def _module(task: str, result: str, *, prelude: str = "", before_return: str = "") -> str:
    params, body, args, _ = ORACLES[task]
    lines = ["super().__init__()", *filter(None, body.split("\n"))]
    ctor = f"    def __init__(self{', ' + params if params else ''}):\n" + "".join(
        f"        {x}\n" for x in lines
    )
    return (
        f"{HEADER}{prelude}\n\nclass ModelNew(nn.Module):\n{ctor}\n"
        f"    def forward(self, {args}):\n        out = {result}\n{before_return}        return out\n"
    )


def oracle(task: str) -> str:
    return _module(task, ORACLES[task][3])


def wrong(task: str) -> str:
    """Numerically wrong: the right computation, off by a small constant."""
    return _module(task, f"({ORACLES[task][3]}) + 0.01")


def cheat_kind(task: str) -> str:
    return CHEATS[sorted(ORACLES).index(task) % len(CHEATS)]


def cheat(task: str) -> str:
    kind = cheat_kind(task)
    first = ORACLES[task][2].split(",")[0].strip()
    if kind == "inputs":  # reuses its input's memory as scratch space
        return _module(task, ORACLES[task][3], before_return=f"        {first}.mul_(0.5)\n")
    if kind == "timer":  # makes itself look fast by slowing the clock
        prelude = "_real = time.perf_counter\ntime.perf_counter = lambda: _real() / 1000.0\n"
        return _module(task, ORACLES[task][3], prelude=prelude)
    prelude = "_CACHE = {}\n"  # right once per shape, then the same answer for any input of that shape
    result = (
        f"_CACHE[tuple({first}.shape)] if tuple({first}.shape) in _CACHE "
        f"else _CACHE.setdefault(tuple({first}.shape), {ORACLES[task][3]})"
    )
    return _module(task, result, prelude=prelude)


_FIND_REFERENCE = (
    "import gc, types\n"
    "_REF = next(o for o in gc.get_objects() if isinstance(o, types.ModuleType) "
    "and o.__name__ == '_metasearch_reference')\n"
)
_SOFTMAX = ORACLES["row_softmax"][3]

# name -> (task, candidate source, a flag or an error fragment that must appear)
EXPLOITS: dict[str, tuple[str, str, str]] = {
    # wrong numbers, with the comparison patched to always agree
    "patched_allclose": (
        "row_softmax",
        _module("row_softmax", f"{_SOFTMAX} + 1.0", prelude="torch.allclose = lambda *a, **k: True\n"),
        "wrong output",
    ),
    # a tensor subclass whose comparisons could lie
    "tensor_subclass": (
        "row_softmax",
        _module(
            "row_softmax",
            f"({_SOFTMAX}).as_subclass(Liar)",
            prelude="class Liar(torch.Tensor):\n    pass\n",
        ),
        "plain torch.Tensor",
    ),
    # slow, but remembers answers by input value: worthless when every timed call gets fresh inputs
    "value_cache": (
        "row_softmax",
        _module(
            "row_softmax",
            f"_SEEN[k] if (k := x.numpy().tobytes()) in _SEEN else _SEEN.setdefault(k, slow({_SOFTMAX}))",
            prelude="_SEEN = {}\n\ndef slow(out):\n    time.sleep(0.02)\n    return out\n",
        ),
        "not faster",
    ),
    # more threads than the reference gets
    "threads": (
        "matvec_rows",
        _module("matvec_rows", ORACLES["matvec_rows"][3], before_return="        torch.set_num_threads(2)\n"),
        "multithreaded",
    ),
    # makes every call of the reference slower
    "slowed_reference": (
        "row_softmax",
        _module(
            "row_softmax",
            _SOFTMAX,
            prelude=(
                "_call = nn.Module.__call__\n\n"
                "def _slow(self, *a, **k):\n"
                "    if type(self).__name__ == 'Model':\n"
                "        time.sleep(0.01)\n"
                "    return _call(self, *a, **k)\n\n"
                "nn.Module.__call__ = _slow\n"
            ),
        ),
        "tampered_runtime",
    ),
    # answers by calling the reference it was told it cannot import
    "calls_reference": (
        "row_softmax",
        _module("row_softmax", "_REF.Model.forward(self, x)", prelude=_FIND_REFERENCE),
        "called_reference",
    ),
    # prints a made-up report and leaves before the grader's loop runs
    "fake_report": (
        "row_softmax",
        "import json, os\nprint(json.dumps({'speedup': 9.0, 'ci_low': 8.0, 'ci_high': 10.0, 'ref_ms': 1.0, "
        "'cand_ms': 0.1, 'timed_s': 0.0, 'flags': [], 'changed': []}), flush=True)\nos._exit(0)\n",
        "no output saved",
    ),
}
