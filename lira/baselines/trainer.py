"""One contrastive trainer for every baseline (``lira baseline CONFIG [--methods ...]``).

Every method fine-tunes the same backbone (``lira.models.load_backbone``; full fine-tuning or
LoRA via peft, merged back before saving) on the same training split. Each method trains with
its paper's recipe (``cfg.baselines.<method>.*``: AdamW rate, batch size, epochs, schedule and
warm-up, weight decay, temperature); ``cfg.baselines.steps`` / ``batch_size`` / ``lr`` > 0 is a
shared budget that overrides them for every method. The recipe in force is logged and written
to ``<output_dir>/baselines/summary.json``.

The methods are registered in :mod:`lira.baselines.registry` (name -> method object); each
method's file defines its object (:class:`~lira.baselines.method.BaselineMethod`: recipe, the
data and negatives it needs, its batches and its loss), and this trainer runs every one:

- ``infonce`` (:mod:`~lira.baselines.infonce`, CLEAR's baseline, paper 000 §4.2): target
  query -> English gold sentence, in-batch + the same hard negatives as CLEAR, CLEAR's recipe.
- ``clear`` (:mod:`~lira.baselines.clear`): CLEAR's loss with 5 hard negatives sampled from
  ranks 30-100 of the initial model's retrieval, for passages and target-language queries.
- ``lancer`` (:mod:`~lira.baselines.lancer`, paper 002): English InfoNCE + λ·L_C on a
  multilingual batch of non-parallel sentences per language.
- ``jsd`` (:mod:`~lira.baselines.jsd`, paper 003): L_JSD(p_en, p_tgt) + L_NCE(anchor p_tgt,
  positive q_en, in-batch English queries).
- ``merging`` (:mod:`~lira.baselines.merging`, paper 001): the D(l en en) fine-tune (GIST loss,
  App. B.2 negatives) weight-averaged with the base model or a D(en en en) fine-tune.

Departures, where a paper's setting cannot be had here or is not stated: the retriever that
mines negatives and paper 001's GIST guide are the initial backbone (the papers use each
model itself for CLEAR, NV-Embed-v2 and bge-m3 for paper 001, not available offline); paper
001's sixth, LLM-generated negative has no counterpart; one model is trained on all training
languages with every question in each (CLEAR's multilingual expansion uses non-overlapping
questions per language); LANCER scores with cosine / τ (its retrievers score unnormalised
dot products, ours output unit vectors); paper 003's learning rate is per backbone (App. C),
the default is its mE5-large value; the maximum length is ``models.backbone_max_length`` for
every method (CLEAR: 512).

The training examples come from ``lira.data.splits.load_splits(cfg.data)``: ``train_parallel``
(questions in English and the training languages, aligned by question id),
``train_retrieval`` (training-language queries ``<qid>@<lang>`` -> English gold sentence) and
``dataset`` (XQuAD-R: the gold sentence of a question in every language).

The loop is a direct accelerate loop (CLEAR, LANCER and JSD need several encodings per step
and extra batches, which a plain loop states more directly) on the trainer contract of
:mod:`lira.training` (``train(resume=False)``, ``finalize()``, ``baselines.max_grad_norm``,
``baselines.report_to``); its AdamW is torch's fused (or foreach) kernel. Each method's loss is
measured before and after training on the same fixed batches in eval mode. The final models are
HF folders (config + safetensors + tokenizer + ``lira_baseline.json`` holding pooling and
prompts), written atomically and loadable with :func:`load_baseline`; each also holds the run
fingerprint (:func:`baseline_fingerprint`): ``--resume`` skips a finished method only when its
fingerprint matches the config and refuses otherwise, and continues an unfinished one from its
latest ``<method>-checkpoints/step-*`` (written every ``baselines.save_every`` steps; 0 = none).
A step whose loss or gradient norm is not finite is skipped and counted (``nonfinite_steps`` in
``summary.json``).
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from lira.baselines.clear import ClearConfig, sample_hard_negatives
from lira.baselines.composition import mine_filtered_negatives
from lira.baselines.config import BaselinesConfig, BaselinesRun, flat_baselines, flat_recipe
from lira.baselines.lancer import lancer_texts  # noqa: F401 (re-exported, moved there)
from lira.baselines.method import BaselineMethod, english_rows
from lira.baselines.registry import get_method, method_names
from lira.checkpoint import (
    CheckpointError,
    all_finite,
    atomic_dir,
    check_fingerprint,
    clear_previous_run,
    latest_checkpoint,
    load_state,
    models_fields,
    prune_checkpoints,
    rng_state,
    run_fingerprint,
    save_state,
    set_rng_state,
    state_mismatch,
    step_dir,
    step_of,
    write_fingerprint,
    write_json,
)
from lira.config import ModelsConfig
from lira.data.splits import load_splits
from lira.data.types import ParallelData, RetrievalData
from lira.data.xquad_r import XQuADR
from lira.models import load_backbone
from lira.models.devices import resolve_device
from lira.training import adamw_kwargs, finish_trackers, log_metrics, make_accelerator

log = logging.getLogger(__name__)

META_FILE = "lira_baseline.json"


# ----------------------------------------------------------------------------------- data
@dataclass
class TrainExample:
    """One training row: a question in English and a training language, its gold sentences."""

    qid: str
    lang: str
    q_en: str
    q_tgt: str
    pos_id: str
    pos_text: str
    p_tgt: str = ""
    """The gold sentence in ``lang`` (paper 003's p_tgt)."""
    p_hn: list[int] = field(default_factory=list)
    """Corpus indices of CLEAR's hard-negative passages."""
    q_hn: list[int] = field(default_factory=list)
    """Example indices whose q_tgt are CLEAR's hard-negative target queries."""
    gist_hn: list[int] = field(default_factory=list)
    """Corpus indices of paper 001's mined English negatives."""


def build_examples(
    parallel: ParallelData, retrieval: RetrievalData, dataset: XQuADR | None = None
) -> list[TrainExample]:
    """Join target queries (``<qid>@<lang>``) with their English question and gold sentences."""
    if "en" not in parallel.texts:
        raise ValueError(
            f"train_parallel must hold English questions; has {sorted(parallel.texts)}"
        )
    row = {qid: i for i, qid in enumerate(parallel.ids)}
    docs = {r.id: r.text for r in retrieval.corpus}
    out = []
    for q in retrieval.queries:
        if q.lang == "en":
            continue
        qid = q.id.rsplit("@", 1)[0]
        gold = [d for d, rel in retrieval.qrels.get(q.id, {}).items() if rel > 0 and d in docs]
        if qid not in row or not gold:
            continue
        pos = sorted(gold)[0]
        p_tgt = dataset.gold_sentence(q.lang, qid).text if dataset is not None else ""
        out.append(
            TrainExample(qid, q.lang, parallel.texts["en"][row[qid]], q.text, pos, docs[pos], p_tgt)
        )
    if len(out) < 2:
        raise ValueError(
            f"only {len(out)} training examples could be joined from train_retrieval and "
            "train_parallel (query ids must be <qid>@<lang> with qrels into the corpus)"
        )
    return out


@torch.no_grad()
def mine_clear_negatives(
    backbone: nn.Module, examples: list[TrainExample], corpus: list[Any], cfg: BaselinesConfig,
    bs: int = 64,
) -> None:  # fmt: skip
    """Fill ``p_hn`` (passages) and ``q_hn`` (same-language target queries), CLEAR §4.1-4.2."""
    rc = cfg.recipe_of("clear", ClearConfig)
    k, ranks = rc.negatives, tuple(rc.negative_ranks)
    if k == 0:
        return
    gen = torch.Generator().manual_seed(cfg.seed)
    corpus_ids = [r.id for r in corpus]
    ids = {d: i for i, d in enumerate(dict.fromkeys(corpus_ids + [e.pos_id for e in examples]))}
    q = torch.as_tensor(backbone.encode([e.q_en for e in examples], kind="query", batch_size=bs))
    p = torch.as_tensor(backbone.encode([r.text for r in corpus], kind="document", batch_size=bs))
    pos = torch.tensor([ids[e.pos_id] for e in examples])
    pool_ids = torch.tensor([ids[d] for d in corpus_ids])
    rows = sample_hard_negatives(q, p, pos, pool_ids, k, ranks, gen, "CLEAR passage negatives")
    for e, row in zip(examples, rows.tolist()):
        e.p_hn = row
    p_gold = torch.as_tensor(
        backbone.encode([e.pos_text for e in examples], kind="document", batch_size=bs)
    )
    qt = torch.as_tensor(backbone.encode([e.q_tgt for e in examples], kind="query", batch_size=bs))
    for lang in sorted({e.lang for e in examples}):
        idx = [i for i, e in enumerate(examples) if e.lang == lang]
        sel = torch.tensor(idx)
        usable = int((pos[sel].view(1, -1) != pos[sel].view(-1, 1)).sum(1).min())
        k_q = min(k, usable)
        if k_q < k:
            log.info("CLEAR %s query negatives: %d per example (only %d usable)", lang, k_q, usable)
        rows = sample_hard_negatives(
            p_gold[sel],
            qt[sel],
            pos[sel],
            pos[sel],
            k_q,
            ranks,
            gen,
            f"CLEAR {lang} query negatives",
        )
        for i, r in zip(idx, rows.tolist()):
            examples[i].q_hn = [idx[j] for j in r]


@torch.no_grad()
def mine_composition_negatives(
    backbone: nn.Module, examples: list[TrainExample], corpus: list[Any], cfg: BaselinesConfig,
    bs: int = 64,
) -> None:  # fmt: skip
    """Fill ``gist_hn``: paper 001's English negatives, mined once per English question."""
    rc: Any = cfg.recipes["merging"]  # a MergingConfig (lira.baselines.merging imports us)
    k = rc.negatives
    rows = english_rows(examples)
    corpus_ids = [r.id for r in corpus]
    ids = {d: i for i, d in enumerate(dict.fromkeys(corpus_ids + [e.pos_id for e in examples]))}
    ex = [examples[i] for i in rows]
    q = torch.as_tensor(backbone.encode([e.q_en for e in ex], kind="query", batch_size=bs))
    p = torch.as_tensor(backbone.encode([r.text for r in corpus], kind="document", batch_size=bs))
    gold = torch.as_tensor(
        backbone.encode([e.pos_text for e in ex], kind="document", batch_size=bs)
    )
    mined = mine_filtered_negatives(
        q, p, gold, torch.tensor([ids[e.pos_id] for e in ex]),
        torch.tensor([ids[d] for d in corpus_ids]), k, tuple(rc.negative_ranks),
        rc.max_sim, rc.relative_margin,
    ).tolist()  # fmt: skip
    by_qid = {e.qid: m for e, m in zip(ex, mined)}
    for e in examples:
        e.gist_hn = list(by_qid[e.qid])


NEGATIVES: dict[str, tuple[Any, str, tuple[str, ...]]] = {
    "clear": (mine_clear_negatives, "clear", ("negatives", "negative_ranks")),
    "composition": (mine_composition_negatives, "merging",
                    ("negatives", "negative_ranks", "max_sim", "relative_margin")),
}  # fmt: skip
"""The negatives a method can ask for (``BaselineMethod.negatives``): their miner (run once
with the initial model for every method that needs them) and the ``baselines.<recipe>.*``
fields that shape them (part of the method's run fingerprint)."""


# -------------------------------------------------------------------------------- recipes
@dataclass(frozen=True)
class Recipe:
    """One method's optimisation recipe after the shared budget is applied."""

    lr: float
    batch_size: int
    steps: int
    scheduler: str
    warmup: float
    weight_decay: float
    beta2: float
    tau: float
    shared: tuple[str, ...] = ()
    """The fields the shared budget set (the others are the paper's)."""


def recipe(cfg: BaselinesConfig, method: str | BaselineMethod, n_rows: int) -> Recipe:
    """The paper's recipe of ``method`` for ``n_rows`` training rows, shared budget applied:
    ``baselines.<recipe>.*`` of the method's recipe section, or its own defaults without one."""
    spec = get_method(method, parts=True) if isinstance(method, str) else method
    key = spec.recipe_section()
    fields = ("lr", "batch_size", "epochs", "scheduler", "warmup", "weight_decay", "beta2", "tau")
    own = cfg.recipes[key] if key else None
    paper = {f: getattr(own, f) if own else spec.defaults[f] for f in fields}
    shared = tuple(f for f in ("steps", "batch_size", "lr") if getattr(cfg, f))
    batch = min(cfg.batch_size or paper["batch_size"], n_rows)
    steps = cfg.steps or math.ceil(paper["epochs"] * n_rows / batch)
    return Recipe(cfg.lr or paper["lr"], batch, steps, paper["scheduler"], paper["warmup"],
                  paper["weight_decay"], paper["beta2"], paper["tau"], shared)  # fmt: skip


def make_scheduler(opt: torch.optim.Optimizer, r: Recipe) -> Any:
    """The recipe's learning-rate schedule (warm-up steps = ceil(ratio · steps))."""
    from transformers import get_scheduler

    warm = math.ceil(r.warmup * r.steps)
    name = "constant_with_warmup" if r.scheduler == "constant" else r.scheduler
    return get_scheduler(name, opt, num_warmup_steps=warm, num_training_steps=max(r.steps, 1))


# -------------------------------------------------------------------------------- trainer
BASELINE_UNSHAPING = ("baselines.report_to", "baselines.save_every")
"""``baselines`` fields left out of the run fingerprint: where the terms are logged and how often
checkpoints are written change nothing in the trained model."""


class ContrastiveTrainer:
    """Fine-tunes a backbone with one baseline objective and its paper's recipe.

    The trainer contract of :mod:`lira.training`: ``ContrastiveTrainer(cfg, model, method,
    examples, corpus, output_dir, models_cfg=...)``; :meth:`train` runs to the recipe's steps
    (with ``resume``, from the latest intact ``<output_dir>-checkpoints/step-*`` written every
    ``cfg.save_every`` steps; one of another config is refused); :meth:`finalize` writes the
    loadable baseline folder ``output_dir`` and returns it (the trained backbone stays in
    :attr:`backbone`). Gradients are clipped at ``cfg.max_grad_norm``; ``cfg.report_to`` sends
    the loss and learning rate to an accelerate tracker.

    ``method`` names a registered method (:mod:`lira.baselines.registry`) whose objective this
    loop trains (every one but merging, which runs its own loop) or an inner objective such as
    ``gist`` (one merging part: it needs ``composition`` examples and a frozen ``guide``). The
    method's hooks check the data, pick the rows, draw the batches and compute the loss; this
    class owns the model, the optimizer, the schedule and the skipping of non-finite steps.
    Keyword arguments beyond the named ones (a method's :meth:`prepare` output) are kept in
    ``data``.
    """

    def __init__(
        self,
        cfg: BaselinesConfig,
        model: nn.Module,
        method: str,
        examples: list[TrainExample],
        corpus: list[Any],
        output_dir: str | Path,
        *,
        models_cfg: ModelsConfig,
        multilingual: dict[str, list[str]] | None = None,
        composition: list[Any] | None = None,
        guide: nn.Module | None = None,
        accelerator: Any = None,
        fingerprint: dict[str, Any] | None = None,
        keep_checkpoints: int = 2,
        **data: Any,
    ) -> None:
        choices = [n for n in method_names() if not get_method(n).own_loop] + ["gist"]
        try:
            spec = get_method(method, parts=True)
        except ValueError:
            spec = None
        if spec is None or spec.own_loop:
            raise ValueError(f"unknown method '{method}'; choose from {tuple(choices)}")
        self.spec: BaselineMethod = spec
        self.cfg, self.method = cfg, method
        self.output_dir = Path(output_dir)
        """The final baseline folder :meth:`finalize` writes."""
        self.checkpoint_dir = self.output_dir.with_name(self.output_dir.name + "-checkpoints")
        """Where the ``step-*`` checkpoints go (``cfg.save_every`` > 0)."""
        self.models_cfg = models_cfg
        self.examples, self.corpus = examples, corpus
        self.multilingual = multilingual or {}
        self.composition, self.guide = composition, guide
        self.data = data
        spec.check(self)
        self.rows = spec.rows(self)
        ids = dict.fromkeys([r.id for r in corpus] + [e.pos_id for e in examples])
        self.doc_index = {d: i for i, d in enumerate(ids)}
        self.corpus_key = [self.doc_index[r.id] for r in corpus]
        self.recipe = recipe(cfg, spec, self.n_rows())
        r = self.recipe
        log.info("%s recipe: %s", method, json.dumps(asdict(r)))
        self.fingerprint = fingerprint or run_fingerprint(
            f"baseline {method}", {"baselines": flat_baselines(cfg)}, BASELINE_UNSHAPING
        )
        """Stored in every checkpoint and the final folder; ``resume`` refuses another one."""
        self.keep_checkpoints = keep_checkpoints
        # the tracker logs go next to the final folder: finalize replaces that folder whole
        self.accelerator = accelerator or make_accelerator(
            "baselines", cfg.report_to, self.output_dir.parent,
            run_name=f"baselines-{self.output_dir.name}",
        )  # fmt: skip
        self.backbone = model
        if cfg.lora:
            self._apply_lora()
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=r.lr, betas=(0.9, r.beta2), weight_decay=r.weight_decay,
                                **adamw_kwargs(self.accelerator.device))  # fmt: skip
        self.model, self.opt = self.accelerator.prepare(model, opt)
        self.scheduler = make_scheduler(self.opt, r)
        if self.guide is not None:
            self.guide.to(self.accelerator.device).eval().requires_grad_(False)
        self.objective = spec.setup(self)
        """The method's loss module(s) (:meth:`BaselineMethod.setup`)."""
        self.rng = random.Random(cfg.seed)
        self.step = 0
        self.history: list[float] = []
        self.nonfinite_steps = 0
        """Steps skipped because the loss or the gradient norm was not finite."""
        self._resumed = False

    def _apply_lora(self) -> None:
        from peft import LoraConfig, get_peft_model

        lc = LoraConfig(
            r=self.cfg.lora_r, lora_alpha=2 * self.cfg.lora_r, target_modules="all-linear"
        )
        self.backbone.model = get_peft_model(self.backbone.model, lc)

    # ------------------------------------------------------------------ batches and losses
    def n_rows(self) -> int:
        """Rows the batches are drawn from."""
        return self.spec.n_rows(self)

    def draw(self, rng: random.Random) -> dict[str, Any]:
        """One batch: row indices (distinct) plus what the method adds (LANCER: a
        multilingual batch)."""
        picks = rng.sample(range(self.n_rows()), self.recipe.batch_size)
        batch: dict[str, Any] = {"rows": [self.rows[i] for i in picks] if self.rows else picks}
        self.spec.draw(self, batch, rng)
        return batch

    def encode(self, texts: list[str], kind: str) -> Tensor:
        """Embeddings of ``texts`` by the model being trained (with gradient): [N, d]."""
        return self.model(texts, kind=kind)  # [N, d]

    def loss(self, batch: dict[str, Any]) -> Tensor:
        """The method's loss on one batch."""
        return self.spec.loss(self, batch)

    @torch.no_grad()
    def measure(self, batches: list[dict[str, Any]]) -> float:
        """Mean loss over fixed batches in eval mode (no dropout, no gradient)."""
        was = self.model.training
        self.model.eval()
        vals = [float(self.loss(bt)) for bt in batches]
        self.model.train(was)
        return sum(vals) / len(vals)

    # ------------------------------------------------------------------------------ loop
    def train(self, resume: bool = False, steps: int | None = None) -> list[float]:
        """Run to ``steps`` optimisation steps (default: the recipe's); returns the losses.

        With ``resume``, continue from the latest intact checkpoint first (see :meth:`resume`);
        without, a fresh run removes the checkpoints a previous run left. A step whose loss or
        gradient norm is not finite (on any process) is skipped and counted in
        ``nonfinite_steps``: no NaN/inf reaches the weights or the optimizer state. The schedule
        still advances (it is a function of the step).
        """
        total = self.recipe.steps if steps is None else steps
        acc = self.accelerator
        if resume and not self._resumed:
            self.resume()
        if self.step == 0 and not self._resumed and acc.is_main_process:
            clear_previous_run(self.checkpoint_dir, self.fingerprint, f"baseline {self.method}")
        acc.wait_for_everyone()
        self.model.train()
        while self.step < total:
            loss = self.loss(self.draw(self.rng))
            self.opt.zero_grad(set_to_none=True)
            acc.backward(loss)
            norm = acc.clip_grad_norm_(self.model.parameters(), self.cfg.max_grad_norm)
            if self._finite_everywhere(loss, norm):
                self.opt.step()
            else:
                self.nonfinite_steps += 1
                self.opt.zero_grad(set_to_none=True)
                log.warning("%s step %d: non-finite loss or gradient norm, update skipped",
                            self.method, self.step + 1)  # fmt: skip
            lr = self.scheduler.get_last_lr()[0]
            self.scheduler.step()
            self.step += 1
            self.history.append(float(loss.detach()))
            if self.step % 10 == 1 or self.step == total:
                log_metrics(acc, {"loss": self.history[-1], "lr": lr}, self.step)
                log.info("%s step %d/%d loss %.4f", self.method, self.step, total,
                         self.history[-1])  # fmt: skip
            if self.cfg.save_every and self.step % self.cfg.save_every == 0:
                self.save_checkpoint()
        if self.nonfinite_steps:
            log.warning("%s: %d of %d steps skipped (non-finite loss or gradient)",
                        self.method, self.nonfinite_steps, self.step)  # fmt: skip
        return self.history

    def _finite_everywhere(self, loss: Tensor, norm: Any) -> bool:
        ok = all_finite(loss, norm)
        if self.accelerator.num_processes > 1:  # the same decision on every process
            flag = torch.tensor([0.0 if ok else 1.0], device=self.accelerator.device)
            ok = float(self.accelerator.reduce(flag, reduction="sum").item()) == 0.0
        return ok

    def finalize(self, meta: dict[str, Any] | None = None) -> Path:
        """Merge LoRA into the base model, write the loadable baseline folder ``output_dir``
        (``meta`` joins ``lira_baseline.json``; the run fingerprint included) and end the
        trackers; returns that folder. The trained backbone is :attr:`backbone` (eval mode)."""
        bb = self.accelerator.unwrap_model(self.model)
        if self.cfg.lora and hasattr(bb.model, "merge_and_unload"):
            bb.model = bb.model.merge_and_unload()
        self.backbone = bb.eval()
        self.accelerator.wait_for_everyone()
        if self.accelerator.is_main_process:
            info = {"method": self.method, "steps": len(self.history), **(meta or {})}
            save_baseline(self.backbone, self.output_dir, self.models_cfg, info, self.fingerprint)
        self.accelerator.wait_for_everyone()
        finish_trackers(self.accelerator)  # not end_training: the next method needs the group
        return self.output_dir

    # ------------------------------------------------------------------------ checkpoints
    def _trainable(self) -> dict[str, Tensor]:
        bb = self.accelerator.unwrap_model(self.model)
        return {n: p for n, p in bb.named_parameters() if p.requires_grad}

    def save_checkpoint(self) -> Path | None:
        """Atomic ``<output_dir>-checkpoints/step-XXXXXXXX`` with everything an exact resume
        needs: trainable weights, optimizer, schedule, batch and torch RNG states, history."""
        path = step_dir(self.checkpoint_dir, self.step)
        self.accelerator.wait_for_everyone()
        if not self.accelerator.is_main_process:
            return None
        with atomic_dir(path) as tmp:
            state = {
                "step": self.step,
                "params": {n: p.detach() for n, p in self._trainable().items()},
                "optimizer": self.opt.state_dict(),
                "scheduler": self.scheduler.state_dict(),
                "batch_rng": self.rng.getstate(),
                "rng": rng_state(),
                "history": self.history,
                "nonfinite_steps": self.nonfinite_steps,
            }
            save_state(tmp, state)  # safetensors + JSON: nothing in it can run code
            write_fingerprint(tmp, self.fingerprint)
        prune_checkpoints(self.checkpoint_dir, self.keep_checkpoints, protect=path)
        log.info("%s: checkpoint %s", self.method, path)
        return path

    def resume(self) -> bool:
        """Load the latest intact checkpoint under :attr:`checkpoint_dir` (False if there is
        none); one of another config (fingerprint) or past the recipe's steps is refused."""
        last = latest_checkpoint(self.checkpoint_dir)
        what = f"baseline {self.method}"
        if last is None:
            log.info("%s: --resume given but no checkpoint in %s; starting fresh", what,
                     self.checkpoint_dir)  # fmt: skip
            return False
        check_fingerprint(last, self.fingerprint, what)
        if (step_of(last) or 0) > self.recipe.steps:
            raise CheckpointError(
                f"cannot resume {what} from {last}: it is past its {self.recipe.steps} steps; "
                "run without --resume to start over"
            )
        state = load_state(last)
        try:
            params = self._trainable()
            if set(state["params"]) != set(params):
                raise ValueError("its trainable parameters differ from this model's")
            with torch.no_grad():
                for n, p in params.items():
                    p.copy_(state["params"][n])
            self.opt.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
            self.rng.setstate(state["batch_rng"])
            set_rng_state(state["rng"])
            self.step, self.history = int(state["step"]), [float(v) for v in state["history"]]
            self.nonfinite_steps = int(state["nonfinite_steps"])
        except (KeyError, TypeError, ValueError, RuntimeError) as e:
            raise state_mismatch(last, what, e) from None
        self._resumed = True
        log.info("%s: resumed from %s (step %d)", what, last, self.step)
        return True


