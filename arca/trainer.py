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

Table 5 ablations (:func:`arca.losses.arca_reward`, :meth:`arca.model.ArcaModel.features`):
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

Data order: :class:`arca.data.DataOrder` (a function of the step, so ``--resume`` continues
exactly). Learning rates are constant (the paper names no schedule): there is no scheduler state.

Checkpoints (the :class:`lira.training.Trainer` template): ``<out>/step-XXXXXXXX/`` (atomic) =
the ArcaModel folder (see :mod:`arca.model`) + ``trainer_state.{safetensors,json}`` (no pickle:
optimizers, step, EMA baseline, counters, selection totals, history, the RNG states of every
process) + ``run_fingerprint.json`` (the config values that shape training,
:func:`arca.config.arca_fingerprint`); ``<out>/final/`` = the model folder + ``metrics.json``
(:meth:`ArcaTrainer.finalize`, which ``train`` calls once ``arca.steps`` are done). The last
``keep_checkpoints`` step folders are kept. ``--resume`` refuses a checkpoint written with
another fingerprint (naming the changed keys) or past ``arca.steps``; a fresh run removes the
step folders a previous run left and starts ``log.jsonl`` anew; a resumed one drops the log rows
past its checkpoint's step. Held-out metrics: :mod:`arca.metrics`; the engine: :mod:`arca.engine`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import DistributedDataParallelKwargs
from torch import Tensor

from arca.candidates import pad_candidates
from arca.config import ARCA_UNSHAPING, ArcaConfig
from arca.data import (
    ArcaItem,
    CandidateFn,
    DataOrder,
    clean_items,
    fetch_candidates,
    rounded,
    usable_items,
)
from arca.losses import (
    actor_agreement,
    anchor_terms,
    arca_loss,
    arca_reward,
    epsilon1,
    reinforce_loss,
    reward_baseline,
)
from arca.metrics import append_log, backbone_epsilon2, evaluate_items, trim_log
from arca.model import ArcaModel
from arca.trainable import check_encoder_training, trainable_groups
from lira.accelerator import finish_trackers, log_metrics, make_accelerator
from lira.training import (
    CheckpointError,
    Trainer,
    TrainerState,
    atomic_dir,
    dumps_json,
    rng_state,
    set_rng_state,
)
from lira.translation.types import Candidate

log = logging.getLogger(__name__)

Stats = dict[str, Tensor | list[str]]
"""One micro-batch's detached loss terms (and the translators it picked)."""


