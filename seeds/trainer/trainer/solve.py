"""``python3 -m trainer.solve TASK_DIR``: train on the task's data, write output/predictions.npy.

Reads task.json for the problem kind and the time budget, stops training before the budget runs out,
keeps the best weights on a validation split when early stopping is on, and logs progress to stderr.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from trainer.model import lr_factor, mlp, optimizer

ROOT = Path(__file__).resolve().parents[1]


def log(message: str) -> None:
    print(f"[trainer] {message}", file=sys.stderr, flush=True)


def load_knobs() -> dict:
    return json.loads((ROOT / "knobs.json").read_text())


def train(task_dir: Path, knobs: dict) -> np.ndarray:
    started = time.monotonic()
    info = json.loads((task_dir / "task.json").read_text())
    budget = float(info["time_budget_s"]) * 0.85
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.set_num_threads(2)
    torch.manual_seed(0)
    x = np.load(task_dir / "train_x.npy").astype(np.float32)
    y = np.load(task_dir / "train_y.npy")
    test_x = np.load(task_dir / "test_x.npy").astype(np.float32)
    if knobs["standardize"]:
        mean, std = x.mean(0), x.std(0) + 1e-6
        x, test_x = (x - mean) / std, (test_x - mean) / std
    classification = info["kind"] == "classification"
    if classification:
        yt = torch.as_tensor(y, dtype=torch.long)
        n_out, loss_fn = int(info["classes"]), nn.CrossEntropyLoss()
    else:
        y_mean, y_std = float(y.mean()), float(y.std() + 1e-6)
        yt = torch.as_tensor((y - y_mean) / y_std, dtype=torch.float32).unsqueeze(1)
        n_out, loss_fn = 1, nn.MSELoss()
    xt = torch.as_tensor(x)
    n_val = int(len(xt) * float(knobs.get("val_fraction", 0.15))) if knobs["patience"] > 0 else 0
    perm = torch.randperm(len(xt))
    val_idx, train_idx = perm[:n_val], perm[n_val:]
    model = mlp(xt.shape[1], n_out, knobs).to(device)
    opt = optimizer(model, knobs)
    epochs, batch = int(knobs["epochs"]), int(knobs["batch_size"])
    best, best_state, bad = float("inf"), None, 0
    for epoch in range(epochs):
        for group in opt.param_groups:
            group["lr"] = float(knobs["lr"]) * lr_factor(knobs["schedule"], epoch, epochs)
        model.train()
        order = train_idx[torch.randperm(len(train_idx))]
        for i in range(0, len(order), batch):
            idx = order[i : i + batch]
            opt.zero_grad()
            loss = loss_fn(model(xt[idx].to(device)), yt[idx].to(device))
            loss.backward()
            opt.step()
        if n_val:
            model.eval()
            with torch.no_grad():
                val = float(loss_fn(model(xt[val_idx].to(device)), yt[val_idx].to(device)))
            if val < best:
                best, bad = val, 0
                best_state = {k: v.clone() for k, v in model.state_dict().items()}
            else:
                bad += 1
                if bad >= int(knobs["patience"]):
                    log(f"early stop at epoch {epoch}")
                    break
        if time.monotonic() - started > budget:
            log(f"time budget reached at epoch {epoch}")
            break
    if best_state is not None:
        model.load_state_dict(best_state)
    log(f"trained {epoch + 1} epochs in {time.monotonic() - started:.1f}s; last loss {loss.item():.4f}")
    model.eval()
    with torch.no_grad():
        out = model(torch.as_tensor(test_x).to(device)).cpu()
    return out.argmax(1).numpy() if classification else (out.squeeze(1).numpy() * y_std + y_mean)


def main(argv: list[str]) -> int:
    task_dir = Path(argv[1] if len(argv) > 1 else "/task")
    knobs = load_knobs()
    log(f"knobs {json.dumps(knobs, sort_keys=True)}")
    predictions = train(task_dir, knobs)
    (task_dir / "output").mkdir(exist_ok=True)
    np.save(task_dir / "output" / "predictions.npy", predictions)
    log(f"wrote {len(predictions)} predictions")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
