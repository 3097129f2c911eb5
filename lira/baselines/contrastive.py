"""One contrastive trainer for every baseline (``lira baseline CONFIG [--methods ...]``).

Every method fine-tunes the same backbone (``lira.models.load_backbone``; full fine-tuning or
LoRA via peft, merged back before saving) on the same training split. Each method trains with
its paper's recipe (``cfg.baselines.<method>_*``: AdamW rate, batch size, epochs, schedule and
warm-up, weight decay, temperature); ``cfg.baselines.steps`` / ``batch_size`` / ``lr`` > 0 is a
shared budget that overrides them for every method. The recipe in force is logged and written
to ``<output_dir>/baselines/summary.json``.

The methods are registered in :mod:`lira.baselines.registry` (name -> method object; the
list and the papers' departures are in :mod:`lira.baselines`); each method's file defines its
object (:class:`~lira.baselines.method.BaselineMethod`: recipe, the data and negatives it
needs, its batches and its loss), and this trainer runs every one.

The training examples, mined negatives and recipes are in :mod:`lira.baselines.data`
(``train_parallel``, ``train_retrieval`` and the XQuAD-R ``dataset`` of
``lira.data.splits.load_splits(cfg.data)``), the saved folders in :mod:`lira.baselines.export`.

:class:`ContrastiveTrainer` is a :class:`lira.training.Trainer` (its loop, checkpoints and
non-finite step skipping; ``train(resume=False)``, ``finalize()``, ``baselines.max_grad_norm``,
``baselines.report_to``) whose step draws a method's batch and loss (CLEAR, LANCER and JSD need
several encodings per step and extra batches); its AdamW is torch's fused (or foreach) kernel.
Each method's loss is measured before and after training on the same fixed batches in eval
mode. The final models are HF folders (config + safetensors + tokenizer +
``lira_baseline.json`` holding pooling and prompts), written atomically and loadable with
:func:`~lira.baselines.export.load_baseline`; each also holds the run fingerprint
(:func:`~lira.baselines.export.baseline_fingerprint`): ``--resume`` skips a finished method
only when its fingerprint matches the config and refuses otherwise, and continues an
unfinished one from its latest ``<method>-checkpoints/step-*`` (written every
``baselines.save_every`` steps; 0 = none). A step whose loss or gradient norm is not finite is
skipped and counted (``nonfinite_steps`` in ``summary.json``).
"""

from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import asdict
from pathlib import Path

import torch
from accelerate import Accelerator, PartialState
from accelerate.utils import set_seed
from torch import Tensor, nn

from lira.accelerator import (
    adamw_kwargs,
    distributed_cpu,
    finish_trackers,
    log_metrics,
    make_accelerator,
)
from lira.baselines.clear import ClearConfig
from lira.baselines.composition import CompositionExample
from lira.baselines.config import BaselinesConfig, BaselinesRun, flat_baselines
from lira.baselines.data import (
    NEGATIVES,
    TrainExample,
    make_scheduler,
    recipe,
)
from lira.baselines.export import BASELINE_UNSHAPING, baseline_fingerprint, save_baseline
from lira.baselines.method import BaselineMethod, Batch
from lira.baselines.registry import get_method, method_names
from lira.config import ConfigError, ModelsConfig
from lira.data.types import Record
from lira.data.xquad_r import XQuADR
from lira.models import load_backbone, torch_dtype
from lira.models.devices import release_memory, resolve_device
from lira.training import (
    CheckpointError,
    Trainer,
    TrainerState,
    rng_state,
    run_fingerprint,
    set_rng_state,
)

log = logging.getLogger(__name__)

MIXED_PRECISION = {"bfloat16": "bf16", "float16": "fp16"}
"""accelerate's autocast for ``models.dtype``: the trainable weights stay fp32 (master
weights, updated by AdamW in fp32) and the forward runs in the configured dtype."""


def enable_activation_checkpointing(model: torch.nn.Module) -> None:
    """Recompute ``model``'s layers in the backward pass (non-reentrant, so a LoRA model's
    frozen inputs need no ``requires_grad``): ``activation_checkpointing_enable`` where
    transformers has it (5.24 here), else ``gradient_checkpointing_enable`` (4.56-5.2x)."""
    enable = getattr(model, "activation_checkpointing_enable", None)
    if enable is not None:
        enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


