"""What the Arca, LaSR and baseline trainers share: the :class:`Trainer` base.

Every trainer follows one contract: ``XTrainer(cfg, model, ..., output_dir)`` is a
:class:`Trainer`; ``train(resume=False)`` runs to ``cfg.steps`` (continuing from the latest
intact checkpoint when ``resume``; a checkpoint written under another config is refused, see
:func:`lira.checkpoint.fingerprint.check_fingerprint`, and so is one past the configured steps)
and returns a :class:`TrainResult`; ``finalize()`` writes the final loadable folder and returns
its path. Gradients are clipped at ``cfg.max_grad_norm``; a step whose loss or gradient norm is
not finite is skipped and counted. ``cfg.report_to`` sends the logged terms to an accelerate
tracker (tensorboard or wandb) as well as to the log; the Accelerator, its tracker and the
process group are set up by :mod:`lira.accelerator`.

The base owns the loop and the checkpoint template (atomic ``step-XXXXXXXX`` folders holding
``trainer_state.{safetensors,json}`` and the run fingerprint, pruned to ``keep_checkpoints``);
a subclass supplies :meth:`Trainer.train_step` (one optimisation step) and its state
(:meth:`Trainer.checkpoint_state` / :meth:`Trainer.load_checkpoint_state`). This is the one
module of the trainers that reads and writes checkpoints (:mod:`lira.checkpoint`); the names
it re-exports below are what the trainers' engines need of it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import Tensor
from tqdm.auto import tqdm

from lira.checkpoint.fingerprint import (
    check_fingerprint,
    clear_previous_run,
    config_fingerprint,
    run_fingerprint,
    write_fingerprint,
)
from lira.checkpoint.folders import (
    atomic_dir,
    latest_checkpoint,
    prune_checkpoints,
    step_dir,
    step_of,
)
from lira.checkpoint.rng import rng_state, set_rng_state
from lira.checkpoint.state import all_finite, load_state, save_state, state_mismatch
from lira.errors import CheckpointError
from lira.jsonio import dumps_json, write_json

if TYPE_CHECKING:
    from accelerate import Accelerator


__all__ = [
    "CheckpointError",
    "TrainResult",
    "Trainer",
    "TrainerState",
    "all_finite",
    "atomic_dir",
    "check_fingerprint",
    "config_fingerprint",
    "dumps_json",
    "rng_state",
    "run_fingerprint",
    "set_rng_state",
    "write_fingerprint",
    "write_json",
]

log = logging.getLogger(__name__)

HistoryRow = float | dict[str, object]
"""One logged row of a trainer's history (the baselines keep the loss alone)."""
TrainerState = dict[str, Any]
"""A trainer's checkpoint state: nested containers of tensors, numbers and strings, as
:func:`lira.checkpoint.state.save_state` writes and :func:`~lira.checkpoint.state.load_state`
reads them."""


class TrainerConfig(Protocol):
    """What the base reads of a trainer's config section (``arca``, ``lasr``, ``baselines``)."""

    steps: int
    save_every: int
    max_grad_norm: float


@dataclass
class TrainResult:
    """What a ``train()`` call ended with: the step reached, the trainer's logged rows, the
    steps skipped as non-finite and the trainer's own ``summary`` (Arca: its run summary).

    Also readable as a mapping (``result["step"]``: the summary's keys, then the fields), and
    sized and iterated by its history."""

    step: int
    history: list[HistoryRow]
    nonfinite_steps: int = 0
    summary: dict[str, object] = field(default_factory=dict)

    def __getitem__(self, key: str) -> object:
        """A summary value, else the field ``key``."""
        if key in self.summary:
            return self.summary[key]
        if key in ("step", "history", "nonfinite_steps"):
            return getattr(self, key)
        raise KeyError(key)

    def __len__(self) -> int:
        """The number of history rows."""
        return len(self.history)

    def __iter__(self) -> Iterator[HistoryRow]:
        """The history rows, oldest first."""
        return iter(self.history)


