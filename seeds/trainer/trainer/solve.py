"""``python3 -m trainer.solve TASK_DIR``: train on the task's data, write output/predictions.npy.

Reads task.json for the problem kind and the time budget, stops training before the budget runs out,
keeps the best weights on a validation split when early stopping is on (``patience`` > 0), and logs
progress to stderr. Deterministic for a given task and knobs (the torch seed comes from the task id and
the ``seed`` knob) unless the time budget cuts training short. Uses a GPU when torch sees one.
"""

from __future__ import annotations

import json
import os
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import torch
from torch import nn

from trainer.model import class_weights, lr_factor, mlp, optimizer

ROOT = Path(__file__).resolve().parents[1]
BUDGET_FRACTION = 0.8  # of task.json's time_budget_s spent training; the rest covers start-up and writing


def log(message: str) -> None:
    print(f"[trainer] {message}", file=sys.stderr, flush=True)


def load_knobs() -> dict:
    return json.loads((ROOT / "knobs.json").read_text())


def train(task_dir: Path, knobs: dict) -> np.ndarray:
    """Train with ``knobs`` on the task in ``task_dir`` and return predictions for test_x.npy."""
    started = time.monotonic()
    info = json.loads((task_dir / "task.json").read_text())
    deadline = started + float(info["time_budget_s"]) * BUDGET_FRACTION
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    # The sandbox sets OMP_NUM_THREADS to its CPU share; more threads than cores only slow small nets down.
    torch.set_num_threads(max(1, min(2, int(os.environ.get("OMP_NUM_THREADS", "2")))))
    torch.manual_seed(zlib.crc32(str(info.get("task", "")).encode()) + int(knobs.get("seed", 0)))

    x = np.load(task_dir / "train_x.npy").astype(np.float32)
    y = np.load(task_dir / "train_y.npy")
    test_x = np.load(task_dir / "test_x.npy").astype(np.float32)
    if knobs["standardize"]:
        mean, std = x.mean(0), x.std(0) + 1e-6
        x, test_x = (x - mean) / std, (test_x - mean) / std
    classification = info["kind"] == "classification"
    n_out = int(info["classes"]) if classification else 1
    if classification:
        yt = torch.as_tensor(y, dtype=torch.long)
        weight = class_weights(yt, n_out, str(knobs.get("class_weight", "none")))
        loss_fn: nn.Module = nn.CrossEntropyLoss(weight=None if weight is None else weight.to(device))
    else:
        y_mean, y_std = float(y.mean()), float(y.std() + 1e-6)  # regress on a standardised target
        yt = torch.as_tensor((y - y_mean) / y_std, dtype=torch.float32).unsqueeze(1)
        loss_fn = nn.MSELoss()
    xt, yt = torch.as_tensor(x).to(device), yt.to(device)

    patience = int(knobs["patience"])
    n_val = int(len(xt) * float(knobs.get("val_fraction", 0.15))) if patience > 0 else 0
    perm = torch.randperm(len(xt), device=device)
    val_idx, train_idx = perm[:n_val], perm[n_val:]
    model = mlp(xt.shape[1], n_out, knobs).to(device)
    opt = optimizer(model, knobs)
    epochs, batch = int(knobs["epochs"]), int(knobs["batch_size"])
    best, best_state, bad, out_of_time = float("inf"), None, 0, False
    loss = torch.tensor(float("nan"))
    log(
        f"{info.get('task')}: {len(train_idx)} train / {n_val} validation rows, {xt.shape[1]} features, {device}"
    )
    epoch = 0
    for epoch in range(epochs):
        for group in opt.param_groups:
            group["lr"] = float(knobs["lr"]) * lr_factor(str(knobs["schedule"]), epoch, epochs)
        model.train()
        order = train_idx[torch.randperm(len(train_idx), device=device)]
        for i in range(0, len(order), batch):
            idx = order[i : i + batch]
            opt.zero_grad()
            loss = loss_fn(model(xt[idx]), yt[idx])
            if not torch.isfinite(loss):
                break  # diverged: further steps only spread the NaNs
            loss.backward()
            opt.step()
            if time.monotonic() > deadline:
                out_of_time = True
                break
        if not torch.isfinite(loss):
            log(f"training diverged in epoch {epoch} (loss {loss.item()}); lower lr or standardize")
            break
        if n_val:
            model.eval()
            with torch.no_grad():
                val = float(loss_fn(model(xt[val_idx]), yt[val_idx]))
            if val < best:
                best, bad = val, 0
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            else:
                bad += 1
                if bad >= patience:
                    log(f"early stop at epoch {epoch}: validation loss {val:.4f}, best {best:.4f}")
                    break
        if epoch % 10 == 0:
            log(f"epoch {epoch}: train loss {loss.item():.4f}")
        if out_of_time:
            log(f"time budget reached in epoch {epoch}")
            break
    if best_state is not None:
        model.load_state_dict(best_state)
    log(f"trained {epoch + 1} epochs in {time.monotonic() - started:.1f}s; last batch loss {loss.item():.4f}")
    model.eval()
    with torch.no_grad():
        out = model(torch.as_tensor(test_x).to(device)).cpu()
    if classification:
        return out.argmax(1).numpy().astype(np.int64)
    return (out.squeeze(1).numpy() * y_std + y_mean).astype(np.float32)


def main(argv: list[str]) -> int:
    task_dir = Path(argv[1] if len(argv) > 1 else os.environ.get("METASEARCH_TASK_DIR", "/task"))
    knobs = load_knobs()
    log(f"knobs {json.dumps(knobs, sort_keys=True)}")
    predictions = train(task_dir, knobs)
    (task_dir / "output").mkdir(exist_ok=True)
    np.save(task_dir / "output" / "predictions.npy", predictions)
    log(f"wrote {len(predictions)} predictions to {task_dir / 'output' / 'predictions.npy'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
