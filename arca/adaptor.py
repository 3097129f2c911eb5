"""The Adaptor A that maps multilingual features into the backbone's space (paper 004, App. D.1).

App. D.1: "A two-layer MLP maps R^{d_ML} -> R^512 -> R^{d_LLM}, aligning multilingual features
to the LLM embedding space": ``A = Linear(d_g -> hidden) + ReLU + LayerNorm -> Linear(hidden ->
d_h)`` on g's path only (``shared=False``, the default ``arca.objective: d1``); the English side
is a fixed target of h and never passes through A.

``shared=True`` keeps the literal reading of Eq. 4 (``arca.objective: shared``): one MLP
``d_h -> hidden -> d_h`` applied to both token paths, g's side first projected by its own
``Linear(d_g -> d_h)`` when d_g != d_h. Trained on both sides, Eq. 5 is then minimised by a
constant output (measured: matched and shuffled pairs reach the same cosine).

``residual=True`` (``arca.adaptor_init: identity``, beyond the paper) makes it A(x) = P(x) +
MLP(x) with the MLP's last layer zero-initialised and P the identity when d_g = d_h (else a
linear projection), so E_lr starts as g itself: where g is the stronger encoder, Arca then
departs from g's geometry only as far as the anchor pays for it.

``linear=True`` (``arca.objective: distill`` with ``distill_solver: ridge``, beyond the paper)
makes A one ``Linear(d_g -> d_h)``, fitted in closed form by :func:`ridge_fit`.

Sentence vectors are the mean over the S bins: E = mean_s A(P_S(tokens))_s.
"""

from __future__ import annotations

import torch
from torch import nn


class Adaptor(nn.Module):
    """Two-layer MLP from g's pooled bins to h's space (App. D.1); optionally shared (Eq. 4)."""

    def __init__(
        self,
        d_g: int,
        d_h: int,
        hidden: int = 512,
        shared: bool = False,
        residual: bool = False,
        linear: bool = False,
    ) -> None:
        super().__init__()
        if min(d_g, d_h, hidden) < 1:
            raise ValueError(f"Adaptor dims must be >= 1, got d_g={d_g} d_h={d_h} hidden={hidden}")
        self.d_g, self.d_h, self.hidden, self.shared = d_g, d_h, hidden, shared
        d_in = d_h if shared else d_g
        self.proj_g: nn.Module = nn.Linear(d_g, d_h) if shared and d_g != d_h else nn.Identity()
        self.mlp: nn.Module = (
            nn.Linear(d_in, d_h)
            if linear
            else nn.Sequential(
                nn.Linear(d_in, hidden), nn.ReLU(), nn.LayerNorm(hidden), nn.Linear(hidden, d_h)
            )
        )
        if linear and (residual or shared):
            raise ValueError("a linear Adaptor is neither residual nor shared")
        if residual and shared:
            raise ValueError("a residual Adaptor is for the D.1 reading (shared=False)")
        self.residual = residual
        self.skip: nn.Module | None = None
        if residual:
            self.skip = nn.Identity() if d_g == d_h else nn.Linear(d_g, d_h, bias=False)
            nn.init.zeros_(self.mlp[-1].weight)
            nn.init.zeros_(self.mlp[-1].bias)

    @property
    def dim(self) -> int:
        """Output dimension d (= d_h)."""
        return self.d_h

    def bins_g(self, pooled: torch.Tensor) -> torch.Tensor:
        """A(G(x)) for the multilingual path: [B, S, d_g] -> [B, S, d_h]."""
        out = self.mlp(self.proj_g(pooled))
        return out if self.skip is None else out + self.skip(pooled)

    def bins_h(self, pooled: torch.Tensor) -> torch.Tensor:
        """A(H(y)) for the English path of the shared reading: [B, S, d_h] -> [B, S, d_h]."""
        if not self.shared:
            raise RuntimeError("the D.1 Adaptor maps g only; the English side is a fixed target")
        return self.mlp(pooled)

    def embed_g(self, pooled: torch.Tensor) -> torch.Tensor:
        """E_lr = mean over bins of A(G(x)): [B, S, d_g] -> [B, d_h]."""
        return self.bins_g(pooled).mean(dim=1)

    def embed_h(self, pooled: torch.Tensor) -> torch.Tensor:
        """E_en = mean over bins of A(H(y)) (shared reading only): [B, S, d_h] -> [B, d_h]."""
        return self.bins_h(pooled).mean(dim=1)


def ridge_fit(
    g: torch.Tensor, h: torch.Tensor, lam: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Closed-form ridge map h ~ g W + b: W = (Gc'Gc + lam I)^-1 Gc'Hc on centred G, H (the bias
    is not penalised), b = mean(h) - mean(g) W. g [N, d_g], h [N, d_h] -> W [d_g, d_h], b [d_h]."""
    g, h = g.double(), h.double()
    mg, mh = g.mean(0), h.mean(0)
    gc, hc = g - mg, h - mh
    eye = torch.eye(g.shape[1], dtype=g.dtype, device=g.device)
    w = torch.linalg.solve(gc.T @ gc + lam * eye, gc.T @ hc)
    return w.float(), (mh - mg @ w).float()
