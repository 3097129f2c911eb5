"""The reward of ``lira tune-translator``: Arca's composite reward (Eq. 7) for a translation.

Paper 004 trains the Actor to *pick* among fixed candidates with the composite reward of
Eq. 7. Here the same reward trains the *translator* that produces them: TRL's ``GRPOTrainer``
samples ``num_generations`` English translations per training source (the prompt of
:mod:`lira.prompts`, as ``lira translate`` uses it) and each completion y of a source x gets

    R(x, y) = [not empty, not a copy] * (0.1 (alpha s + beta e + gamma p) + delta sim(x, y))
              - format_weight * penalty(x, y)

- sim(x, y) = cos(E_lr(x), E_en(y)) in the anchor space of a trained Arca checkpoint (the
  label-free core; :func:`anchor_similarity`, the quantity Arca's Actor sees as sim_k); with
  ``center_sim`` (default) minus the completion's mean similarity to all training sources,
  sim(x, y) - mean_x' cos(E_lr(x'), E_en(y)) = <e_y, e_x - mu> with unit vectors e and mu the
  mean unit E_lr of the training sources. The plain cosine cannot tell a translation from a
  generic English question (a policy rewarded by it learns "What is the purpose of the
  article?"-style outputs: such a question is as close to every source as to its own);
  centred, the generic question earns ~0 (measured on held-out questions: the gold English
  beats that question on 66% of sources plain, 95% centred);
- (s, e, p): the configured critic's scores of the cleaned completion, computed only when one
  of alpha, beta, gamma is > 0 (all 0 by default: one critic call per sample is slow);
- penalty in [0, 1] (:func:`lira.translation.checks.format_check`, shared with the embedding
  critic's echo check): the completion is cleaned like a pool candidate
  (:func:`lira.translation.cleanup.clean_translation`); an empty result or a copy of the source
  (the whole source, or a fragment of it at least half its length, e.g. a copy cut
  off by max_new_tokens), or a completion of >= 3 words more than 3/4 of
  which are source words (a paraphrase in the source language), or not in Latin script, gets penalty 1 and no composite
  at all (otherwise a policy could echo the source, which an embedding space may find
  "similar"); meta-text that the cleanup removed (preambles, notes) adds 0.5, a source echoed
  inside the translation adds 0.5, and a length ratio
  len(y) / len(x) (characters) outside [min_length_ratio, max_length_ratio] adds
  min(1, |log2(ratio / nearest bound)|).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TypedDict

import torch
import torch.nn.functional as F
from torch import Tensor

from arca.losses import composite_reward
from arca.model import ArcaModel
from arca.tuning.config import TuneTranslatorConfig
from lira.prompts import first_line
from lira.translation.checks import format_check
from lira.translation.critic import Critic
from lira.translation.types import NEUTRAL_SCORE


# ------------------------------------------------------------------------------ reward
@torch.no_grad()
def anchor_similarity(arca: ArcaModel, sources: Sequence[str], outputs: Sequence[str]) -> Tensor:
    """cos(E_lr(x_i), E_en(y_i)) per pair in Arca's anchor space (sim_k of Eq. 6-7): [N] on CPU.

    E_lr = the anchor of g's path, E_en = the fixed target T(y) of h (``objective: d1``) or
    A(P_S(h_tok(y))) through the shared Adaptor (``shared``).
    """
    if not sources:
        return torch.zeros(0)
    e_lr = arca.anchor_lr(arca.pooled_sources(list(sources)))
    e_en = arca.anchor_en(arca.english_inputs(list(outputs)))
    return F.cosine_similarity(e_lr.float(), e_en.to(e_lr.device).float(), dim=-1).cpu()


ScoreFn = Callable[[list[str], list[str], str], list[tuple[float, float, float] | None]]
"""(sources, cleaned translations, language) -> critic (s, e, p) per pair, None = no score."""


def critic_scorer(critic: Critic) -> ScoreFn:
    """A :data:`ScoreFn` around a :class:`lira.translation.critic.Critic`."""

    def score(
        sources: list[str], outputs: list[str], lang: str
    ) -> list[tuple[int, int, int] | None]:
        return [r.scores for r in critic.score(sources, outputs, lang)]

    return score


class RewardParts(TypedDict):
    """One completion's reward and its parts (:meth:`AnchorReward.score`)."""

    reward: float
    sim: float
    margin: float
    scores: list[float]
    penalty: float
    reasons: list[str]
    hard: bool
    text: str


