"""The model: a multilayer perceptron whose shape comes from the knobs."""

from __future__ import annotations

import torch
from torch import nn

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "gelu": nn.GELU}


def mlp(n_in: int, n_out: int, knobs: dict) -> nn.Module:
    layers: list[nn.Module] = []
    width = n_in
    for _ in range(int(knobs["depth"])):
        layers += [nn.Linear(width, int(knobs["hidden"])), ACTIVATIONS[knobs["activation"]]()]
        if knobs["dropout"] > 0:
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
    if schedule == "cosine":
        import math

        return 0.5 * (1 + math.cos(math.pi * epoch / max(1, epochs)))
    if schedule == "step":
        return 0.1 ** (epoch // max(1, epochs // 3))
    return 1.0
