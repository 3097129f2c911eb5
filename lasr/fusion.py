"""The LaSR fusion head (LiRA paper 004, §4.2, Fig. 3a) and what LaSR trains end to end.

The paper fuses the English stream E_en (the backbone's sentence vector of the Actor-selected
translation) and the multilingual stream E_lr (Arca: g(x) → P_S → Adaptor) with a small
transformer into one embedding ẑ; it does not say how English keeps its quality. Our design
(docs/design.md, "LaSR"):

- the transformer reads the stream tokens [E_en; E_lr] (projected to ``fusion_dim``, tagged with
  learned stream embeddings) and adds a residual Δ(x) to the multilingual stream
  (zero-initialised, so an untrained head leaves E_lr as Arca made it);
- per-text block weights read the *gate features* of the text — is it English, a query or a
  document, was it translated, the critic scores and anchor similarity of the chosen candidate
  (:func:`gate_features`): w_b(x) = exp(T[type(x), b] + MLP_b(features)) for each block b of
  ẑ, with a learned table T per text type (foreign / English × query / document) and a
  zero-initialised MLP for the per-text part. A table entry can be *off* (an exact 0 that
  training keeps), which is how the paper reading gives English queries r = 0;
- the blocks: n(E_en) (English half), n(E_lr + Δ(x)) (multilingual half) and, with
  ``lasr.raw_g`` (beyond the paper), n(ḡ(x)), g's own sentence vector (the mean of its pooled
  bins), so documents and queries both keep g's geometry where g is the stronger encoder, and
  with ``lasr.translated_g`` (beyond the paper) n(ḡ(y*)), the same on the chosen English text
  (= n(ḡ(x)) for an untranslated text): translate-test with g, so that a fused model can include
  the plain ensemble g(x) + g(y*), and with ``lasr.raw_h`` (beyond the paper) n(h(x)), the
  backbone on the untranslated text (= the English half of an untranslated text): with a
  multilingual backbone h alone is the baseline LiRA must beat, and the fusion can include it;
- ẑ = normalize([w_en n(E_en); w_lr n(E_lr + Δ); w_g n(ḡ(x)); w_gt n(ḡ(y*)); w_hx n(h(x))])
  (n = ℓ2-normalisation);
- with ``lasr.fusion_init: validation`` the table starts at the best *fixed* score fusion of
  the blocks on the validation split (:mod:`lasr.fixed_fusion`): the cosine of a query and an
  English document is Σ_b w_b(q) w_b(d) cos_b / (N_q N_d), N = ‖w‖, and every English document
  has the same features, so at step 0 LiRA ranks exactly as Σ_b λ_b cos_b with the fitted λ;
  ``paper``: en 1, multilingual ``gate_init``, English queries' multilingual block off;
- the raw view (``lasr.raw_view``): a translation can be worse than the text itself for the
  backbone, so the English half of a translated text is n(n(h(y*)) + w(x) · n(h(x))), with a
  second gate w(x) = exp(ω(features)) (w = 1 at start); = n(h(x)) for English and
  untranslated texts. Measured (docs/studies.md "The raw view"): it costs 18.5 points on
  xquad_minilm: off by default.

A disabled stream (Table 5 ablation "– multi-enc") is an off block, so the dimension never
changes. ``logit_scale`` is a learned inverse temperature of LaSR's ranking loss (so that the
block weights need not double as one). :class:`HeadEMA` is the exponential moving average of
the trained net that LaSR evaluates and saves.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

GATE_FEATURES = 9
"""[is en, is doc, en query, translated, s/10, e/10, p/10, sim, disagree] (:func:`gate_features`)."""
IS_EN, IS_DOC, EN_QUERY = 0, 1, 2  # indices of the "English", "document", "English query" features
MAX_LOG_GATE = 5.0  # e^-5 <= w <= e^5 for a block that is on: keeps ẑ well conditioned
BLOCKS = ("en", "lr", "g", "gt", "hx")
"""The blocks of ẑ: the English half, the multilingual half, g's own vector (``raw_g``), g on
the chosen English text (``translated_g``), h on the untranslated text (``raw_h``)."""
TEXT_TYPES = ("foreign query", "English query", "foreign document", "English document")
"""Row order of the block-weight table: type = is_en + 2 · is_doc (:func:`text_type`)."""


def gate_features(
    is_english: Tensor,
    translated: Tensor,
    chosen: Tensor,
    is_document: bool,
    disagree: Tensor | None = None,
) -> Tensor:
    """Gate features [B, 9] from flags [B], [B], the chosen candidate's c_k [B, 4] (Eq. 6:
    critic scores in [1, 10], sim; rows without a translation carry 5.5, 0) and the backbone's
    disagreement 1 − cos(h(x), h(y*)) [B] (default 0: untranslated, or h(x) not computed:
    neither ``raw_view`` nor ``raw_h``)."""
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


def text_type(feats: Tensor) -> Tensor:
    """Row of :data:`TEXT_TYPES` [B] of gate features [B, 9]: is_en + 2 · is_doc."""
    return (feats[:, IS_EN] > 0.5).long() + 2 * (feats[:, IS_DOC] > 0.5).long()


def paper_weights(
    gate_init: float = 1.0, raw_g: bool = False, translated_g: bool = False, raw_h: bool = False
) -> Tensor:
    """The paper reading's block weights [4, 5] (rows :data:`TEXT_TYPES`, columns
    :data:`BLOCKS`): the English half 1, the multilingual half ``gate_init`` except for English
    queries (0: English retrieval is the backbone's), g's own vector with ``raw_g``, g on the
    translation with ``translated_g`` and h on the untranslated text with ``raw_h`` like the
    multilingual half (else 0; English queries 0 too: their English half already is h(x))."""
    gi = gate_init
    on = (True, True, raw_g, translated_g, raw_h)
    w = torch.tensor([[1.0] + [gi if b else 0.0 for b in on[1:]]]).repeat(len(TEXT_TYPES), 1)
    w[1, 1:] = 0.0  # English queries
    return w


def _gate_feats(e_en: Tensor, feats: Tensor | None) -> Tensor:
    """``feats``, or zeros [B, 9] where none are given (nothing known about the texts)."""
    return e_en.new_zeros(e_en.shape[0], GATE_FEATURES) if feats is None else feats


class FusionHead(nn.Module):
    """ẑ [B, d_en + d_lr + d_g + d_gt + d_hx] from E_en [B, d_en], E_lr [B, d_lr], gate
    features [B, 9], the backbone's view of the untranslated text h(x) [B, d_en] (the raw view,
    and the block ``hx`` with ``d_hx = d_en``), g's own vector ḡ(x) [B, d_g] (``raw_g``) and g
    on the chosen English text ḡ(y*) [B, d_gt] (``translated_g``)."""

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
        d_g: int = 0,
        d_gt: int = 0,
        d_hx: int = 0,
    ) -> None:
        super().__init__()
        if not (use_en or use_lr):
            raise ValueError("FusionHead needs at least one stream: set use_en or use_lr")
        if fusion_dim % heads:
            raise ValueError(f"fusion_dim {fusion_dim} must be divisible by heads {heads}")
        if gate_init <= 0:
            raise ValueError(f"gate_init must be > 0, got {gate_init}")
        if d_hx not in (0, d_en):
            raise ValueError(f"d_hx is h(x)'s width: 0 (no hx block) or d_en={d_en}, got {d_hx}")
        self.d_en, self.d_lr, self.d_g = d_en, d_lr, (d_g if use_lr else 0)
        self.d_gt, self.d_hx = (d_gt if use_lr else 0), d_hx
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
        self.type_logw = nn.Parameter(torch.zeros(len(TEXT_TYPES), len(BLOCKS)))
        """log w per (text type, block): the learned part of the block weights."""
        self.register_buffer("type_on", torch.ones(len(TEXT_TYPES), len(BLOCKS)))
        self.gate_mlp = nn.Sequential(
            nn.Linear(GATE_FEATURES, 16), nn.Tanh(), nn.Linear(16, len(BLOCKS))
        )
        self.raw_gate = nn.Linear(GATE_FEATURES, 1)  # ω: log-weight of h(x) in the English half
        self.logit_scale = nn.Parameter(torch.zeros(()))
        """log of the learned inverse temperature of LaSR's ranking loss (unused by ẑ)."""
        with torch.no_grad():
            self.raw_gate.weight.zero_()
            self.raw_gate.bias.zero_()  # w = 1: translation and raw text count the same
            self.gate_mlp[-1].weight.zero_()
            self.gate_mlp[-1].bias.zero_()
        self.set_weights(paper_weights(gate_init, *self.blocks_on[2:]))

    @property
    def dim(self) -> int:
        """Output dimension d_en + d_lr + d_g + d_gt + d_hx."""
        return sum(self.splits)

    def loss_log_scale(self) -> Tensor:
        """:attr:`logit_scale` clamped to ±MAX_LOG_GATE (``lasr.learn_temperature``)."""
        return self.logit_scale.clamp(-MAX_LOG_GATE, MAX_LOG_GATE)

    def idle_parameters(self) -> set[str]:
        """Names of the parameters ẑ never reads with this head's switches: the raw view's gate
        without ``raw_view``, the English token's projection without both streams, the fusion
        transformer and Δ without the multilingual stream, and ``logit_scale`` (the loss's,
        not ẑ's). They must not train: DDP requires a gradient for every trainable one."""
        idle = {"logit_scale"}
        if not (self.raw_view and self.use_en):
            idle |= {"raw_gate.weight", "raw_gate.bias"}
        if not self.use_lr:
            idle |= {"stream"}
            for name in ("proj_lr", "encoder", "norm", "delta"):
                idle |= {f"{name}.{n}" for n, _ in getattr(self, name).named_parameters()}
        if not (self.use_lr and self.use_en):
            idle |= {f"proj_en.{n}" for n, _ in self.proj_en.named_parameters()}
        return idle

    @property
    def splits(self) -> tuple[int, ...]:
        """Widths of the blocks of ẑ, in :data:`BLOCKS` order."""
        return self.d_en, self.d_lr, self.d_g, self.d_gt, self.d_hx

    @property
    def blocks_on(self) -> tuple[bool, ...]:
        """Which blocks of :data:`BLOCKS` this head has (a disabled stream or block is off)."""
        return self.use_en, self.use_lr, self.d_g > 0, self.d_gt > 0, self.d_hx > 0

    @torch.no_grad()
    def set_weights(self, table: Tensor) -> None:
        """Set the block weights [4, 5] (rows :data:`TEXT_TYPES`, columns :data:`BLOCKS`,
        >= 0): 0 turns a block off for that type (exactly, for good); the per-text MLP is
        reset to zero, so every text of a type gets its row. A disabled stream stays off."""
        table = torch.as_tensor(table, dtype=torch.float32).clone()
        if table.shape != self.type_logw.shape or bool((table < 0).any()):
            shape = tuple(self.type_logw.shape)
            raise ValueError(f"block weights must be >= 0 with shape {shape}, got {table}")
        table *= torch.tensor(self.blocks_on, dtype=torch.float32)
        self.type_on.copy_((table > 0).float())
        self.type_logw.copy_(table.clamp(min=math.exp(-MAX_LOG_GATE)).log())
        self.gate_mlp[-1].weight.zero_()
        self.gate_mlp[-1].bias.zero_()

    def table(self) -> Tensor:
        """The per-type block weights [4, 5] the head uses now (before the per-text MLP)."""
        return self.type_logw.detach().clamp(-MAX_LOG_GATE, MAX_LOG_GATE).exp() * self.type_on

    def weights(self, feats: Tensor) -> Tensor:
        """w_b(x) [B, 5]: exp(T[type(x), b] + MLP_b(features)), exactly 0 for an off block."""
        t = text_type(feats)
        rho = self.type_logw[t] + self.gate_mlp(feats)
        return rho.clamp(-MAX_LOG_GATE, MAX_LOG_GATE).exp() * self.type_on[t]

    def weight(self, feats: Tensor) -> Tensor:
        """w_lr(x) [B, 1]: the weight of the multilingual half."""
        return self.weights(feats)[:, 1:2]

    def raw_weight(self, feats: Tensor) -> Tensor:
        """w(x) = exp(ω(features)) [B, 1]: the weight of h(x) next to h(y*) in the English half
        (0 with ``raw_view=False``)."""
        if not self.raw_view:
            return feats.new_zeros(feats.shape[0], 1)
        return self.raw_gate(feats).clamp(-MAX_LOG_GATE, MAX_LOG_GATE).exp()

    def combine(self, blocks: list[Tensor], feats: Tensor) -> Tensor:
        """ẑ = normalize([w_b(x) · block_b]) of unit blocks (:meth:`blocks`) [B, dim]."""
        w = self.weights(feats.to(blocks[0].dtype))
        return F.normalize(
            torch.cat([w[:, i : i + 1] * b for i, b in enumerate(blocks)], -1), dim=-1
        )

    def regate(self, z: Tensor, feats: Tensor) -> Tensor:
        """ẑ [B, dim] of a cached (stop-grad) ẑ [B, dim] with the *current* block weights
        w(feats): the blocks stay as cached, the weights are live (with gradient). A DocQueue
        negative keeps the weights it was pushed with otherwise, and the gate learns a score
        scale instead of a mix (docs/studies.md "The gate and the score scale")."""
        parts = torch.split(z, list(self.splits), dim=-1)
        return self.combine([F.normalize(p, dim=-1) for p in parts], feats)

    def english(self, e_en: Tensor, e_raw: Tensor, feats: Tensor) -> Tensor:
        """The English half n(n(h(y*)) + w(x) · n(h(x))) [B, d_en] (= n(h(x)) for English)."""
        raw = self.raw_weight(feats) * F.normalize(e_raw, dim=-1)
        return F.normalize(F.normalize(e_en, dim=-1) + raw, dim=-1)

    def blocks(
        self,
        e_en: Tensor,
        e_lr: Tensor,
        feats: Tensor | None = None,
        e_raw: Tensor | None = None,
        g_vec: Tensor | None = None,
        g_tr: Tensor | None = None,
    ) -> list[Tensor]:
        """The unit blocks [n(E_en); n(E_lr + Δ); n(ḡ(x)); n(ḡ(y*)); n(h(x))] of :data:`BLOCKS`
        (an off block is 0, or [B, 0] for g, gt and hx; ``g_tr`` defaults to ``g_vec`` and
        ``e_raw`` to ``e_en``: nothing was translated)."""
        feats = _gate_feats(e_en, feats).to(e_en.dtype)
        e_raw = e_en if e_raw is None else e_raw.to(e_en.dtype)
        en = self.english(e_en, e_raw, feats) if self.use_en else torch.zeros_like(e_en)
        g = self._g_block(g_vec, self.d_g, "g's own block (raw_g): pass g_vec", e_en)
        g_tr = g_vec if g_tr is None else g_tr
        gt = self._g_block(g_tr, self.d_gt, "g's translation block (translated_g): pass g_tr", e_en)
        # the English half x would have untranslated: n(h(x)), bit-identical to ``en`` where
        # nothing was translated (e_raw = e_en), so that the two tie exactly for English texts
        hx = self.english(e_raw, e_raw, feats) if self.d_hx else e_en.new_zeros(len(e_en), 0)
        if not self.use_lr:
            return [en, torch.zeros_like(e_lr), g, gt, hx]
        tokens = [self.proj_lr(e_lr).unsqueeze(1) + self.stream[1]]
        if self.use_en:
            tokens.insert(0, self.proj_en(en).unsqueeze(1) + self.stream[0])
        h = self.norm(self.encoder(torch.cat(tokens, dim=1)).mean(dim=1))  # [B, f]
        return [en, F.normalize(e_lr + self.delta(h), dim=-1), g, gt, hx]

    @staticmethod
    def _g_block(vec: Tensor | None, width: int, missing: str, like: Tensor) -> Tensor:
        """n(``vec``) [B, width] of a g block that is on (zeros [B, 0] for one that is off)."""
        if not width:
            return like.new_zeros(like.shape[0], 0)
        if vec is None:
            raise ValueError(f"this head has {missing}")
        return F.normalize(vec.to(like.dtype), dim=-1)

    def forward(
        self,
        e_en: Tensor,
        e_lr: Tensor,
        feats: Tensor | None = None,
        e_raw: Tensor | None = None,
        g_vec: Tensor | None = None,
        g_tr: Tensor | None = None,
    ) -> Tensor:
        """ẑ [B, dim] (unit norm); ``feats`` [B, 9] default to zeros, ``e_raw`` [B, d_en] (h of
        the untranslated text: the raw view and ``hx``) to ``e_en`` (nothing was translated),
        ``g_vec`` [B, d_g] is g's own vector (needed with ``raw_g``), ``g_tr`` [B, d_gt] g on
        the chosen English text (``translated_g``; default ``g_vec``)."""
        feats = _gate_feats(e_en, feats)
        return self.combine(self.blocks(e_en, e_lr, feats, e_raw, g_vec, g_tr), feats)


