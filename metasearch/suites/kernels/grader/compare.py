"""How the judge compares what a worker sent with what it expects: outputs within the task's tolerances,
inputs byte for byte, a slice at a time (memory stays near the arrays' own), and the digest of outputs as
sent."""

from __future__ import annotations

import warnings
from typing import Any

import shared

COMPARE_CHUNK = 1 << 22  # elements compared at a time


def compare(got: Any, want: Any, atol: float, rtol: float) -> str | None:
    """None when ``got`` is within the tolerances of ``want``, else what differs."""
    import numpy as np

    if got.shape != want.shape or got.dtype != want.dtype:
        return f"output {got.shape} {got.dtype} differs from the reference's {want.shape} {want.dtype}"
    atol, rtol = float(atol), float(rtol)
    flat_got, flat_want = got.reshape(-1), want.reshape(-1)
    worst, close = 0.0, True
    for start in range(0, flat_want.size, COMPARE_CHUNK):
        a, b = flat_got[start : start + COMPARE_CHUNK], flat_want[start : start + COMPARE_CHUNK]
        if not np.allclose(a, b, atol=atol, rtol=rtol):
            close = False
            worst = max(worst, float(np.nanmax(np.abs(a.astype(np.float64) - b))))
    if close:
        return None
    return f"wrong output (max abs difference {worst:.3g}, atol {atol:g}, rtol {rtol:g})"


def same_array(got: Any, want: Any) -> bool:
    """Whether two arrays hold the same bytes in the same shape (the candidate's inputs after its calls and
    the reference's after its own, on the very same input sets)."""
    return bool(got.shape == want.shape and got.dtype == want.dtype and same_bytes(got, want, 0, want.nbytes))


def same_bytes(array: Any, data: Any, offset: int, size: int) -> bool:
    """Whether ``array`` holds exactly the ``size`` bytes at ``offset`` of ``data``, a slice at a time."""
    import numpy as np

    if array.nbytes != size:
        return False
    got = array.reshape(-1).view(np.uint8)
    sent = np.frombuffer(data, dtype=np.uint8, count=size, offset=offset) if size else got
    step = COMPARE_CHUNK * 8
    return all(np.array_equal(got[i : i + step], sent[i : i + step]) for i in range(0, size, step))


def digest_of(arrays: list[Any], key: int, device: Any) -> int:
    """The digest of the outputs as sent, computed as the worker computes it, on the same device."""
    import numpy as np
    import torch

    with warnings.catch_warnings():  # arrays read from the pipe are read-only; the digest only reads
        warnings.simplefilter("ignore", UserWarning)
        return shared.digest([torch.from_numpy(np.ascontiguousarray(a)).to(device) for a in arrays], key)
