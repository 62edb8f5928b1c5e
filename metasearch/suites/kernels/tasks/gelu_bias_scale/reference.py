import math

import torch
import torch.nn as nn

batch = 128
dim = 256


class Model(nn.Module):
    """y = gelu(x + bias) * scale (tanh approximation), computed row by row in separate steps."""

    def __init__(self, dim: int = dim):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))
        self.scale = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = []
        c = math.sqrt(2.0 / math.pi)
        for row in x:
            h = row + self.bias
            inner = c * (h + 0.044715 * h * h * h)
            g = 0.5 * h * (1.0 + torch.tanh(inner))
            rows.append(g * self.scale)
        return torch.stack(rows)


def get_inputs():
    return [torch.randn(batch, dim)]


def get_init_inputs():
    return [dim]
