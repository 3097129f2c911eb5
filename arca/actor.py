"""The Actor: a softmax policy over the K translation candidates (LiRA paper 004, Eq. 6-8, App. D.1).

Each candidate k has the feature c_k = [s_k, e_k, p_k, sim_k] (critic scores in [1, 10] and the
Adaptor similarity, Eq. 6); the MLP ``Linear(4 -> 16) + ReLU + LayerNorm -> Linear(16 -> 1)``
gives a logit per candidate and pi(k | c_1:K) = softmax over the candidates of one source.
K may vary per source: candidates are padded to the batch's largest K and a boolean mask
[B, K] marks the real ones; padded slots get probability exactly 0.

``standardize=True`` (``arca.actor_features: standardized``, beyond the paper) feeds the MLP
each feature z-scored over the source's own candidates (:func:`standardize`): the Actor then
compares candidates instead of reading raw levels, so a sim gap of 0.05 is as visible as a
critic gap of 3 points, and a feature equal on every candidate (the neutral 5.5) reads 0.
"""

from __future__ import annotations

import torch
from torch import nn

FEATURES = 4  # [semantic, emotional, pragmatic, sim]
STD_FLOOR = (0.5, 0.5, 0.5, 0.01)
"""Smallest spread :func:`standardize` divides by, per feature (half a critic point, 0.01 of
cosine): differences below it stay small instead of being blown up to +-1."""


def standardize(features: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Each feature z-scored over a source's real candidates: (c_k - mean_k) / max(std_k, floor)
    ([B, K, F], mask [B, K] -> [B, K, F]; padded slots read 0; population std)."""
    m = (
        torch.ones(features.shape[:-1], dtype=features.dtype, device=features.device)
        if mask is None
        else mask.to(features.dtype)
    ).unsqueeze(-1)  # [B, K, 1]
    n = m.sum(-2, keepdim=True).clamp_min(1.0)  # [B, 1, 1]
    mean = (features * m).sum(-2, keepdim=True) / n
    var = ((features - mean) ** 2 * m).sum(-2, keepdim=True) / n
    floor = torch.tensor(STD_FLOOR, dtype=features.dtype, device=features.device)
    return (features - mean) / var.sqrt().clamp_min(floor) * m


class Actor(nn.Module):
    """Candidate selector pi_phi: features [B, K, 4] -> logits [B, K] (paper App. D.1); with
    ``standardize`` the features are z-scored per source first (:func:`standardize`)."""

    def __init__(self, hidden: int = 16, standardize: bool = False) -> None:
        super().__init__()
        self.standardize = standardize
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
        if self.standardize:
            features = standardize(features, mask)
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
