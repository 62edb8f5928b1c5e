"""The model and its training pieces, each shaped by one or more knobs (see knobs.json / agent.toml)."""

from __future__ import annotations

import math

import torch
from torch import nn

ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU, "gelu": nn.GELU}


def mlp(n_in: int, n_out: int, knobs: dict) -> nn.Module:
    """``depth`` hidden layers of ``hidden`` units (depth 0 is a linear model), then a linear head."""
    layers: list[nn.Module] = []
    width = n_in
    for _ in range(int(knobs["depth"])):
        layers += [nn.Linear(width, int(knobs["hidden"])), ACTIVATIONS[knobs["activation"]]()]
        if float(knobs["dropout"]) > 0:
            layers.append(nn.Dropout(float(knobs["dropout"])))
        width = int(knobs["hidden"])
    layers.append(nn.Linear(width, n_out))
    return nn.Sequential(*layers)


def optimizer(model: nn.Module, knobs: dict) -> torch.optim.Optimizer:
    lr, wd = float(knobs["lr"]), float(knobs["weight_decay"])
    if knobs["optimizer"] == "adam":
        return torch.optim.Adam(model.parameters(), lr=lr, weight_decay=wd)
    if knobs["optimizer"] == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=wd)
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.0, weight_decay=wd)


def lr_factor(schedule: str, epoch: int, epochs: int) -> float:
    """Multiplier of the base learning rate in ``epoch`` (0-based) of ``epochs``."""
    if schedule == "cosine":
        return 0.5 * (1 + math.cos(math.pi * epoch / max(1, epochs)))
    if schedule == "step":
        return 0.1 ** (epoch // max(1, math.ceil(epochs / 3)))
    return 1.0


def class_weights(y: torch.Tensor, n_classes: int, mode: str) -> torch.Tensor | None:
    """Per-class loss weights: ``balanced`` weighs each class by the inverse of its frequency."""
    if mode != "balanced":
        return None
    counts = torch.bincount(y, minlength=n_classes).clamp(min=1).float()
    return counts.sum() / (n_classes * counts)
