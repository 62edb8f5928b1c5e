import torch
import torch.nn as nn

batch = 512
dim = 512


class Model(nn.Module):
    """Elementwise sum of two tensors: already a single optimal library call (a control task)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y


def get_inputs():
    return [torch.randn(batch, dim), torch.randn(batch, dim)]


def get_init_inputs():
    return []
