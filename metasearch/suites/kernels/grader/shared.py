"""What the judge and the workers compute the same way: task files, models and inputs for a seed, and the
wire format between them (one JSON object per line over a pipe)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# A fixed malloc threshold: without it, glibc's adaptive one makes the same allocation cost a page fault in
# some runs and not in others, and sub-millisecond timings vary several-fold between processes.
MALLOC_TUNABLES = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=268435456"
MAX_LINE = 1 << 16  # a reply longer than this is not one of ours


def load_task(task_dir: Path) -> dict[str, Any]:
    spec = tomllib.loads((task_dir / "task.toml").read_text())
    spec.setdefault("shapes", [])
    return spec


def import_file(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def sized(reference: Any, shape: dict[str, Any]) -> Iterator[None]:
    """The reference module with its module-level sizes set to one shape set, restored afterwards."""
    defaults = {k: getattr(reference, k) for k in shape}
    for k, v in shape.items():
        setattr(reference, k, v)
    try:
        yield
    finally:
        for k, v in defaults.items():
            setattr(reference, k, v)


def make_model(reference: Any, model_cls: Any, device: Any, seed: int, shape: dict[str, Any]) -> Any:
    """A model of ``model_cls`` with parameters drawn from ``seed``, as every process builds it."""
    import torch

    with sized(reference, shape):
        init = reference.get_init_inputs()
    torch.manual_seed(seed)
    return model_cls(*init).to(device).eval()


def make_inputs(reference: Any, device: Any, seed: int, shape: dict[str, Any]) -> list[Any]:
    """The reference's inputs for ``seed``, drawn on ``device`` (a GPU draws them itself: the same values
    in every process on the same kind of device)."""
    import torch

    with sized(reference, shape):
        torch.random.default_generator.manual_seed(seed)  # torch.manual_seed's part that matters, 60x faster
        if device.type == "cuda":
            torch.cuda.manual_seed(seed)
        with torch.device(device):
            inputs = reference.get_inputs()
        return [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]


def call(model: Any, inputs: list[Any]) -> Any:
    import torch

    with torch.no_grad():
        return model(*inputs)


def sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def as_array(output: Any) -> Any:
    """A plain tensor as a NumPy array (what is saved and compared); anything else is refused."""
    return _host_form(output).cpu().numpy()


# A digest of outputs' bytes, computed by a worker on its device and by the judge on what the worker sent:
# the sum of every 32-bit word mixed with a key the worker learns only when asked. Every intermediate value
# stays below 2**63 (the multiplier is below 2**31, words and mixed words are below 2**32), so no integer
# overflows, on any device, and the sum is exact in any order.
_WORD = 0xFFFFFFFF
_MIX = 0x7FEB352D
DIGEST_SLICE = 1 << 22  # words
ALIGN = 64  # bytes: where each input tensor starts in what is sent (``layout``)


def _host_form(output: Any) -> Any:
    """The output as ``as_array`` sends it, still on its device (bfloat16 widened: NumPy has none)."""
    import torch

    if type(output) is not torch.Tensor:
        raise TypeError(f"ModelNew returned {type(output).__name__}, not a plain torch.Tensor")
    output = output.detach()
    return output.float() if output.dtype == torch.bfloat16 else output


def digest(outputs: list[Any], key: int) -> int:
    """The digest of ``outputs`` (tensors, one after another), computed where they are, a slice at a time
    (its memory stays near a slice's)."""
    import torch

    parts = [_host_form(x).contiguous().reshape(-1).view(torch.uint8) for x in outputs]
    if not parts:
        return 0
    size = sum(len(x) for x in parts)
    if size % 4:
        parts.append(parts[0].new_zeros(-size % 4))
    words = (parts[0] if len(parts) == 1 else torch.cat(parts)).view(torch.int32)
    total = 0
    for start in range(0, len(words), DIGEST_SLICE):
        x = words[start : start + DIGEST_SLICE].to(torch.int64)
        x.bitwise_and_(_WORD).bitwise_xor_(key).mul_(_MIX)
        total += int(x.bitwise_xor_(x >> 31).bitwise_and_(_WORD).sum())
    return total


def pack(slots: list[list[Any]]) -> tuple[list[list[Any]], bytearray]:
    """Input sets as a JSON-able description and the tensors' bytes: ``["t", dtype, shape]`` per tensor
    (its bytes follow in order, each at an offset a multiple of ``ALIGN``: ``layout``), ``["v", value]``
    per plain value. The bytes are copied once, straight into the buffer that is sent (a problem's inputs
    can be gigabytes)."""
    import torch

    spec: list[list[Any]] = []
    tensors: list[Any] = []
    for inputs in slots:
        items: list[Any] = []
        for x in inputs:
            if isinstance(x, torch.Tensor):
                x = x.detach()
                items.append(["t", str(x.dtype).removeprefix("torch."), list(x.shape)])
                tensors.append(x)
            else:
                items.append(["v", x])
        spec.append(items)
    places = layout(spec)
    data = bytearray(places[-1][0] + places[-1][1] if places else 0)
    for x, (offset, size) in zip(tensors, places, strict=True):
        if size:
            view = torch.frombuffer(data, dtype=torch.uint8, count=size, offset=offset)
            view.view(x.dtype).view(x.shape).copy_(x)
    return spec, data


def layout(spec: list[list[Any]]) -> list[tuple[int, int]]:
    """Where each tensor ``pack`` described lies in its bytes, in order: (offset, size in bytes)."""
    import torch

    places, offset = [], 0
    for items in spec:
        for item in items:
            if item[0] == "t":
                count = 1
                for n in item[2]:
                    count *= n
                size = count * torch.empty((), dtype=getattr(torch, item[1])).element_size()
                places.append((offset, size))
                offset += -(-size // ALIGN) * ALIGN
    return places


def receive_buffer(size: int) -> Any:
    """A tensor of ``size`` bytes to receive inputs into: PyTorch's own memory, aligned as its kernels
    expect, so that the inputs can stay where they were received (``unpack``)."""
    import torch

    return torch.empty(size, dtype=torch.uint8)


def unpack(spec: list[list[Any]], data: Any, device: Any) -> list[list[Any]]:
    """The input sets ``pack`` described, as tensors on ``device``: on a CPU, views of ``data`` (a
    ``receive_buffer``) itself. No copy, so that the reference's worker does no work here a candidate's
    could skip: what a worker spends around the timed command beyond the reference's is charged to it, and
    an unpacking cheaper than the reference's would leave it room to work unseen."""
    import torch

    places = iter(layout(spec))
    slots = []
    for items in spec:
        inputs: list[Any] = []
        for item in items:
            if item[0] != "t":
                inputs.append(item[1])
                continue
            dtype, (offset, size) = getattr(torch, item[1]), next(places)
            if size:
                tensor = data[offset : offset + size].view(dtype).reshape(item[2])
                inputs.append(tensor if device.type == "cpu" else tensor.to(device))
            else:
                inputs.append(torch.empty(item[2], dtype=dtype, device=device))
        slots.append(inputs)
    return slots


def send(fd: int, message: dict[str, Any]) -> None:
    send_bytes(fd, memoryview((json.dumps(message) + "\n").encode()))


def send_bytes(fd: int, data: memoryview) -> None:
    while len(data):
        data = data[os.write(fd, data) :]


def non_dumpable() -> None:
    """No other process of this user may ptrace this one or read and write its memory through /proc.

    The candidate's worker runs as the same user as the judge and the reference worker; without this it
    could rewrite their code or clocks in memory."""
    dumpable(False)


def dumpable(on: bool) -> None:
    """Set whether this process is dumpable (``prctl(PR_SET_DUMPABLE)``; a forked process inherits it)."""
    pr_set_dumpable = 4
    _prctl(pr_set_dumpable, int(on))


def set_name(name: str) -> None:
    """This process's name as ``ps`` and ``/proc/PID/comm`` show it (15 bytes at most)."""
    import ctypes

    pr_set_name = 15
    _prctl(pr_set_name, ctypes.c_char_p(name.encode()[:15]))


def _prctl(option: int, value: Any) -> None:
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
