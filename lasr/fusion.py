"""The LaSR fusion head (LiRA paper 004, §4.2, Fig. 3a) and what LaSR trains end to end.

The paper fuses the English stream E_en (the backbone's sentence vector of the Actor-selected
translation) and the multilingual stream E_lr (Arca: g(x) → P_S → Adaptor) with a small
transformer into one embedding ẑ; it does not say how English keeps its quality. Our design
(DESIGN.md, "LaSR"):

- the transformer reads the stream tokens [E_en; E_lr] (projected to ``fusion_dim``, tagged with
  learned stream embeddings) and adds a residual Δ(x) to the multilingual stream
  (zero-initialised, so an untrained head leaves E_lr as Arca made it);
- a gate reads the *gate features* of the text — is it English, a query or a document, was it
  translated, and the critic scores and anchor similarity of the chosen candidate
  (:func:`gate_features`) — and gives a weight r(x) = exp(ρ(x)) > 0 for the multilingual half
  (a linear term plus a zero-initialised MLP; bias log ``gate_init``) — and r = 0 for English
  queries, so English retrieval is the backbone's, trained or not (measured: a learned gate
  for English queries cost 7 points of held-out En-En on xquad_minilm);
- ẑ = normalize([n(E_en); r(x) · n(E_lr + Δ(x))]) in R^{d_en + d_lr} (n = ℓ2-normalisation);
- the raw view (``lasr.raw_view``): a translation can be worse than the text itself for the
  backbone (measured: MiniLM on German/Spanish questions beats MiniLM on SmolLM2's translations
  of them), so the English half of a translated text is n(n(h(y*)) + w(x) · n(h(x))), the
  backbone on the chosen translation y* mixed with the backbone on the untranslated x, with a
  second gate w(x) = exp(ω(features)) (w = 1 at start). For English and untranslated texts
  h(x) = h(y*), so the mix is the identity there; the gates read the backbone's disagreement
  1 − cos(h(x), h(y*)) (0 where nothing was translated or the raw view is off). Measured
  (README): it lifts the demo, whose g has random weights and whose languages the backbone
  partly reads, and costs 18.5 points on xquad_minilm, where the gate learns on de/es (which
  MiniLM reads) and is applied to ru/zh/ar/hi (which it does not): off by default.

The cosine of two texts is (cos_en + r_q r_d cos_lr') / (N_q N_d) with N = sqrt(1 + r²): a score
fusion whose weight the head sets from what it knows about each text. Because the gate reads
features only, every English document gets the same r_d, so an English query (r_q = 0) ranks
English documents exactly as the backbone does; a foreign query whose translation is poor can
lean on the multilingual half. A disabled stream (Table 5 ablation "– multi-enc") contributes a
zero half, so the dimension never changes.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

GATE_FEATURES = 9
"""[is en, is doc, en query, translated, s/10, e/10, p/10, sim, disagree] (:func:`gate_features`)."""
EN_QUERY = 2  # index of the "English query" feature
MAX_LOG_GATE = 5.0  # r <= e^5: keeps the normalisation well conditioned


def gate_features(
    is_english: Tensor,
    translated: Tensor,
    chosen: Tensor,
    is_document: bool,
    disagree: Tensor | None = None,
) -> Tensor:
    """Gate features [B, 9] from flags [B], [B], the chosen candidate's c_k [B, 4] (Eq. 6:
    critic scores in [1, 10], sim; rows without a translation carry 5.5, 0) and the backbone's
    disagreement 1 − cos(h(x), h(y*)) [B] (default 0: untranslated, or no raw view)."""
    b = is_english.shape[0]
    disagree = torch.zeros(b) if disagree is None else disagree
    en = is_english.float().view(b, 1)
    doc = torch.full((b, 1), 1.0 if is_document else 0.0)
    return torch.cat(
        [
            en,
            doc,
            en * (1.0 - doc),
            translated.float().view(b, 1),
            chosen[:, :3].float() / 10.0,
            chosen[:, 3:4].float(),
            disagree.float().view(b, 1),
        ],
        dim=1,
    )


class FusionHead(nn.Module):
    """ẑ [B, d_en + d_lr] from E_en [B, d_en], E_lr [B, d_lr], gate features [B, 9] and the
    backbone's view of the untranslated text h(x) [B, d_en] (the raw view)."""

    def __init__(
        self,
        d_en: int,
        d_lr: int,
        fusion_dim: int = 256,
        layers: int = 2,
        heads: int = 4,
        dropout: float = 0.1,
        gate_init: float = 1.0,
        use_en: bool = True,
        use_lr: bool = True,
        raw_view: bool = False,
    ) -> None:
        super().__init__()
        if not (use_en or use_lr):
            raise ValueError("FusionHead needs at least one stream: set use_en or use_lr")
        if fusion_dim % heads:
            raise ValueError(f"fusion_dim {fusion_dim} must be divisible by heads {heads}")
        if gate_init <= 0:
            raise ValueError(f"gate_init must be > 0, got {gate_init}")
        self.d_en, self.d_lr = d_en, d_lr
        self.use_en, self.use_lr, self.raw_view = use_en, use_lr, raw_view
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
        self.delta = nn.Linear(fusion_dim, d_lr)
        nn.init.zeros_(self.delta.weight)
        nn.init.zeros_(self.delta.bias)
        self.gate_linear = nn.Linear(GATE_FEATURES, 1)
        self.gate_mlp = nn.Sequential(nn.Linear(GATE_FEATURES, 16), nn.Tanh(), nn.Linear(16, 1))
        self.raw_gate = nn.Linear(GATE_FEATURES, 1)  # ω: log-weight of h(x) in the English half
        with torch.no_grad():
            self.raw_gate.weight.zero_()
            self.raw_gate.bias.zero_()  # w = 1: translation and raw text count the same
            self.gate_linear.weight.zero_()
            self.gate_linear.weight[0, EN_QUERY] = -6.0
            self.gate_linear.bias.fill_(math.log(gate_init))
            self.gate_mlp[-1].weight.zero_()
            self.gate_mlp[-1].bias.zero_()

    @property
    def dim(self) -> int:
        """Output dimension d_en + d_lr."""
        return self.d_en + self.d_lr

    def weight(self, feats: Tensor) -> Tensor:
        """r(x) = exp(ρ(features)) [B, 1]: the weight of the multilingual half; exactly 0 for
        English queries, which therefore always rank English documents as the backbone does."""
        rho = self.gate_linear(feats) + self.gate_mlp(feats)
        return rho.clamp(max=MAX_LOG_GATE).exp() * (1.0 - feats[:, EN_QUERY : EN_QUERY + 1])

    def raw_weight(self, feats: Tensor) -> Tensor:
        """w(x) = exp(ω(features)) [B, 1]: the weight of h(x) next to h(y*) in the English half
        (0 with ``raw_view=False``)."""
        if not self.raw_view:
            return feats.new_zeros(feats.shape[0], 1)
        return self.raw_gate(feats).clamp(-MAX_LOG_GATE, MAX_LOG_GATE).exp()

    def regate(self, z: Tensor, feats: Tensor) -> Tensor:
        """ẑ [B, d_en + d_lr] of a cached (stop-grad) ẑ [B, d_en + d_lr] with the *current*
        gate r(feats) [B, 1] on its multilingual half: the halves stay as cached, the weight is
        live (with gradient). A DocQueue negative keeps the r it was pushed with otherwise, and
        the gate learns a score scale instead of a mix (README "The gate and the score scale")."""
        en = F.normalize(z[:, : self.d_en], dim=-1)
        lr = F.normalize(z[:, self.d_en :], dim=-1)
        return F.normalize(torch.cat([en, self.weight(feats.to(z.dtype)) * lr], dim=-1), dim=-1)

    def english(self, e_en: Tensor, e_raw: Tensor, feats: Tensor) -> Tensor:
        """The English half n(n(h(y*)) + w(x) · n(h(x))) [B, d_en] (= n(h(x)) for English)."""
        raw = self.raw_weight(feats) * F.normalize(e_raw, dim=-1)
        return F.normalize(F.normalize(e_en, dim=-1) + raw, dim=-1)

    def forward(
        self, e_en: Tensor, e_lr: Tensor, feats: Tensor | None = None, e_raw: Tensor | None = None
    ) -> Tensor:
        """ẑ [B, d_en + d_lr] (unit norm); ``feats`` [B, 9] default to zeros, ``e_raw`` [B, d_en]
        (h of the untranslated text) to ``e_en`` (nothing was translated)."""
        if feats is None:
            feats = e_en.new_zeros(e_en.shape[0], GATE_FEATURES)
        feats = feats.to(e_en.dtype)
        e_raw = e_en if e_raw is None else e_raw.to(e_en.dtype)
        en = self.english(e_en, e_raw, feats) if self.use_en else torch.zeros_like(e_en)
        if not self.use_lr:
            return F.normalize(torch.cat([en, torch.zeros_like(e_lr)], dim=-1), dim=-1)
        tokens = [self.proj_lr(e_lr).unsqueeze(1) + self.stream[1]]
        if self.use_en:
            tokens.insert(0, self.proj_en(en).unsqueeze(1) + self.stream[0])
        h = self.norm(self.encoder(torch.cat(tokens, dim=1)).mean(dim=1))  # [B, f]
        lr = self.weight(feats) * F.normalize(e_lr + self.delta(h), dim=-1)
        return F.normalize(torch.cat([en, lr], dim=-1), dim=-1)


