"""The engine of ``lira baseline``: train each configured method and write ``baselines/summary.json``.

:func:`run_baselines` trains the methods one after another with the
:class:`~lira.baselines.contrastive.ContrastiveTrainer` (or a method's own loop) and skips, under
``--resume``, a method already trained with the same config.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Protocol

from accelerate import PartialState

from lira.accelerator import distributed_cpu
from lira.baselines.config import BaselinesRun
from lira.baselines.contrastive import mine_negatives, train_method
from lira.baselines.data import build_examples, training_splits
from lira.baselines.export import META_FILE, baseline_fingerprint
from lira.baselines.registry import get_method, method_names
from lira.config import ConfigError
from lira.jsonio import read_json_object, write_json
from lira.training import check_fingerprint

log = logging.getLogger(__name__)


class MethodChoice(Protocol):
    """A choice of methods passed positionally (``../shared/gpu_check.sh``, the GPU check, calls
    ``run_baselines(cfg, argparse.Namespace(methods=["clear"]))``)."""

    methods: list[str] | None
    """The methods to train; None: ``baselines.methods``."""


def run_baselines(
    cfg: BaselinesRun,
    choice: MethodChoice | None = None,
    *,
    methods: list[str] | None = None,
    resume: bool = False,
) -> dict[str, object]:
    """Engine of ``lira baseline``: train each method, save it, write ``baselines/summary.json``.

    ``methods`` (or ``choice.methods``; default ``baselines.methods``): the methods to train;
    ``resume``: skip a method trained with this config, continue an unfinished one."""
    picked = methods or (choice.methods if choice is not None else None)
    methods = list(picked or cfg.baselines.methods)
    known = method_names()
    bad = [m for m in methods if m not in known]
    if bad:
        raise ConfigError("baselines.methods", f"unknown method(s) {bad}; choose from {known}")
    root = Path(cfg.output_dir) / "baselines"
    root.mkdir(parents=True, exist_ok=True)
    summary_path = root / "summary.json"
    summary: dict[str, object] = {}
    if summary_path.is_file():
        fix = "delete it and run `lira baseline` again (every method is then trained again)"
        summary = read_json_object(summary_path, "baselines summary", fix)
    todo = methods
    if resume:
        todo = [m for m in methods if not ((root / m / META_FILE).is_file() and m in summary)]
        for m in sorted(set(methods) - set(todo)):
            # a model trained with another config is not "done": refuse rather than keep it
            check_fingerprint(root / m, baseline_fingerprint(cfg, m), f"baseline {m}")
            log.info("baseline %s already trained at %s (resume): skipped", m, root / m)
    if not todo:
        return summary
    parallel, retrieval, dataset = training_splits(cfg)
    examples = build_examples(parallel, retrieval, dataset)
    corpus = list(retrieval.corpus)
    wanted = {kind for m in todo for kind in get_method(m).negatives}
    mine_negatives(cfg, examples, corpus, wanted)
    main = PartialState(cpu=distributed_cpu()).is_main_process
    for method in todo:
        summary[method] = train_method(cfg, method, examples, corpus, dataset, root / method,
                                       resume=resume)  # fmt: skip
        summary["_data"] = {"examples": len(examples), "corpus": len(corpus)}
        if main:  # one writer
            write_json(summary_path, summary)
    return summary
