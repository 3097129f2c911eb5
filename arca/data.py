"""Arca's training inputs: sources with their English candidates (paper 004 §4.1).

:class:`ArcaItem` is one source and its candidates (None: fetched at step time, online
translation, :func:`fetch_candidates`); :func:`clean_items` / :func:`usable_items` drop the
unusable ones; :class:`StoreCandidates` reads
candidates from the translation store (filling gaps first when online) and
:func:`build_items` makes the items of a split; :func:`held_out_sources` and
:func:`gold_eval_items` are the held-out sources Arca is measured on; :class:`DataOrder` is the
order training reads the items in.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from arca.config import ArcaRun
from lira.data.splits import Splits
from lira.data.types import Record
from lira.data.xquad_r import plain_qid
from lira.errors import UserInputError
from lira.translation.config import TranslatorConfig
from lira.translation.engine import fill_store
from lira.translation.store import TranslationStore
from lira.translation.types import Candidate

log = logging.getLogger(__name__)

CandidateFn = Callable[[list[str], str], list[list[Candidate]]]
"""(source texts, language) -> candidates per text (online translation)."""


@dataclass
class ArcaItem:
    """One training source with its English candidates (None = fetched at step time)."""

    source: str
    lang: str
    candidates: list[Candidate] | None = None


def clean_items(items: Sequence[ArcaItem]) -> tuple[list[ArcaItem], dict[str, int]]:
    """Drop empty sources and sources without any (non-empty) candidate; count both."""
    kept: list[ArcaItem] = []
    counts = {"empty_sources": 0, "no_candidates": 0}
    for it in items:
        if not it.source or not it.source.strip():
            counts["empty_sources"] += 1
            continue
        if it.candidates is not None:
            cands = [c for c in it.candidates if c.text and c.text.strip()]
            if not cands:
                counts["no_candidates"] += 1
                continue
            it = dataclasses.replace(it, candidates=cands)
        kept.append(it)
    return kept, counts


def usable_items(
    items: Sequence[ArcaItem], candidate_fn: CandidateFn | None
) -> tuple[list[ArcaItem], dict[str, int]]:
    """The usable training sources (:func:`clean_items`) and the trainer's counters (starting
    with what was dropped); an error when nothing is left or candidates cannot be fetched."""
    kept, dropped = clean_items(items)
    counters: dict[str, int] = {
        **dropped,
        "skipped_steps": 0,
        "skipped_sources": 0,
        "nonfinite_steps": 0,
        "nan_guards": 0,
    }
    for k, v in dropped.items():
        if v:
            log.warning("Arca: dropped %d training sources (%s)", v, k.replace("_", " "))
    if not kept:
        raise UserInputError(
            f"no usable Arca training source: {dropped['empty_sources']} empty, "
            f"{dropped['no_candidates']} without any candidate; fill the translation store "
            "(`lira translate` with this config) or set arca.online_translation=true"
        )
    if any(it.candidates is None for it in kept) and candidate_fn is None:
        raise ValueError("items without candidates need a candidate_fn (online translation)")
    return kept, counters


def fetch_candidates(items: Sequence[ArcaItem], fn: CandidateFn | None) -> list[list[Candidate]]:
    """The non-empty candidates of each item: its own, or fetched with ``fn`` per language."""
    out: list[list[Candidate] | None] = [it.candidates for it in items]
    todo: dict[str, list[int]] = {}
    for i, c in enumerate(out):
        if c is None:
            todo.setdefault(items[i].lang, []).append(i)
    for lang, rows in todo.items():
        fresh = fn([items[i].source for i in rows], lang)  # type: ignore[misc]
        for i, c in zip(rows, fresh):
            out[i] = [x for x in c if x.text and x.text.strip()]
    return [c or [] for c in out]


def rounded(obj: object) -> object:
    """``obj`` with its finite floats rounded to 6 digits (logs and metrics files)."""
    if isinstance(obj, float):
        return obj if not math.isfinite(obj) else round(obj, 6)
    if isinstance(obj, dict):
        return {k: rounded(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [rounded(v) for v in obj]
    return obj


class StoreCandidates:
    """Candidates read from the translation store; with ``online`` the pool fills gaps first."""

    def __init__(
        self,
        cfg: ArcaRun,
        store: TranslationStore,
        translators: Sequence[TranslatorConfig],
        online: bool,
    ) -> None:
        self.cfg, self.store, self.translators, self.online = cfg, store, list(translators), online

    def __call__(self, texts: list[str], lang: str) -> list[list[Candidate]]:
        """Candidates per text for ``lang`` (online: translate + score the missing ones first)."""
        if self.online:
            fill_store(self.cfg, {lang: list(texts)}, self.store)
        return self.store.candidates(texts, lang, self.translators)


def build_items(records: Sequence[Record], fetch: CandidateFn, online: bool) -> list[ArcaItem]:
    """ArcaItems from Records (``.text``, ``.lang``); offline: candidates read now."""
    items = [ArcaItem(r.text, r.lang, None) for r in records]
    if not online:
        for it, cands in zip(items, fetch_candidates(items, fetch)):
            it.candidates = cands
    return items


def held_out_sources(splits: Splits) -> list[Record]:
    """The sources Arca is measured on: the validation split's when there is one (the test
    split is ``lira compare``'s alone), else the held-out ones."""
    return list(splits.dev_sources) if getattr(splits, "dev", None) else list(splits.eval_sources)


