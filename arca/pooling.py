"""Masked temporal pooling P_S (LiRA paper 004, Eq. 3; App. D.1 "adaptively average-pooled").

A token stream [B, L, d] with its attention mask [B, L] becomes S bins [B, S, d]. Each row is
first reduced to its n valid tokens (in order; padding may sit on the left or the right, or
anywhere), then pooled exactly like ``torch.nn.functional.adaptive_avg_pool1d`` on those n
tokens: bin i averages valid tokens ``floor(i*n/S) <= t < ceil((i+1)*n/S)``.

Consequences (the rule for short rows):
- padding never enters a bin, so the output does not depend on how much padding a row has;
- a row with fewer valid tokens than bins (0 < n < S) repeats tokens: each bin still holds
  at least one token, e.g. n=2, S=4 gives bins [t0, t0, t1, t1];
- a row with no valid token gives all-zero bins (callers flag such rows as empty).
"""

from __future__ import annotations

import torch


def temporal_pool(tokens: torch.Tensor, mask: torch.Tensor, bins: int) -> torch.Tensor:
    """Masked adaptive average pooling of a token stream to ``bins`` slots (Eq. 3)."""
    if tokens.dim() != 3:
        raise ValueError(f"tokens must be [B, L, d], got shape {tuple(tokens.shape)}")
    if mask.shape != tokens.shape[:2]:
        raise ValueError(
            f"mask shape {tuple(mask.shape)} does not match tokens [B, L] = {tuple(tokens.shape[:2])}"
        )
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    valid = mask.to(torch.bool)  # [B, L]
    n = valid.sum(dim=1, keepdim=True)  # [B, 1]
    pos = torch.cumsum(valid.long(), dim=1) - 1  # [B, L] index among valid tokens
    i = torch.arange(bins, device=tokens.device).view(1, bins, 1)  # [1, S, 1]
    start = torch.div(i * n.unsqueeze(1), bins, rounding_mode="floor")  # [B, S, 1]
    end = -torch.div(-(i + 1) * n.unsqueeze(1), bins, rounding_mode="floor")  # ceil, [B, S, 1]
    p = pos.unsqueeze(1)  # [B, 1, L]
    member = (p >= start) & (p < end) & valid.unsqueeze(1)  # [B, S, L]
    weights = member.to(tokens.dtype)
    weights = weights / weights.sum(dim=2, keepdim=True).clamp_min(1.0)
    return torch.bmm(weights, tokens)  # [B, S, d]