class ContrastiveTrainer(Trainer):
    """Fine-tunes a backbone with one baseline objective and its paper's recipe.

    The :class:`lira.training.Trainer` contract: ``ContrastiveTrainer(cfg, model, method,
    examples, corpus, output_dir, models_cfg=...)``; :meth:`train` runs to the recipe's steps
    (with ``resume``, from the latest intact ``<output_dir>-checkpoints/step-*`` written every
    ``cfg.save_every`` steps; one of another config is refused); :meth:`finalize` writes the
    loadable baseline folder ``output_dir`` (``meta`` joins its ``lira_baseline.json``) and
    returns it (the trained backbone stays in :attr:`backbone`). Gradients are clipped at
    ``cfg.max_grad_norm``; ``cfg.report_to`` sends the loss and learning rate to an accelerate
    tracker.

    ``method`` names a registered method (:mod:`lira.baselines.registry`) whose objective this
    loop trains (every one but merging, which trains :data:`~lira.baselines.merging.GIST`
    parts with this class and averages them) or an inner objective such as ``gist`` (one
    merging part: it needs ``composition`` examples and a frozen ``guide``). The method's hooks
    check the data, pick the rows, draw the batches and compute the loss; this class owns the
    model, the optimizer and the schedule. Keyword arguments beyond the named ones (a method's
    :meth:`prepare` output) are kept in ``data``.
    """

    section = "baselines"
    unshaping = BASELINE_UNSHAPING

    def __init__(
        self,
        cfg: BaselinesConfig,
        model: nn.Module,
        method: str,
        examples: list[TrainExample],
        corpus: list[Record],
        output_dir: str | Path,
        *,
        models_cfg: ModelsConfig,
        multilingual: dict[str, list[str]] | None = None,
        composition: list[CompositionExample] | None = None,
        guide: nn.Module | None = None,
        accelerator: Accelerator | None = None,
        fingerprint: dict[str, object] | None = None,
        keep_checkpoints: int = 2,
        meta: dict[str, object] | None = None,
        **data: object,
    ) -> None:
        choices = [n for n in method_names() if not get_method(n).own_loop] + ["gist"]
        try:
            spec = get_method(method, parts=True)
        except ValueError:
            spec = None
        if spec is None or spec.own_loop:
            raise ValueError(f"unknown method '{method}'; choose from {tuple(choices)}")
        self.spec: BaselineMethod = spec
        self.cfg: BaselinesConfig = cfg
        self.method = method
        self.output_dir = Path(output_dir)
        """The final baseline folder :meth:`finalize` writes."""
        self.models_cfg = models_cfg
        self.meta = dict(meta or {})
        """What joins ``lira_baseline.json`` beside the method and its steps."""
        self.examples, self.corpus = examples, corpus
        self.multilingual = multilingual or {}
        self.composition, self.guide = composition, guide
        self.data = data
        spec.check(self)
        self.rows = spec.rows(self)
        ids = dict.fromkeys([r.id for r in corpus] + [e.pos_id for e in examples])
        self.doc_index = {d: i for i, d in enumerate(ids)}
        self.corpus_key = [self.doc_index[r.id] for r in corpus]
        # the tracker logs go next to the final folder: finalize replaces that folder whole
        accelerator = accelerator or make_accelerator(
            "baselines", cfg.report_to, self.output_dir.parent,
            mixed_precision=MIXED_PRECISION.get(models_cfg.dtype, "no"),
            run_name=f"baselines-{self.output_dir.name}",
        )  # fmt: skip
        world = accelerator.num_processes
        self.recipe = recipe(cfg, spec, self.n_rows(), world)
        r = self.recipe
        if r.batch_size % world:
            key = (
                "baselines.batch_size"
                if cfg.batch_size
                else f"baselines.{spec.recipe_section()}.batch_size"
            )
            raise ConfigError(key, f"the global batch of {r.batch_size} does not split over "
                              f"{world} processes; set a multiple of {world}")  # fmt: skip
        log.info("%s recipe: %s (global batch; %d per process)", method, json.dumps(asdict(r)),
                 r.batch_size // world)  # fmt: skip
        checkpoints = self.output_dir.with_name(self.output_dir.name + "-checkpoints")
        what = f"baseline {method}"  # fingerprinted by flat names (baselines.clear_tau)
        fingerprint = fingerprint or run_fingerprint(
            what, {"baselines": flat_baselines(cfg)}, self.unshaping
        )
        super().__init__(cfg, accelerator, checkpoints, what, fingerprint, keep_checkpoints)
        self.checkpoint_dir = checkpoints
        """Where the ``step-*`` checkpoints go (``cfg.save_every`` > 0)."""
        self.backbone = model
        if cfg.lora:
            self._apply_lora()
        if cfg.gradient_checkpointing:
            enable_activation_checkpointing(self.backbone.model)
        for name, p in model.named_parameters():
            if ".pooler." in name:  # HF's pooler head: LiRA pools last_hidden_state itself
                p.requires_grad_(False)  # untrained either way; under DDP a never-used weight
        params = [p for p in model.parameters() if p.requires_grad]
        for p in params:  # fp32 master weights: a bf16 AdamW update loses steps below 2^-8·|w|
            p.data = p.data.float()
        opt = torch.optim.AdamW(params, lr=r.lr, betas=(0.9, r.beta2), weight_decay=r.weight_decay,
                                **adamw_kwargs(self.accelerator.device))  # fmt: skip
        self.model, self.opt = self.accelerator.prepare(model, opt)
        self.scheduler = make_scheduler(self.opt, r)
        if self.guide is not None:
            self.guide.to(self.accelerator.device).eval().requires_grad_(False)
        self.objective = spec.setup(self)
        """The method's loss module(s) (:meth:`BaselineMethod.setup`)."""
        self.rng = random.Random(cfg.seed)
        """Draws the global batches: the same on every process (each keeps its own slice)."""
        if self.world > 1:  # dropout differs across processes (one process keeps its stream)
            set_seed(cfg.seed + self.accelerator.process_index)

    def _apply_lora(self) -> None:
        from peft import LoraConfig, get_peft_model

        lc = LoraConfig(
            r=self.cfg.lora_r, lora_alpha=2 * self.cfg.lora_r, target_modules="all-linear"
        )
        self.backbone.model = get_peft_model(self.backbone.model, lc)

    @property
    def total_steps(self) -> int:
        """The recipe's steps."""
        return self.recipe.steps

    # ------------------------------------------------------------------ batches and losses
    def n_rows(self) -> int:
        """Rows the batches are drawn from."""
        return self.spec.n_rows(self)

    def draw(self, rng: random.Random, shard: bool = True) -> Batch:
        """This process's batch: row indices (distinct) plus what the method adds (LANCER: a
        multilingual batch).

        The recipe's batch size is the global batch: every process draws the same
        ``batch_size`` rows from ``rng`` and (``shard``, under N processes) keeps its own
        slice of ``batch_size / N`` rows, so no two processes train on the same example in a
        step; the method's extras are then drawn for each process in turn from the same
        ``rng``, which thus stays the same on every process. ``shard=False``: the whole
        global batch (the fixed measuring batches)."""
        world = self.world if shard else 1
        me = self.accelerator.process_index if shard else 0
        picks = rng.sample(range(self.n_rows()), self.recipe.batch_size)
        per = len(picks) // world
        own: Batch = {}
        for rank in range(world):
            part = picks[rank * per : (rank + 1) * per]
            batch: Batch = {"rows": [self.rows[i] for i in part] if self.rows else part}
            self.spec.draw(self, batch, rng)
            if rank == me:
                own = batch
        return own

    def encode(self, texts: list[str], kind: str) -> Tensor:
        """Embeddings of ``texts`` by the model being trained (with gradient): [N, d]."""
        return self.model(texts, kind=kind)  # [N, d]

    def loss(self, batch: Batch) -> Tensor:
        """The method's loss on one batch."""
        return self.spec.loss(self, batch)

    @torch.no_grad()
    def measure(self, batches: list[Batch]) -> float:
        """Mean loss over fixed batches in eval mode (no dropout, no gradient)."""
        was = self.model.training
        self.model.eval()
        vals = [float(self.loss(bt)) for bt in batches]
        self.model.train(was)
        return sum(vals) / len(vals)

    # ------------------------------------------------------------------ loop hooks
    def before_loop(self, total: int) -> None:
        """The model trains."""
        self.model.train()

    def train_step(self) -> float:
        """One step on a fresh batch; a step whose loss or gradient norm is not finite (on any
        process) is skipped and counted: no NaN/inf reaches the weights or the optimizer
        state. The schedule still advances (it is a function of the step)."""
        loss = self.loss(self.draw(self.rng))
        self.opt.zero_grad(set_to_none=True)
        self.accelerator.backward(loss)
        if self.clip_and_step(self.model.parameters(), [self.opt], loss) is None:
            self.opt.zero_grad(set_to_none=True)
        self._lr = self.scheduler.get_last_lr()[0]
        self.scheduler.step()
        self.step += 1
        self.history.append(float(loss.detach()))
        return self.history[-1]

    def after_step(self, row: object, total: int) -> None:
        """Log the loss and learning rate at steps 1, 11, 21, ... and the last."""
        if self.step % 10 == 1 or self.step == total:
            log_metrics(self.accelerator, {"loss": row, "lr": self._lr}, self.step)
            log.info("%s step %d/%d loss %.4f", self.method, self.step, total, row)

    def finalize(self) -> Path:
        """Merge LoRA into the base model, write the loadable baseline folder ``output_dir``
        (:attr:`meta` joins ``lira_baseline.json``; the run fingerprint included) and end the
        trackers; returns that folder. The trained backbone is :attr:`backbone` (eval mode)."""
        bb = self.accelerator.unwrap_model(self.model)
        if self.cfg.lora and hasattr(bb.model, "merge_and_unload"):
            bb.model = bb.model.merge_and_unload()
        bb.model.to(torch_dtype(self.models_cfg.dtype))  # fp32 master weights -> models.dtype
        self.backbone = bb.eval()
        self.accelerator.wait_for_everyone()
        if self.accelerator.is_main_process:
            info = {"method": self.method, "steps": len(self.history), **self.meta}
            save_baseline(self.backbone, self.output_dir, self.models_cfg, info, self.fingerprint)
        self.accelerator.wait_for_everyone()
        finish_trackers(self.accelerator)  # not end_training: the next method needs the group
        return self.output_dir

    # ------------------------------------------------------------------------ checkpoints
    def _trainable(self) -> dict[str, Tensor]:
        bb = self.accelerator.unwrap_model(self.model)
        return {n: p for n, p in bb.named_parameters() if p.requires_grad}

    def checkpoint_state(self) -> TrainerState:
        """Trainable weights, optimizer, schedule, the batch RNG (the same on every process),
        every process's torch / numpy / Python RNG state (dropout), history."""
        return {
            "step": self.step,
            "params": {n: p.detach() for n, p in self._trainable().items()},
            "optimizer": self.opt.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "batch_rng": self.rng.getstate(),
            "world": self.world,
            "rngs": self.gather(rng_state()),
            "history": self.history,
            "nonfinite_steps": self.nonfinite_steps,
        }

    def load_checkpoint_state(self, folder: Path, state: TrainerState) -> None:
        """Restore :meth:`checkpoint_state`."""
        params = self._trainable()
        if set(state["params"]) != set(params):
            raise ValueError("its trainable parameters differ from this model's")
        rngs = state["rngs"] if "rngs" in state else [state["rng"]]  # one process: "rng"
        world = int(state.get("world", 1))
        if world != self.world:  # each process's slice of a batch depends on the count
            raise CheckpointError(
                f"{folder} was written by {world} process(es), this run has {self.world}; "
                f"resume with {world} (accelerate launch --num_processes {world}) or run "
                "without --resume to start over"
            )
        with torch.no_grad():
            for n, p in params.items():
                p.copy_(state["params"][n])
        self.opt.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.rng.setstate(state["batch_rng"])
        set_rng_state(rngs[self.accelerator.process_index])
        self.step, self.history = int(state["step"]), [float(v) for v in state["history"]]
        self.nonfinite_steps = int(state["nonfinite_steps"])


# ----------------------------------------------------------------------------------- engine
def fixed_batches(trainer: ContrastiveTrainer, seed: int, n: int = 4) -> list[Batch]:
    """The ``n`` (global) batches a method's loss is measured on before and after training
    (the same on every process)."""
    rng = random.Random(seed + 10_007)
    return [trainer.draw(rng, shard=False) for _ in range(n)]


def train_stats(
    trainer: ContrastiveTrainer, before: float, after: float, out: Path
) -> dict[str, object]:
    """A trained method's entry in ``summary.json``."""
    h = trainer.history
    return {
        "loss_before": before, "loss_after": after, "steps": len(h), "path": str(out),
        "recipe": asdict(trainer.recipe),
        "train_loss_first": h[0] if h else None, "train_loss_last": h[-1] if h else None,
        "nonfinite_steps": trainer.nonfinite_steps,
    }  # fmt: skip


def train_method(
    cfg: BaselinesRun,
    method: str,
    examples: list[TrainExample],
    corpus: list[Record],
    dataset: XQuADR | None,
    out: Path,
    resume: bool = False,
) -> dict[str, object]:
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


def mine_negatives(
    cfg: BaselinesRun, examples: list[TrainExample], corpus: list[Record], kinds: set[str]
) -> None:
    """Fill the hard negatives of ``kinds`` (:data:`NEGATIVES`) into ``examples`` with the
    initial model (CLEAR §4.1), on CUDA when available like the trained one. Under several
    processes the main process mines once and the others receive its negatives."""
    from accelerate.utils import broadcast_object_list

    bc = cfg.baselines
    kinds = set(kinds)
    if not bc.recipe_of("clear", ClearConfig).negatives:
        kinds.discard("clear")  # CLEAR's K = 0: nothing to mine
    if not kinds:
        return
    state = PartialState(cpu=distributed_cpu())
    if state.is_main_process:
        miner = load_backbone(cfg.models, device=resolve_device()).eval()
        for kind, (mine, _, _) in NEGATIVES.items():
            if kind in kinds:
                mine(miner, examples, corpus, bc)
        del miner
        release_memory()  # before the trained copy of h is loaded
    if state.num_processes > 1:
        mined = [[(e.p_hn, e.q_hn, e.gist_hn) for e in examples]]
        broadcast_object_list(mined)  # from the main process
        for e, (p_hn, q_hn, gist_hn) in zip(examples, mined[0]):
            e.p_hn, e.q_hn, e.gist_hn = list(p_hn), list(q_hn), list(gist_hn)
