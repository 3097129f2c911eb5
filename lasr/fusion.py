"""The LaSR fusion head (LiRA paper §4.2, Fig. 3a).

The English stream E_en (the backbone's sentence vector of the Actor-selected translation) and
the multilingual stream E_lr (Arca: g(x) → temporal pooling → Adaptor) are each linearly
projected to ``fusion_dim``, tagged with a learned stream embedding, stacked as a token
sequence (2 tokens for pooled vectors, 2·S tokens for S-bin streams), passed through a small
``nn.TransformerEncoder``, mean-pooled, projected back to the backbone's dimension and
ℓ2-normalised: ẑ = z/‖z‖.

Decision (not fixed by the paper): with ``residual=True`` (default) the head outputs
ẑ = normalize(E_en + W·pool(T(·))) with W initialised to zero, so an untrained head equals the
Arca-only model (backbone embedding of the selected translation) and training starts from it.
Either stream may be switched off (Table 5 ablations "– translations" / "– multi-enc").
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class FusionHead(nn.Module):
    """Fuse E_en [B, d_en] or [B, S, d_en] and E_lr [B, d_lr] or [B, S', d_lr] into ẑ [B, d_en]."""

    def __init__(
        self,
        d_en: int,
        d_lr: int,
        fusion_dim: int = 256,
        layers: int = 2,
        heads: int = 4,
        dropout: float = 0.1,
        residual: bool = True,
        use_en: bool = True,
        use_lr: bool = True,
    ) -> None:
        super().__init__()
        if not (use_en or use_lr):
            raise ValueError("FusionHead needs at least one stream: set use_en or use_lr")
        if fusion_dim % heads:
            raise ValueError(f"fusion_dim {fusion_dim} must be divisible by heads {heads}")
        self.d_en, self.d_lr, self.residual = d_en, d_lr, residual
        self.use_en, self.use_lr = use_en, use_lr
        self.proj_en = nn.Linear(d_en, fusion_dim)
        self.proj_lr = nn.Linear(d_lr, fusion_dim)
        self.stream = nn.Parameter(torch.zeros(2, fusion_dim))  # stream-type embeddings
        nn.init.normal_(self.stream, std=0.02)
        layer = nn.TransformerEncoderLayer(
            fusion_dim,
            heads,
            dim_feedforward=2 * fusion_dim,
            dropout=dropout,
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(fusion_dim)
        self.out = nn.Linear(fusion_dim, d_en)
        if residual:
            nn.init.zeros_(self.out.weight)
            nn.init.zeros_(self.out.bias)

    def forward(self, e_en: Tensor, e_lr: Tensor) -> Tensor:
        """ẑ [B, d_en] (unit norm) from the two streams (a disabled stream is ignored)."""
        e_en = e_en.unsqueeze(1) if e_en.dim() == 2 else e_en  # [B, S, d_en]
        e_lr = e_lr.unsqueeze(1) if e_lr.dim() == 2 else e_lr  # [B, S', d_lr]
        tokens = []
        if self.use_en:
            tokens.append(self.proj_en(e_en) + self.stream[0])
        if self.use_lr:
            tokens.append(self.proj_lr(e_lr) + self.stream[1])
        h = self.encoder(torch.cat(tokens, dim=1))  # [B, T, f]
        z = self.out(self.norm(h.mean(dim=1)))  # [B, d_en]
        if self.residual:
            base = e_en.mean(dim=1) if self.use_en else 0.0
            z = z + base
        return F.normalize(z, dim=-1)

    def fuse_packed(self, feats: Tensor) -> Tensor:
        """Forward on features packed by :func:`pack` ([B, d_en + d_lr], for queue re-scoring)."""
        e_en, e_lr = unpack(feats, self.d_en)
        return self(e_en, e_lr)


def pack(e_en: Tensor, e_lr: Tensor) -> Tensor:
    """Concatenate pooled streams [B, d_en], [B, d_lr] -> [B, d_en + d_lr] (queue features)."""
    return torch.cat([e_en, e_lr], dim=-1)


def unpack(feats: Tensor, d_en: int) -> tuple[Tensor, Tensor]:
    """Inverse of :func:`pack`."""
    return feats[..., :d_en], feats[..., d_en:]