# ----------------------------------------------------------------------------- checkpoints
def save_baseline(
    backbone: nn.Module,
    path: str | Path,
    mcfg: ModelsConfig,
    meta: dict,
    fingerprint: dict[str, Any] | None = None,
) -> Path:
    """Write a loadable HF folder: config + safetensors + tokenizer + lira_baseline.json (+ the
    run fingerprint that ``--resume`` checks, see :func:`baseline_fingerprint`)."""
    with atomic_dir(path) as tmp:
        if fingerprint is not None:
            write_fingerprint(tmp, fingerprint)
        backbone.model.save_pretrained(str(tmp), safe_serialization=True)
        backbone.tokenizer.save_pretrained(str(tmp))
        info = {
            "pooling": mcfg.backbone_pooling,
            "query_prompt": mcfg.query_prompt,
            "document_prompt": mcfg.document_prompt,
            "max_length": mcfg.backbone_max_length,
            "dtype": mcfg.dtype,
            "base": mcfg.backbone,
            **meta,
        }
        (tmp / META_FILE).write_text(json.dumps(info, indent=2), encoding="utf-8")
        write_sentence_transformers_modules(tmp, backbone.dim, mcfg)
    return Path(path)


ST_POOLING = {"mean": "mean", "cls": "cls", "last": "lasttoken"}
"""Our ``models.backbone_pooling`` names -> sentence-transformers' ``Pooling`` modes."""


