"""A grading worker: builds models and inputs and runs them when the judge says so, nothing else.

Started by the judge twice: once with the reference only (``--candidate`` absent), once with the candidate.
It reads one command per line from ``--cmd-fd`` and answers each on ``--reply-fd``; the judge times the
answers with its own clock. Nothing this process says is a verdict: the candidate's worker runs the
candidate's code and may say anything. The judge trusts only what it can check (saved outputs against its
own, its own clock, the kernel's CPU accounting); ``audit`` reports what a polite candidate's process saw
and can only count against it.

Commands: ``model`` (build for a seed and shape set), ``inputs`` (input sets the judge made, their bytes
following the command line; or drawn here, on the device, from the judge's seeds), ``run`` (call the model
once per input set, then synchronise the device; with no input sets, the judge's measure of the round
trip), ``digest`` (of every output's bytes, under the judge's key: the outputs must exist to answer it),
``fetch`` (send some outputs, optionally with their inputs, as raw arrays after the answer line),
``audit``, ``exit``.
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import inspect
import json
import math
import os
import random
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any, NoReturn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import shared

OOM_FIRST = 1000  # the highest out-of-memory priority


class Guard:
    """What grading relied on before the candidate was imported; ``changed()`` names what moved."""

    def __init__(self, spaces: dict[str, Any], allowed_code_dir: str) -> None:
        self.spaces = spaces
        self.allowed_code_dir = allowed_code_dir
        self.before = {name: dict(self._callables(space)) for name, space in spaces.items()}

    @staticmethod
    def _callables(space: Any) -> Any:
        for key in dir(space):
            value = inspect.getattr_static(space, key, None)
            if callable(value) or isinstance(value, (staticmethod, classmethod, property)):
                yield key, value

    def changed(self) -> list[str]:
        moved = []
        for name, space in self.spaces.items():
            for key, value in self.before[name].items():
                new = inspect.getattr_static(space, key, None)
                if new is not value and not self._library_wrapper(new):
                    moved.append(f"{name}.{key}")
        return moved

    def _library_wrapper(self, new: Any) -> bool:
        """PyTorch patches a few of its own functions when parts of it load (``torch.compile`` wraps
        ``manual_seed`` and hooks ``nn.Module.__init__``): code that lives in PyTorch's files is that."""
        code = getattr(new, "__code__", None)
        return code is not None and code.co_filename.startswith(self.allowed_code_dir)


class Worker:
    def __init__(self, args: argparse.Namespace) -> None:
        import numpy as np
        import torch

        self.np, self.torch = np, torch
        self.device = torch.device(args.device)
        if self.device.type == "cpu":
            torch.set_num_threads(1)
        self.reference = shared.import_file("_metasearch_reference", Path(args.task_dir) / "reference.py")
        del sys.modules["_metasearch_reference"]  # not reachable by name from the candidate
        self.model_cls = self.reference.Model
        self.model: Any = None
        self.slots: list[list[Any]] = []
        self.outputs: list[Any] = []
        self.reference_calls = [0]
        self.threads_changed = False
        self.guard: Guard | None = None
        if args.candidate:
            self._load_candidate(Path(args.candidate))

    def _load_candidate(self, path: Path) -> None:
        torch, calls = self.torch, self.reference_calls
        forward = self.reference.Model.forward

        def counted(model: Any, *a: Any, **k: Any) -> Any:
            calls[0] += 1
            return forward(model, *a, **k)

        self.reference.Model.forward = counted
        spaces = {
            "builtins": builtins, "time": time, "os": os, "json": json, "math": math, "random": random,
            "statistics": statistics, "numpy": self.np, "torch": torch, "torch.Tensor": torch.Tensor,
            "torch.nn.Module": torch.nn.Module, "torch.nn.functional": torch.nn.functional,
            "torch.cuda": torch.cuda, "torch._C._VariableFunctions": torch._C._VariableFunctions,
            "torch._C._nn": torch._C._nn, "reference": self.reference, "reference.Model": self.reference.Model,
        }  # fmt: skip
        self.guard = Guard(spaces, allowed_code_dir=str(Path(str(torch.__file__)).parent) + os.sep)
        self.model_cls = shared.import_file("solution", path).ModelNew

    def handle(self, op: str, msg: dict[str, Any]) -> dict[str, Any]:
        if op == "model":
            self.model = shared.make_model(
                self.reference, self.model_cls, self.device, msg["seed"], msg["shape"]
            )
        elif op == "inputs":
            if "seeds" in msg:  # drawn here, on the device, from the judge's seeds
                self.slots = [shared.make_inputs(self.reference, self.device, s, {}) for s in msg["seeds"]]
                shared.sync(self.device)
            else:
                payload = msg.pop("payload", None)
                self.slots = shared.unpack(
                    msg["slots"], shared.receive_buffer(0) if payload is None else payload, self.device
                )
            self.outputs = []
        elif op == "run":
            self.outputs = [shared.call(self.model, inputs) for inputs in self.slots]
            shared.sync(self.device)
            if self.device.type == "cpu" and self.torch.get_num_threads() != 1:
                self.threads_changed = True
                self.torch.set_num_threads(1)
        elif op == "digest":
            return {"ok": True, "digest": str(shared.digest(self.outputs, msg["key"]))}
        elif op == "fetch":
            arrays = [shared.as_array(self.outputs[i]) for i in msg["slots"]]
            if msg.get("inputs"):
                arrays += [
                    shared.as_array(x) for i in msg["slots"] for x in self.slots[i] if hasattr(x, "numel")
                ]
            # ascontiguousarray alone would make a 0-d output (a loss) 1-d
            return {"ok": True, "arrays": [self.np.ascontiguousarray(a).reshape(a.shape) for a in arrays]}
        elif op == "audit":
            return {
                "changed": self.guard.changed() if self.guard else [],
                "reference_calls": self.reference_calls[0],
                "threads_changed": self.threads_changed,
            }
        else:
            raise ValueError(f"unknown command {op!r}")
        return {"ok": True}