class Trainer:
    """The training lifecycle every LiRA trainer shares.

    The base owns the accelerator (:attr:`accelerator`), the loop of :meth:`train`, the
    checkpoint template (:meth:`save_checkpoint`, :meth:`resume`: fingerprint check, the guard
    against a checkpoint past the configured steps, pruning, fresh-run clean-up), the skipping
    and counting of non-finite steps (:meth:`clip_and_step`), the held-out evaluation hook
    (:meth:`held_out`, recorded in :attr:`evals`) and the end-of-run report. A subclass supplies
    :meth:`train_step` (one optimisation step; it advances :attr:`step`), its checkpoint state
    (:meth:`checkpoint_state`, :meth:`load_checkpoint_state`, :meth:`save_files`) and
    :meth:`finalize`; :meth:`after_step`, :meth:`before_loop` and :meth:`after_loop` are
    optional hooks.
    """

    section = ""
    """The config section (``arca``, ``lasr``, ``baselines``): the default fingerprint's."""
    unshaping: tuple[str, ...] = ()
    """Config keys left out of the default fingerprint."""
    steps_key: str | None = None
    """The config key of the step budget, named when a resume is refused for it."""
    nonfinite_steps: int = 0
    """Optimisation steps skipped because the loss or the gradient norm was not finite."""

    def __init__(
        self,
        cfg: TrainerConfig,
        accelerator: Accelerator,
        checkpoint_root: str | Path,
        what: str,
        fingerprint: dict[str, object] | None = None,
        keep_checkpoints: int = 2,
    ) -> None:
        self.cfg = cfg
        self.accelerator = accelerator
        self.checkpoint_root = Path(checkpoint_root)
        """Where the ``step-*`` checkpoints go."""
        self.what = what
        """The trainer's name in logs and errors (``Arca``, ``LaSR``, ``baseline jsd``)."""
        self.fingerprint = fingerprint or run_fingerprint(
            self.section, {self.section: cfg}, self.unshaping
        )
        """Stored in every checkpoint; :meth:`resume` refuses a checkpoint with another one."""
        self.keep_checkpoints = keep_checkpoints
        self.step = 0
        self.history: list[HistoryRow] = []
        self.evals: list[dict[str, object]] = []
        """Held-out results (:meth:`held_out`) with their step."""
        self._resumed = False

    # ------------------------------------------------------------------ hooks
    @property
    def total_steps(self) -> int:
        """The configured number of optimisation steps."""
        return int(self.cfg.steps)

    def train_step(self) -> object:
        """One optimisation step; advances :attr:`step` (subclasses)."""
        raise NotImplementedError

    def checkpoint_state(self) -> TrainerState:
        """The trainer state a step checkpoint holds (called on every process)."""
        raise NotImplementedError

    def load_checkpoint_state(self, folder: Path, state: TrainerState) -> None:
        """Restore :meth:`checkpoint_state` read back from ``folder``."""
        raise NotImplementedError

    def save_files(self, folder: Path) -> None:
        """Extra files of a step checkpoint being written (e.g. the model folder)."""

    def finalize(self) -> Path:
        """Write the final loadable folder and end the trackers; returns that folder."""
        raise NotImplementedError

    def before_loop(self, total: int) -> None:
        """Called by :meth:`train` before its first step."""

    def after_step(self, row: object, total: int) -> None:
        """Called after each step with what :meth:`train_step` returned (logging)."""

    def after_loop(self, total: int) -> None:
        """Called by :meth:`train` after its last step."""

    def after_resume(self) -> None:
        """Called by :meth:`resume` once the state is loaded (outside the check that reports a
        state that does not fit, so an error here is not blamed on the checkpoint)."""

    def held_out(self) -> dict[str, object] | None:
        """Metrics on held-out data, None when there is none (no evaluation)."""
        return None

    def on_eval(self, result: dict[str, object]) -> None:
        """Called with each held-out result (with its ``step``) once it is recorded."""

    def eval_due(self, total: int) -> bool:
        """True when :meth:`held_out` runs after the current step."""
        return False

    def save_due(self, total: int) -> bool:
        """True when a step checkpoint is written after the current step."""
        every = self.cfg.save_every
        return bool(every) and self.step % every == 0

    def summary(self) -> dict[str, object]:
        """The trainer's own summary joined to its :class:`TrainResult`."""
        return {}

    # ------------------------------------------------------------------ loop
    def train(self, resume: bool = False, steps: int | None = None) -> TrainResult:
        """Run to ``steps`` optimisation steps (default: the configured ones), writing step
        checkpoints as configured; with ``resume``, continue from the latest intact checkpoint
        first (see :meth:`resume`); without, a fresh run removes a previous run's checkpoints."""
        total = self.total_steps if steps is None else steps
        if resume and not self._resumed:
            self.resume()
        if self.step == 0 and not self._resumed:
            self.start_fresh()
        if self.step == 0 and not self.evals:  # the starting point
            self.evaluate_held_out()
        self.before_loop(total)
        bar = tqdm(
            total=total,
            initial=self.step,
            desc=self.what,
            unit="step",
            disable=not self.accelerator.is_main_process,
        )  # progress and ETA
        try:
            while self.step < total:
                row = self.train_step()
                bar.update(self.step - bar.n)
                self.after_step(row, total)
                if self.eval_due(total):
                    self.evaluate_held_out()
                if self.save_due(total):
                    self.save_checkpoint()
        finally:
            bar.close()
        if self.nonfinite_steps:
            log.warning(
                "%s: %d of %d steps skipped so far (non-finite loss or gradient)",
                self.what,
                self.nonfinite_steps,
                self.step,
            )
        self.after_loop(total)
        return TrainResult(self.step, self.history, self.nonfinite_steps, self.summary())

    def evaluate_held_out(self) -> dict[str, object] | None:
        """Run :meth:`held_out` now and record its result in :attr:`evals` (None: no data)."""
        result = self.held_out()
        if result is None:
            return None
        result = {"step": self.step, **result}
        log.info("%s eval %s", self.what, dumps_json(result, None))
        self.evals.append(result)
        self.on_eval(result)
        return result

    def clip_and_step(
        self,
        params: Iterable[Tensor],
        optimizers: Sequence[torch.optim.Optimizer],
        *values: Tensor | None,
    ) -> Tensor | None:
        """Clip the gradients at ``cfg.max_grad_norm`` and step the ``optimizers``, unless the
        gradient norm or one of ``values`` (the loss) is not finite on some process: then the
        update is skipped and counted. Returns the gradient norm, None when skipped."""
        norm = self.accelerator.clip_grad_norm_(params, self.cfg.max_grad_norm)
        if self.finite_everywhere(*values, norm):
            for opt in optimizers:
                opt.step()
            return norm
        self.nonfinite_steps += 1
        log.warning(
            "%s step %d: non-finite loss or gradient norm, update skipped", self.what, self.step + 1
        )
        return None

    def finite_everywhere(self, *values: Tensor | float | None) -> bool:
        """All ``values`` are finite on every process (one decision for all)."""
        return not self.any_process(not all_finite(*values))

    @property
    def world(self) -> int:
        """Number of processes."""
        return self.accelerator.num_processes

    def any_process(self, flag: bool) -> bool:
        """True when ``flag`` holds on any process (the same answer on every process)."""
        if self.world == 1:
            return flag
        t = torch.tensor([1.0 if flag else 0.0], device=self.accelerator.device)
        return bool(self.accelerator.reduce(t, reduction="sum").item() > 0)

    def gather(self, obj: object) -> list[object]:
        """``obj`` of every process, in process order (``[obj]`` in a single process)."""
        from accelerate.utils import gather_object

        return gather_object([obj]) if self.world > 1 else [obj]

    def rank_states(self, state: TrainerState) -> list[TrainerState]:
        """``state`` of every process, in process order, on the CPU: what a checkpoint holds
        once per process (its RNG states, a sampler or queue of its own); every process calls
        it. :meth:`own_rank_state` picks a process's entry back out on resume."""
        from accelerate.utils import send_to_device

        return self.gather(send_to_device(state, "cpu"))  # type: ignore[return-value]

    def own_rank_state(self, states: Sequence[TrainerState]) -> TrainerState:
        """This process's entry of :meth:`rank_states`' list (a checkpoint written by another
        number of processes gives process i entry i modulo their number, with a warning)."""
        if len(states) != self.world:
            log.warning(
                "%s: the checkpoint holds the state of %d processes, this run has %d; "
                "the resumed run will not repeat the uninterrupted one exactly",
                self.what,
                len(states),
                self.world,
            )
        return states[self.accelerator.process_index % len(states)]

    # ------------------------------------------------------------------ checkpoints
    def start_fresh(self) -> None:
        """A run from step 0: remove a previous run's step folders (so they neither outrank
        this run's when pruning nor get resumed later)."""
        if self.accelerator.is_main_process:
            clear_previous_run(self.checkpoint_root, self.fingerprint, self.what)
        self.accelerator.wait_for_everyone()

    def save_checkpoint(self) -> Path:
        """Atomic ``step-XXXXXXXX`` folder: :meth:`save_files`, the trainer state (safetensors
        + JSON, no pickle) and the run fingerprint; older ones pruned to ``keep_checkpoints``."""
        path = step_dir(self.checkpoint_root, self.step)
        state = self.checkpoint_state()
        if self.accelerator.is_main_process:
            with atomic_dir(path) as tmp:
                self.save_files(tmp)
                save_state(tmp, state)  # safetensors + JSON: nothing in it can run code
                write_fingerprint(tmp, self.fingerprint)
            prune_checkpoints(self.checkpoint_root, self.keep_checkpoints, protect=path)
            log.info("%s: checkpoint %s", self.what, path)
        self.accelerator.wait_for_everyone()
        return path

    def resume(self) -> bool:
        """Load the latest intact checkpoint under :attr:`checkpoint_root` (False if there is
        none) and prune the older ones to ``keep_checkpoints`` (a kill may have landed between a
        save and its pruning); one of another config (fingerprint) or past the configured steps
        is refused with :class:`CheckpointError`."""
        last = latest_checkpoint(self.checkpoint_root)
        what = self.what
        if last is None:
            log.info(
                "%s: --resume given but no checkpoint in %s; starting fresh",
                what,
                self.checkpoint_root,
            )
            return False
        check_fingerprint(last, self.fingerprint, what)
        done, limit = step_of(last) or 0, self.total_steps
        if done > limit:
            budget = f"{self.steps_key}={limit}" if self.steps_key else f"its {limit} steps"
            fix = f"set {self.steps_key} >= {done}, or " if self.steps_key else ""
            raise CheckpointError(
                f"cannot resume {what} from {last}: it is past {budget}; "
                f"{fix}run without --resume to start over"
            )
        state = load_state(last)
        try:
            self.load_checkpoint_state(last, state)
        except CheckpointError:
            raise
        except (KeyError, TypeError, ValueError, RuntimeError) as e:
            raise state_mismatch(last, what, e) from None
        if self.accelerator.is_main_process:  # a kill between a save and its pruning
            prune_checkpoints(self.checkpoint_root, self.keep_checkpoints, protect=last)
        self.accelerator.wait_for_everyone()
        self.after_resume()
        self._resumed = True
        log.info("%s: resumed from %s (step %d)", what, last, self.step)
        return True