def gold_eval_items(splits: Splits) -> list[ArcaItem]:
    """Held-out XQuAD-R sources with their human English original as the only candidate.

    For measuring the anchor only (``eval_gold`` in the summary: cos(E_lr, h(gold)) against
    mismatched pairs); never a training or inference input. Empty for other datasets.
    """

    ds = getattr(splits, "dataset", None)
    if ds is None or "en" not in ds.languages:
        return []
    items = []
    for rec in held_out_sources(splits):
        try:
            en = ds.question("en", plain_qid(rec.id)).text
        except KeyError:
            continue
        items.append(ArcaItem(rec.text, rec.lang, [Candidate("gold-en", en, None)]))
    return items


class DataOrder:
    """Which items each process reads: an endless stream of per-epoch permutations (seeded by
    ``seed`` and the epoch); optimisation step t of a run with P processes reads the positions
    [t*G*B*P, (t+1)*G*B*P) and process r takes its own B-slice of each micro-batch. The stream
    position is a function of the step, so a resumed run continues exactly where it stopped."""

    def __init__(
        self, n: int, seed: int, batch_size: int, grad_accum: int, world: int, rank: int
    ) -> None:
        self.n, self.seed, self.batch_size, self.grad_accum = n, seed, batch_size, grad_accum
        self.world, self.rank = world, rank
        self._perms: dict[int, Tensor] = {}

    def perm(self, epoch: int) -> Tensor:
        """The permutation [n] of epoch ``epoch`` (memoised)."""
        if epoch not in self._perms:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._perms[epoch] = torch.randperm(self.n, generator=g)
        return self._perms[epoch]

    def start(self, step: int, micro: int) -> int:
        """The stream position of this process's first item of micro-batch ``micro`` of ``step``."""
        return ((step * self.grad_accum + micro) * self.world + self.rank) * self.batch_size

    def indices(self, step: int, micro: int) -> list[int]:
        """This process's item indices of micro-batch ``micro`` of optimisation step ``step``."""
        start = self.start(step, micro)
        return [
            int(self.perm(p // self.n)[p % self.n]) for p in range(start, start + self.batch_size)
        ]

    def cycle(self, texts: Sequence[str], step: int, micro: int) -> list[str]:
        """``batch_size`` of ``texts`` in order, cycling, from the position of :meth:`start`."""
        start = self.start(step, micro)
        return (
            [texts[p % len(texts)] for p in range(start, start + self.batch_size)] if texts else []
        )