def forked(
    argv: list[str], keep: tuple[int, ...], stderr_fd: int, env: dict[str, str], name: str
) -> NoReturn:
    """Become a worker in a process just forked from the judge, as if started afresh as ``worker.py ARGV``
    with environment ``env``: only its own pipes open (the judge's other descriptors, the other worker's
    pipes among them, closed), standard input and output on ``/dev/null``, standard error on
    ``stderr_fd``, this module as ``__main__``, and ``name`` as the process's name (``ps``, ``/proc/PID/comm``).
    Never returns: the process exits when the worker does, running none of the judge's exit handlers."""
    code = 1
    try:
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(stderr_fd, 2)
        for fd in map(int, os.listdir("/proc/self/fd")):
            if fd > 2 and fd not in keep:
                with contextlib.suppress(OSError):
                    os.close(fd)
        os.environ.clear()
        os.environ.update(env)
        sys.dont_write_bytecode = True
        sys.argv = [__file__, *argv]
        sys.modules["__main__"] = sys.modules[__name__]
        shared.set_name(name)
        shared.dumpable(True)  # the judge is not; the reference's worker makes itself so again, in main
        main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(code)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A kernels grading worker (started by the judge).")
    for name in ("--task-dir", "--device"):
        parser.add_argument(name, required=True)
    parser.add_argument("--candidate")
    parser.add_argument("--cmd-fd", type=int, required=True)
    parser.add_argument("--reply-fd", type=int, required=True)
    args = parser.parse_args(argv)
    reply = args.reply_fd
    if args.candidate:  # the first process the kernel ends when memory runs out, so never the judge
        with contextlib.suppress(OSError):
            Path("/proc/self/oom_score_adj").write_text(str(OOM_FIRST))
    if not args.candidate:  # the reference's worker: the candidate's process, started next, may not touch it
        shared.non_dumpable()
        shared.send(reply, {"alive": True})
    try:
        worker = Worker(args)
    except Exception as exc:
        what = "cannot import ModelNew from the candidate" if args.candidate else "the reference failed"
        shared.send(reply, {"error": f"{what}: {type(exc).__name__}: {exc}"})
        return
    shared.send(reply, {"ok": True})
    with os.fdopen(args.cmd_fd, "rb") as commands:  # buffered: a command line in one read
        for line in iter(commands.readline, b""):
            msg = json.loads(line)
            if msg.get("nbytes"):
                payload = shared.receive_buffer(int(msg["nbytes"]))  # read in place: inputs can be gigabytes
                view, got = memoryview(payload.numpy()), 0
                while got < len(payload):
                    n = commands.readinto(view[got:])
                    if not n:
                        return
                    got += n
                msg["payload"] = payload
            if msg["op"] == "exit":
                return
            try:
                answer = worker.handle(msg["op"], msg)
            except Exception as exc:
                answer = {"error": f"candidate raised {type(exc).__name__}: {exc}"}
            arrays = answer.pop("arrays", [])
            answer = {**answer, "id": msg["id"]}
            if arrays:
                answer["arrays"] = [[a.dtype.str, list(a.shape)] for a in arrays]
            shared.send(reply, answer)
            for array in arrays:
                shared.send_bytes(reply, memoryview(array.reshape(-1).view("u1")))  # no copy


if __name__ == "__main__":
    main()