class LaSRNet(nn.Module):
    """What LaSR trains: Arca's Adaptor (end to end, App. D.1) + the fusion head.

    ẑ = FusionHead(E_en, mean_s A(G(x)), gate features, h(x)) from the stored streams: E_en
    [B, d_en], P_S(g(x)) bins [B, S, d_g], gate features [B, 9] and h(x) [B, d_en]. The
    Adaptor is the very module of the Arca model (shared parameters), so saving the Arca
    folder saves what LaSR trained.
    """

    def __init__(self, head: FusionHead, adaptor: nn.Module) -> None:
        super().__init__()
        self.head = head
        self.adaptor = adaptor

    def forward(
        self, e_en: Tensor, g_bins: Tensor, feats: Tensor, e_raw: Tensor | None = None
    ) -> Tensor:
        """ẑ [B, d_en + d_lr]."""
        return self.head(e_en, self.adaptor.embed_g(g_bins), feats, e_raw)

    def forward_packed(self, packed: Tensor) -> Tensor:
        """Forward on rows packed by :func:`pack` (DocQueue re-scoring)."""
        return self(*unpack(packed, self.head.d_en, self.adaptor.d_g))

    def regate_packed(self, packed: Tensor) -> Tensor:
        """:meth:`FusionHead.regate` on rows [cached ẑ; gate features] (DocQueue entries)."""
        return self.head.regate(packed[:, : self.head.dim], packed[:, self.head.dim :])


def pack(e_en: Tensor, g_bins: Tensor, feats: Tensor, e_raw: Tensor) -> Tensor:
    """[B, d_en], [B, S, d_g], [B, 9], [B, d_en] -> one row per text (queue features)."""
    return torch.cat([e_en, e_raw, g_bins.flatten(1), feats], dim=-1)


def unpack(packed: Tensor, d_en: int, d_g: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Inverse of :func:`pack`: (e_en, g_bins, feats, e_raw)."""
    e_en, e_raw, rest = packed[:, :d_en], packed[:, d_en : 2 * d_en], packed[:, 2 * d_en :]
    g, feats = rest[:, :-GATE_FEATURES], rest[:, -GATE_FEATURES:]
    return e_en, g.reshape(len(packed), -1, d_g), feats, e_raw
