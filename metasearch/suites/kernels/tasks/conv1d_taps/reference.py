import torch
import torch.nn as nn

batch = 8
channels = 16
length = 512
kernel = 7


class Model(nn.Module):
    """A depthwise 1-D convolution ('valid' padding) as a loop over samples, channels and kernel taps."""

    def __init__(self, channels: int = channels, kernel: int = kernel):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(channels, kernel))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = self.weight.shape[1]
        out_len = x.shape[2] - k + 1
        out = torch.zeros(x.shape[0], x.shape[1], out_len, dtype=x.dtype)
        for b in range(x.shape[0]):
            for c in range(x.shape[1]):
                for t in range(k):
                    out[b, c, :] += self.weight[c, t] * x[b, c, t : t + out_len]
        return out


def get_inputs():
    return [torch.randn(batch, channels, length)]


def get_init_inputs():
    return [channels, kernel]
