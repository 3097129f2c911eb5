"""The Actor: a softmax policy over the K translation candidates (LiRA paper 004, Eq. 6-8, App. D.1).

Each candidate k has the feature c_k = [s_k, e_k, p_k, sim_k] (critic scores in [1, 10] and the
Adaptor similarity, Eq. 6); the MLP ``Linear(4 -> 16) + ReLU + LayerNorm -> Linear(16 -> 1)``
gives a logit per candidate and pi(k | c_1:K) = softmax over the candidates of one source.
K may vary per source: candidates are padded to the batch's largest K and a boolean mask
[B, K] marks the real ones; padded slots get probability exactly 0.
"""

from __future__ import annotations

import torch
from torch import nn

FEATURES = 4  # [semantic, emotional, pragmatic, sim]


class Actor(nn.Module):
    """Candidate selector pi_phi: features [B, K, 4] -> logits [B, K] (paper App. D.1)."""

    def __init__(self, hidden: int = 16) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(FEATURES, hidden), nn.ReLU(), nn.LayerNorm(hidden), nn.Linear(hidden, 1)
        )

    def forward(self, features: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Masked logits: features [B, K, 4], mask [B, K] (True = real candidate) -> [B, K]."""
        if features.shape[-1] != FEATURES:
            raise ValueError(
                f"Actor features must end in {FEATURES} (semantic, emotional, pragmatic, sim), "
                f"got shape {tuple(features.shape)}"
            )
        logits = self.net(features).squeeze(-1)  # [B, K]
        if mask is not None:
            mask = mask.to(torch.bool)
            if not bool(mask.any(dim=-1).all()):
                bad = (~mask.any(dim=-1)).nonzero().flatten().tolist()
                raise ValueError(
                    f"rows {bad} have no candidate; drop sources without candidates before "
                    "calling the Actor"
                )
            logits = logits.masked_fill(~mask, torch.finfo(logits.dtype).min)
        return logits

    def policy(
        self, features: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.distributions.Categorical:
        """pi_phi(. | c_1:K) as a Categorical over candidates (batch shape [B])."""
        return torch.distributions.Categorical(logits=self.forward(features, mask))

    @torch.no_grad()
    def select(self, features: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Arg-max candidate (evaluation): [B, K, 4] -> [B] (or [K, 4] -> scalar index)."""
        single = features.dim() == 2
        if single:
            features = features.unsqueeze(0)
            mask = None if mask is None else mask.unsqueeze(0)
        idx = self.forward(features, mask).argmax(dim=-1)  # [B]
        return idx[0] if single else idx