def write_sentence_transformers_modules(folder: Path, dim: int, mcfg: ModelsConfig) -> None:
    """Make a saved HF folder an ordinary sentence-transformers model (same pooling, prompts).

    ``SentenceTransformer(folder)`` then embeds as :func:`load_baseline` does: Transformer
    (truncation at ``backbone_max_length``) -> Pooling -> Normalize, with the query/document
    prompts as its ``prompts`` (``encode(..., prompt_name="query")``).
    """
    from sentence_transformers.models import Normalize, Pooling, Transformer

    # the Transformer module is the HF folder itself (path ""); the other two get sub-folders
    for sub, module in (("1_Pooling", Pooling(dim, ST_POOLING[mcfg.backbone_pooling])),
                        ("2_Normalize", Normalize())):  # fmt: skip
        (folder / sub).mkdir()
        module.save(str(folder / sub))
    layout = (("", Transformer), ("1_Pooling", Pooling), ("2_Normalize", Normalize))
    modules = [{"idx": i, "name": str(i), "path": sub, "type": f"{c.__module__}.{c.__name__}"}
               for i, (sub, c) in enumerate(layout)]  # fmt: skip
    files = {
        "modules.json": modules,
        "sentence_bert_config.json": {"max_seq_length": mcfg.backbone_max_length,
                                      "do_lower_case": False},
        "config_sentence_transformers.json": {
            "prompts": {"query": mcfg.query_prompt, "document": mcfg.document_prompt},
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
    }  # fmt: skip
    for name, content in files.items():
        (folder / name).write_text(json.dumps(content, indent=2), encoding="utf-8")


def baseline_models_config(path: str | Path) -> ModelsConfig:
    """The ModelsConfig that loads a saved baseline folder as the backbone."""
    path = Path(path)
    meta_file = path / META_FILE
    if not meta_file.is_file():
        raise FileNotFoundError(f"{path} has no {META_FILE}: not a saved lira baseline folder")
    meta = json.loads(meta_file.read_text(encoding="utf-8"))
    return ModelsConfig(
        backbone=str(path),
        backbone_pooling=meta["pooling"],
        query_prompt=meta["query_prompt"],
        document_prompt=meta["document_prompt"],
        backbone_max_length=int(meta["max_length"]),
        dtype=meta.get("dtype", "float32"),
    )


def load_baseline(path: str | Path) -> nn.Module:
    """Load a saved baseline as a Backbone (satisfies the ``encode(texts, langs, kind)`` protocol)."""

    return load_backbone(baseline_models_config(path))


# ----------------------------------------------------------------------------------- engine
def _splits(cfg: BaselinesRun) -> tuple[ParallelData, RetrievalData, XQuADR | None]:

    splits = load_splits(cfg.data)
    parallel = getattr(splits, "train_parallel", None)
    retrieval = getattr(splits, "train_retrieval", None) or getattr(splits, "train", None)
    if parallel is None or retrieval is None:
        raise ValueError(
            f"data.format={cfg.data.format} gives no parallel training questions; the baselines "
            "need parallel data (English + training languages), e.g. data.format=xquad_r"
        )
    return parallel, retrieval, getattr(splits, "dataset", None)


def fixed_batches(trainer: ContrastiveTrainer, seed: int, n: int = 2) -> list[dict[str, Any]]:
    """The ``n`` batches a method's loss is measured on before and after training."""
    rng = random.Random(seed + 10_007)
    return [trainer.draw(rng) for _ in range(n)]


def train_stats(
    trainer: ContrastiveTrainer, before: float, after: float, out: Path
) -> dict[str, Any]:
    """A trained method's entry in ``summary.json``."""
    h = trainer.history
    return {
        "loss_before": before, "loss_after": after, "steps": len(h), "path": str(out),
        "recipe": asdict(trainer.recipe),
        "train_loss_first": h[0] if h else None, "train_loss_last": h[-1] if h else None,
        "nonfinite_steps": trainer.nonfinite_steps,
    }  # fmt: skip


def baseline_fingerprint(cfg: BaselinesRun, method: str) -> dict[str, Any]:
    """The config values that shape ``method``'s model: ``models.*`` (less cache settings),
    ``data.*``, the shared budget / seed / LoRA fields, the method's own recipe fields
    (``baselines.<recipe>.*``) and the fields of the negatives it mines (CLEAR's for InfoNCE,
    CLEAR and LANCER). Recipe fields keep their flat names (``baselines.clear_lr``), so the
    fingerprints of earlier runs still match."""
    bc = cfg.baselines
    spec = get_method(method)
    keep = {k: v for k, v in asdict(bc).items() if k not in ("methods", "recipes")}
    own = spec.recipe_section()
    if own:
        keep.update(flat_recipe(bc, own))
    for kind in spec.negatives:
        _, section, keys = NEGATIVES[kind]
        keep.update(flat_recipe(bc, section, keys))
    sections = {"models": models_fields(cfg), "data": cfg.data, "baselines": keep}
    return run_fingerprint(f"baseline {method}", sections, BASELINE_UNSHAPING)


def train_method(
    cfg: BaselinesRun,
    method: str,
    examples: list[TrainExample],
    corpus: list[Any],
    dataset: XQuADR | None,
    out: Path,
    resume: bool = False,
) -> dict[str, Any]:
    """Fine-tune a fresh backbone with ``method`` and save it under ``out``; returns its stats
    (``resume``: continue from its latest step checkpoint, see ``baselines.save_every``)."""
    from accelerate.utils import set_seed

    spec = get_method(method)
    if spec.own_loop:
        return spec.train(cfg, examples, corpus, dataset, out)
    bc = cfg.baselines
    t0 = time.perf_counter()
    set_seed(bc.seed)
    extra = spec.prepare(cfg, examples, corpus, dataset)
    backbone = load_backbone(cfg.models)
    trainer = ContrastiveTrainer(bc, backbone, method, examples, corpus, out,
                                 models_cfg=cfg.models,
                                 fingerprint=baseline_fingerprint(cfg, method), **extra)  # fmt: skip
    fixed = fixed_batches(trainer, bc.seed)
    before = trainer.measure(fixed)  # the initial weights (a resume loads its checkpoint later)
    trainer.train(resume=resume)
    after = trainer.measure(fixed)
    trainer.finalize()
    stats = train_stats(trainer, before, after, out)
    stats["seconds"] = round(time.perf_counter() - t0, 2)
    log.info("baseline %s: loss %.4f -> %.4f", method, before, after)
    return stats


def run_baselines(cfg: BaselinesRun, args: Any = None) -> dict[str, Any]:
    """Engine of ``lira baseline``: train each method, save it, write ``baselines/summary.json``."""

    methods = list(getattr(args, "methods", None) or cfg.baselines.methods)
    known = method_names()
    bad = [m for m in methods if m not in known]
    if bad:
        raise ValueError(f"unknown baseline methods {bad}; choose from {known}")
    root = Path(cfg.output_dir) / "baselines"
    root.mkdir(parents=True, exist_ok=True)
    summary_path = root / "summary.json"
    summary: dict[str, Any] = {}
    if summary_path.is_file():
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    todo = methods
    if getattr(args, "resume", False):
        todo = [m for m in methods if not ((root / m / META_FILE).is_file() and m in summary)]
        for m in sorted(set(methods) - set(todo)):
            # a model trained with another config is not "done": refuse rather than keep it
            check_fingerprint(root / m, baseline_fingerprint(cfg, m), f"baseline {m}")
            log.info("baseline %s already trained at %s (resume): skipped", m, root / m)
    if not todo:
        return summary
    parallel, retrieval, dataset = _splits(cfg)
    examples = build_examples(parallel, retrieval, dataset)
    corpus = list(retrieval.corpus)
    bc = cfg.baselines
    wanted = {kind for m in todo for kind in get_method(m).negatives}
    if not bc.recipe_of("clear", ClearConfig).negatives:
        wanted.discard("clear")  # CLEAR's K = 0: nothing to mine
    if wanted:
        # the initial model (CLEAR §4.1), on CUDA when available like the trained one
        miner = load_backbone(cfg.models, device=resolve_device()).eval()
        for kind, (mine, _, _) in NEGATIVES.items():
            if kind in wanted:
                mine(miner, examples, corpus, bc)
        del miner
    for method in todo:
        resume = bool(getattr(args, "resume", False))
        summary[method] = train_method(cfg, method, examples, corpus, dataset, root / method,
                                       resume=resume)  # fmt: skip
        summary["_data"] = {"examples": len(examples), "corpus": len(corpus)}
        write_json(summary_path, summary)
    return summary
