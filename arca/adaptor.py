"""The shared Adaptor A that maps both token paths into one space (LiRA paper 004, Eq. 4, App. D.1).

``A = Linear(d_in -> hidden) + ReLU + LayerNorm -> Linear(hidden -> d_out)`` with d_in = d_out =
d_h (the backbone / LLM dimension, "aligning multilingual features to the LLM embedding space").
When d_g != d_h the multilingual side first passes through its own input projection
``Linear(d_g -> d_h)``; the English side enters A directly (its projection is the identity).
Sentence vectors are the mean over the S bins: E = mean_s A(P_S(tokens))_s.
"""

from __future__ import annotations

import torch
from torch import nn


class Adaptor(nn.Module):
    """Shared two-layer MLP with a per-side input projection (paper Eq. 4)."""

    def __init__(self, d_g: int, d_h: int, hidden: int = 512) -> None:
        super().__init__()
        if min(d_g, d_h, hidden) < 1:
            raise ValueError(f"Adaptor dims must be >= 1, got d_g={d_g} d_h={d_h} hidden={hidden}")
        self.d_g, self.d_h, self.hidden = d_g, d_h, hidden
        self.proj_g: nn.Module = nn.Linear(d_g, d_h) if d_g != d_h else nn.Identity()
        self.proj_h: nn.Module = nn.Identity()
        self.mlp = nn.Sequential(
            nn.Linear(d_h, hidden), nn.ReLU(), nn.LayerNorm(hidden), nn.Linear(hidden, d_h)
        )

    @property
    def dim(self) -> int:
        """Output dimension d (= d_h)."""
        return self.d_h

    def bins_g(self, pooled: torch.Tensor) -> torch.Tensor:
        """A(G(x)) for the multilingual path: [B, S, d_g] -> [B, S, d]."""
        return self.mlp(self.proj_g(pooled))

    def bins_h(self, pooled: torch.Tensor) -> torch.Tensor:
        """A(H(y)) for the English path: [B, S, d_h] -> [B, S, d]."""
        return self.mlp(self.proj_h(pooled))

    def embed_g(self, pooled: torch.Tensor) -> torch.Tensor:
        """E_lr = mean over bins of A(G(x)): [B, S, d_g] -> [B, d]."""
        return self.bins_g(pooled).mean(dim=1)

    def embed_h(self, pooled: torch.Tensor) -> torch.Tensor:
        """E_en = mean over bins of A(H(y)): [B, S, d_h] -> [B, d]."""
        return self.bins_h(pooled).mean(dim=1)