class LaSRNet(nn.Module):
    """What LaSR trains: Arca's Adaptor (end to end, App. D.1) + the fusion head.

    ẑ = FusionHead(E_en, mean_s A(G(x)), gate features, h(x), mean_s G(x), ḡ(y*)) from the
    stored streams: E_en [B, d_en], P_S(g(x)) bins [B, S, d_g], gate features [B, 9], h(x)
    [B, d_en] and g on the chosen English text ḡ(y*) [B, d_g]. The Adaptor is LaSR's own copy
    of Arca's (App. D.1: trained end to end); Arca's stays as trained, so the Actor's selection
    and its anchor similarity (a gate feature) are the same in training and at evaluation.
    """

    def __init__(self, head: FusionHead, adaptor: nn.Module) -> None:
        super().__init__()
        self.head = head
        self.adaptor = adaptor

    def forward(self, e_en: Tensor, g_bins: Tensor, feats: Tensor, e_raw: Tensor | None = None,
                g_tr: Tensor | None = None) -> Tensor:  # fmt: skip
        """ẑ [B, dim] (the streams of :meth:`blocks`)."""
        return self.head.combine(self.blocks(e_en, g_bins, feats, e_raw, g_tr), feats)

    def blocks(
        self,
        e_en: Tensor,
        g_bins: Tensor,
        feats: Tensor,
        e_raw: Tensor | None = None,
        g_tr: Tensor | None = None,
    ) -> list[Tensor]:
        """The unit blocks of ẑ (:meth:`FusionHead.blocks`) [B, d_b] each."""
        g_vec = g_bins.mean(dim=1)
        e_lr = self.adaptor.embed_g(g_bins)
        return self.head.blocks(e_en, e_lr, feats, e_raw, g_vec, g_tr)

    def forward_packed(self, packed: Tensor) -> Tensor:
        """Forward on rows packed by :func:`pack` (DocQueue re-scoring)."""
        return self(*unpack(packed, self.head.d_en, self.adaptor.d_g))

    def regate_packed(self, packed: Tensor) -> Tensor:
        """:meth:`FusionHead.regate` on rows [cached ẑ; gate features] (DocQueue entries)."""
        return self.head.regate(packed[:, : self.head.dim], packed[:, self.head.dim :])