class ArcaTrainer(Trainer):
    """The Arca loop on the :class:`lira.training.Trainer` template: optimisers, accelerate,
    logging, checkpoints and resume."""

    section = "arca"
    unshaping = ARCA_UNSHAPING
    steps_key = "arca.steps"

    def __init__(
        self,
        cfg: ArcaConfig,
        model: ArcaModel,
        items: Sequence[ArcaItem],
        output_dir: str | Path,
        eval_items: Sequence[ArcaItem] | None = None,
        candidate_fn: CandidateFn | None = None,
        accelerator: Accelerator | None = None,
        eval_candidate_fn: CandidateFn | None = None,
        keep_checkpoints: int = 2,
        fingerprint: dict[str, object] | None = None,
        distill_texts: Sequence[str] = (),
    ) -> None:
        self.cfg: ArcaConfig = cfg
        self.output_dir = Path(output_dir)
        self.candidate_fn = candidate_fn
        self.eval_candidate_fn = eval_candidate_fn or candidate_fn
        accelerator = accelerator or make_accelerator(
            "arca",
            cfg.report_to,
            output_dir,
            mixed_precision=cfg.mixed_precision,
            kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=False)],
        )
        super().__init__(cfg, accelerator, output_dir, "Arca", fingerprint, keep_checkpoints)
        self.replay_eval = False
        """True when a fresh run evaluated ``eval_items`` before training (``lira arca``
        does): a resume then replays that evaluation's target memo fill first."""
        check_encoder_training(model.encoder, cfg)
        self.items, self.counters = usable_items(items, candidate_fn)
        self.eval_items = clean_items(eval_items or [])[0]
        acc = self.accelerator
        groups = trainable_groups(model, cfg, acc.device)
        self.model = model
        self.net = acc.prepare(model)
        self.opt_names = [g[0] for g in groups]
        opts = [torch.optim.Adam(g[1], lr=g[2]) for g in groups]
        self.optimizers = list(acc.prepare(*opts)) if len(opts) > 1 else [acc.prepare(opts[0])]
        self.params = [p for g in groups for p in g[1]]
        self.ema: float | None = None
        self.selection: Counter[str] = Counter()
        self._local_selection: Counter[str] = Counter()
        self._summary: dict[str, object] = {}
        self.order = DataOrder(len(self.items), cfg.seed, cfg.batch_size, cfg.grad_accum,
                               self.world, acc.process_index)  # fmt: skip
        self.distill_texts = list(distill_texts)
        """Extra English texts of ``objective: distill`` (the corpus): each micro-batch distils
        ``batch_size`` of them, in order, beside its candidates."""

    # ------------------------------------------------------------------ one step
    def batch_items(self, step: int, micro: int) -> list[ArcaItem]:
        """This process's sources of micro-batch ``micro`` of optimisation step ``step``."""
        return [self.items[i] for i in self.order.indices(step, micro)]

    def distill_batch(self, cand_texts: list[str], micro: int) -> list[str] | None:
        """The English texts a micro-batch distils (objective distill, gradient): its candidates
        and the next ``batch_size`` of :attr:`distill_texts`; None for other objectives."""
        if self.cfg.objective != "distill" or self.cfg.distill_solver != "gradient":
            return None
        extra = self.order.cycle(self.distill_texts, self.step, micro)
        return list(dict.fromkeys([*cand_texts, *extra]))

    def _micro_loss(
        self,
        items: list[ArcaItem],
        cands: list[list[Candidate]],
        diagnostics: bool,
        micro: int = 0,
    ) -> tuple[Tensor, Stats]:
        acc, cfg, model = self.accelerator, self.cfg, self.model
        texts = [it.source for it in items]
        scores, mask, cand_texts, slot = pad_candidates(cands)
        guards = model.nan_guards
        en_inputs = model.english_inputs(cand_texts)  # [N, D] targets or [N, S, d_h], no grad
        english = self.distill_batch(cand_texts, micro)
        with acc.autocast():
            out = self.net(texts, en_inputs, scores, mask, slot, english)
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
        e_distill = targets = None
        if english is not None:  # objective distill, gradient solver
            e_distill, targets = out["e_distill"].float(), model.english_targets(english).float()
        l_anchor, l_contrast = anchor_terms(cfg, e_lr, e_sel, e_distill, targets)
        eta = cfg.eta if cfg.use_embedding_critic else 0.0  # no embedding critic: no L_anchor
        loss = arca_loss(l_rl, l_anchor + cfg.anchor_contrast * l_contrast, eta)
        picked = [cands[b][int(a)] for b, a in enumerate(actions.tolist())]
        stats: Stats = {
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
            stats["eps2"] = backbone_epsilon2(
                model.backbone, texts, [c.text for c in picked], acc.device
            )
        self.counters["nan_guards"] += model.nan_guards - guards
        return loss, stats

    def train_step(self) -> dict[str, object] | None:
        """One optimisation step (grad_accum micro-batches); None when it was skipped."""
        acc, cfg = self.accelerator, self.cfg
        self.net.train()
        diagnostics = (self.step + 1) % cfg.log_every == 0
        batches = []
        for m in range(cfg.grad_accum):
            items = self.batch_items(self.step, m)
            cands = fetch_candidates(items, self.candidate_fn)
            keep = [i for i, c in enumerate(cands) if c]
            self.counters["skipped_sources"] += len(items) - len(keep)
            batches.append(([items[i] for i in keep], [cands[i] for i in keep]))
        empty = [self.any_process(not b[0]) for b in batches]  # same decision on every process
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
                loss, stats = self._micro_loss(items, cands, diagnostics and sync, i)
                acc.backward(loss / len(live))
            stats_all.append(stats)
        norm = self.clip_and_step(self.params, self.optimizers)
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=True)
        self.step += 1
        return self._record(stats_all, float("nan") if norm is None else float(norm))

    def _record(self, stats_all: list[Stats], grad_norm: float) -> dict[str, object]:
        """The step's logged row: the mean terms over micro-batches and processes."""
        keys = ["loss", "l_rl", "l_anchor", "l_contrast", "reward", "cos", "eps1", "entropy",
                "actor_agreement"]  # fmt: skip
        local = torch.stack([torch.stack([s[k].float() for k in keys]) for s in stats_all]).mean(0)
        mean = self.accelerator.reduce(local.to(self.accelerator.device), reduction="mean")
        row: dict[str, object] = {"step": self.step}
        row.update({k: float(v) for k, v in zip(keys, mean.tolist())})
        row["grad_norm"] = grad_norm
        if "eps2" in stats_all[-1]:
            e2 = self.accelerator.reduce(stats_all[-1]["eps2"].reshape(1), reduction="mean")
            row["eps2"] = float(e2.item())
        for s in stats_all:
            self._local_selection.update(s["picked"])
        if self.cfg.reward_baseline == "ema":
            d = self.cfg.ema_decay
            r = float(row["reward"])
            self.ema = r if self.ema is None else d * self.ema + (1 - d) * r
        self.history.append(row)
        if self.step % self.cfg.log_every == 0:
            self._merge_selection()
            row["selection"] = self.selection_share()
            log_metrics(self.accelerator, row, self.step)
            if self.accelerator.is_main_process:
                log.info("Arca %s", json.dumps(rounded(row)))
                append_log(self.output_dir / "log.jsonl", {**row, "counters": dict(self.counters)})
        return row

    def _merge_selection(self) -> None:
        """Add every process's picks since the last merge to :attr:`selection`."""
        for p in self.gather(dict(self._local_selection)):
            self.selection.update(p)
        self._local_selection.clear()

    def selection_share(self) -> dict[str, float]:
        """Share of sampled candidates per translator so far (all processes)."""
        total = sum(self.selection.values())
        return {k: v / total for k, v in sorted(self.selection.items())} if total else {}

    # ------------------------------------------------------------------ loop hooks
    @property
    def nonfinite_steps(self) -> int:
        """Steps skipped for a non-finite gradient norm (``counters["nonfinite_steps"]``)."""
        return self.counters["nonfinite_steps"]

    @nonfinite_steps.setter
    def nonfinite_steps(self, n: int) -> None:
        self.counters["nonfinite_steps"] = n

    def save_due(self, total: int) -> bool:
        """Every ``save_every`` steps and at ``arca.steps``."""
        return self.step % self.cfg.save_every == 0 or self.step == self.cfg.steps

    def before_loop(self, total: int) -> None:
        """Trim ``log.jsonl`` to the steps done; start the clock."""
        if self.accelerator.is_main_process:
            trim_log(self.output_dir / "log.jsonl", self.step)
        self._start = time.perf_counter()

    def after_loop(self, total: int) -> None:
        """The run summary; at ``arca.steps``: the held-out evaluation and :meth:`finalize`."""
        self._merge_selection()
        self._summary = {
            "step": self.step,
            "seconds": round(time.perf_counter() - self._start, 2),
            "counters": dict(self.counters),
            "selection": self.selection_share(),
            "last": self.history[-1] if self.history else {},
        }
        if self.step >= self.cfg.steps:
            if self.eval_items:
                self._summary["eval"] = self.evaluate(self.eval_items)
            self.finalize()

    def summary(self) -> dict[str, object]:
        """The run summary of the last ``train`` (written to ``final/metrics.json``)."""
        return self._summary

    @torch.no_grad()
    def evaluate(
        self, items: Sequence[ArcaItem], batch_size: int | None = None
    ) -> dict[str, object]:
        """Arg-max candidate metrics on held-out sources (:func:`arca.metrics.evaluate_items`),
        ``batch_size`` sources per forward (default ``arca.eval_batch_size``), each evaluated by
        one process (a collective call under a launcher)."""
        bs = batch_size or self.cfg.eval_batch_size
        fn = self.eval_candidate_fn
        return evaluate_items(self.model, items, fn, bs, self.accelerator.device,
                              across_processes=True)  # fmt: skip

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_state(self) -> TrainerState:
        """Optimizers, step, EMA baseline, counters, selection, history, every process's RNG."""
        self._merge_selection()
        rngs = self.rank_states(rng_state())
        return {
            "step": self.step,
            "ema": self.ema,
            "counters": dict(self.counters),
            "selection": dict(self.selection),
            "history": self.history,
            "optimizers": {n: o.state_dict() for n, o in zip(self.opt_names, self.optimizers)},
            "world": self.world,
            "rngs": rngs,
        }

    def save_files(self, folder: Path) -> None:
        """The ArcaModel folder beside the trainer state."""
        self.model.save_pretrained(folder)

    def load_checkpoint_state(self, folder: Path, state: TrainerState) -> None:
        """Restore weights, optimizers, step (= data position), EMA, counters and RNG (the base
        then replays the target memo: :meth:`after_resume`)."""
        try:
            optimizers, rngs = state["optimizers"], state["rngs"]
            step, ema = int(state["step"]), state["ema"]
            counters, selection = dict(state["counters"]), Counter(state["selection"])
            history = list(state["history"])
            missing = [n for n in self.opt_names if n not in optimizers]
        except (KeyError, TypeError, ValueError) as e:
            raise CheckpointError(
                f"{folder}: the Arca trainer state is incomplete ({type(e).__name__}: {e}); "
                "delete this checkpoint to resume from the previous one, or run without --resume"
            ) from None
        if missing or not rngs:
            raise CheckpointError(
                f"{folder}: the Arca trainer state has no state for {missing or 'the RNGs'}; it "
                "was written by another trainer setup; run without --resume to start over"
            )
        self.model.load_weights(folder)
        for name, opt in zip(self.opt_names, self.optimizers):
            opt.load_state_dict(optimizers[name])
        self.step = step
        self.ema = ema
        self.counters.update(counters)
        self.selection = selection
        self._local_selection.clear()
        self.history = history
        set_rng_state(self.own_rank_state(rngs))

    def after_resume(self) -> None:
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
                    cands = [
                        c for c in fetch_candidates(self.batch_items(t, m), self.candidate_fn) if c
                    ]
                    batches.append(cands)
                empty = [self.any_process(not b) for b in batches]  # as train_step decides
                for cands, e in zip(batches, empty):
                    if not e:
                        model.english_inputs(pad_candidates(cands)[2])
        finally:
            set_rng_state(state)

    def finalize(self) -> Path:
        """Write ``<out>/final`` (the loadable Arca folder + metrics.json: the run summary),
        end the trackers; returns that folder."""
        final = self.output_dir / "final"
        if self.accelerator.is_main_process:
            with atomic_dir(final) as tmp:
                self.model.save_pretrained(tmp)
                text = dumps_json(rounded(self._summary))
                (tmp / "metrics.json").write_text(text, encoding="utf-8")
        self.accelerator.wait_for_everyone()
        finish_trackers(self.accelerator)  # the process group lives on (lira run's next stages)
        return final