class AnchorReward:
    """TRL reward function: R = 0.1 (alpha s + beta e + gamma p) + delta sim - w penalty.

    Called by ``GRPOTrainer`` with the prompts, the completions and the dataset columns
    ``source`` and ``lang`` (repeated per generation). :meth:`score` does the work on plain
    strings; :meth:`__call__` adapts TRL's arguments and logs ``anchor_sim`` (the plain
    cosine), ``anchor_margin`` (the centred one), ``format_penalty`` and ``no_composite``
    (share of completions with no composite reward). ``reference_sources``: the training
    sources whose mean unit anchor mu centres sim (required with ``cfg.center_sim``);
    ``first_line_only``: a completion prompt's translation is the completion's first line
    (:func:`lira.prompts.first_line`, as the pool reads it).
    """

    __name__ = "arca_anchor"  # TRL's name of the reward in its logs

    def __init__(
        self,
        arca: ArcaModel,
        cfg: TuneTranslatorConfig,
        critic: ScoreFn | None = None,
        reference_sources: Sequence[str] = (),
        first_line_only: bool = False,
    ) -> None:
        self.arca, self.cfg, self.critic = arca, cfg, critic
        self.first_line_only = first_line_only
        self._e_lr: dict[str, Tensor] = {}  # sources are a fixed set: memoise E_lr
        self.mean_anchor: Tensor | None = None
        if cfg.center_sim:
            if not reference_sources:
                raise ValueError("tune_translator.center_sim needs the training sources")
            self.mean_anchor = self._anchors(list(reference_sources)).mean(0)

    @torch.no_grad()
    def _anchors(self, sources: list[str]) -> Tensor:
        """Unit E_lr per source, memoised (the sources are a fixed set)."""
        arca = self.arca
        todo = list(dict.fromkeys(s for s in sources if s not in self._e_lr))
        for i in range(0, len(todo), 64):
            chunk = todo[i : i + 64]
            e = F.normalize(arca.anchor_lr(arca.pooled_sources(chunk)).float().cpu(), dim=-1)
            self._e_lr.update(zip(chunk, e))
        return torch.stack([self._e_lr[s] for s in sources])

    def uses_critic(self) -> bool:
        """True when a critic weight is > 0 (the critic then scores every sample)."""
        return any(getattr(self.cfg, k) > 0 for k in ("alpha", "beta", "gamma"))

    @torch.no_grad()
    def similarity(self, sources: Sequence[str], outputs: Sequence[str]) -> tuple[Tensor, Tensor]:
        """(plain, centred) sim per pair: :func:`anchor_similarity` and it minus <e_y, mu>
        (centred = plain without ``center_sim``); E_lr memoised, no growing E_en memo."""
        if not sources:
            return torch.zeros(0), torch.zeros(0)
        arca = self.arca
        e_lr = self._anchors(list(sources))
        e_en = arca.anchor_en(arca.english_inputs(list(outputs)))
        targets = getattr(arca, "_targets", None)
        if isinstance(targets, dict):
            targets.clear()  # every sample is new text: do not keep h's targets of all of them
        e_en = F.normalize(e_en.float().cpu(), dim=-1)
        plain = (e_lr * e_en).sum(-1)
        if self.mean_anchor is None:
            return plain, plain
        return plain, plain - e_en @ self.mean_anchor

    def score(
        self, sources: Sequence[str], langs: Sequence[str], outputs: Sequence[str]
    ) -> list[RewardParts]:
        """Per completion: reward, sim, margin, scores, penalty, reasons, hard and the text."""
        c = self.cfg
        checks = [
            format_check(x, y, c.min_length_ratio, c.max_length_ratio)
            for x, y in zip(sources, outputs)
        ]
        live = [i for i, ch in enumerate(checks) if not ch.hard]
        plain, sims = torch.zeros(len(checks)), torch.zeros(len(checks))
        if live and c.delta > 0:
            plain[live], sims[live] = self.similarity(
                [sources[i] for i in live], [checks[i].text for i in live]
            )
        scores = torch.full((len(checks), 3), NEUTRAL_SCORE)
        if live and self.critic is not None and self.uses_critic():
            for lang in dict.fromkeys(langs[i] for i in live):
                idx = [i for i in live if langs[i] == lang]
                got = self.critic([sources[i] for i in idx], [checks[i].text for i in idx], lang)
                for i, s in zip(idx, got):
                    if s is not None and all(math.isfinite(float(v)) for v in s):
                        scores[i] = torch.tensor([float(v) for v in s])
        composite = composite_reward(scores, sims, c.alpha, c.beta, c.gamma, c.delta)
        out: list[RewardParts] = []
        for i, ch in enumerate(checks):
            r = (0.0 if ch.hard else float(composite[i])) - c.format_weight * ch.penalty
            out.append({
                "reward": r, "sim": float(plain[i]), "margin": float(sims[i]),
                "scores": scores[i].tolist(),
                "penalty": ch.penalty, "reasons": list(ch.reasons), "hard": ch.hard,
                "text": ch.text,
            })  # fmt: skip
        return out

    def __call__(
        self,
        prompts: list[str | list[dict[str, str]]],
        completions: list[str | list[dict[str, str]]],
        source: list[str],
        lang: list[str],
        **kwargs: object,
    ) -> list[float]:
        """TRL's reward-function interface: one float per completion."""
        outputs = [c[-1]["content"] if isinstance(c, list) else str(c) for c in completions]
        if self.first_line_only:
            outputs = [first_line(o) for o in outputs]
        parts = self.score(source, lang, outputs)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and parts:
            live = [p for p in parts if not p["hard"]]
            if live:
                log_metric("anchor_sim", sum(p["sim"] for p in live) / len(live))
                log_metric("anchor_margin", sum(p["margin"] for p in live) / len(live))
            log_metric("format_penalty", sum(p["penalty"] for p in parts) / len(parts))
            log_metric("no_composite", 1 - len(live) / len(parts))
        return [p["reward"] for p in parts]