def pack(e_en: Tensor, g_bins: Tensor, feats: Tensor, e_raw: Tensor, g_tr: Tensor) -> Tensor:
    """[B, d_en], [B, S, d_g], [B, 9], [B, d_en], [B, d_g] -> one row per text (queue features)."""
    return torch.cat([e_en, e_raw, g_tr, g_bins.flatten(1), feats], dim=-1)


def unpack(packed: Tensor, d_en: int, d_g: int) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Inverse of :func:`pack`: (e_en, g_bins, feats, e_raw, g_tr)."""
    e_en, e_raw = packed[:, :d_en], packed[:, d_en : 2 * d_en]
    g_tr, rest = packed[:, 2 * d_en : 2 * d_en + d_g], packed[:, 2 * d_en + d_g :]
    g, feats = rest[:, :-GATE_FEATURES], rest[:, -GATE_FEATURES:]
    return e_en, g.reshape(len(packed), -1, d_g), feats, e_raw, g_tr


class HeadEMA:
    """Exponential moving average of a module's parameters and buffers (for evaluation)."""

    def __init__(self, module: torch.nn.Module, decay: float) -> None:
        self.decay = decay
        self.updates = 0
        self.shadow = copy.deepcopy(module).eval()
        self.frozen = {n for n, p in module.named_parameters() if not p.requires_grad}
        for p in self.shadow.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, module: torch.nn.Module) -> None:
        """shadow ← d·shadow + (1 − d)·module, d = min(decay, (1 + t)/(10 + t)); frozen
        parameters and integer buffers are copied (so they stay bit-identical)."""
        self.updates += 1
        d = min(self.decay, (1 + self.updates) / (10 + self.updates))
        live = module.state_dict()
        for name, s in self.shadow.state_dict().items():
            if s.dtype.is_floating_point and name not in self.frozen:
                s.mul_(d).add_(live[name].detach(), alpha=1 - d)
            else:
                s.copy_(live[name])

    def snapshot(self) -> dict[str, Tensor]:
        """A detached copy of the shadow weights (a checkpoint kept in memory)."""
        return {k: v.detach().clone() for k, v in self.shadow.state_dict().items()}

    def state_dict(self) -> dict[str, object]:
        """Shadow weights and update count."""
        return {"shadow": self.shadow.state_dict(), "updates": self.updates}

    def load_state_dict(self, state: dict[str, dict[str, Tensor] | int]) -> None:
        """Restore :meth:`state_dict`."""
        self.shadow.load_state_dict(state["shadow"])
        self.updates = int(state["updates"])
