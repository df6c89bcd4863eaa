"""A small torch module for the compile-cache test, in a module of its own: torch.compile saves only a module class
defined at the top level of a module, and the test imports torch only when it runs (an engine started later in the
same process computes on the OpenMP threads of torch's first import)."""

from __future__ import annotations

import torch


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(-1.0, 1.0, 24).reshape(8, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ self.w).sum(-1)
