"""The ``lira`` command: one subcommand per pipeline stage, all reading the same YAML config.

    lira run configs/demo.yaml --output-dir out/demo arca.steps=50
    lira translate configs/demo.yaml [--import FILE --translator NAME]
    lira arca|lasr configs/demo.yaml [--resume]
    lira baseline configs/demo.yaml [--methods clear lancer]
    lira baseline-merge A B --weights 0.5 0.5 --out merged/
    lira eval|compare configs/demo.yaml

Every subcommand takes ``key.sub=value`` overrides after the config path.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import logging
import sys
import typing
from collections.abc import Callable
from typing import Any

from lira.config import (
    ArcaConfig,
    BaselinesConfig,
    ConfigError,
    EvalConfig,
    LaSRConfig,
    ReasonConfig,
    RunConfig,
    TranslationConfig,
    load_config,
)

# subcommand -> (engine "module:function", config section shown in --help, one-line summary)
COMMANDS: dict[str, tuple[str, type | None, str]] = {
    "translate": (
        "lira.translation.runner:run_translate",
        TranslationConfig,
        "fill the translation store with K candidates per source text and critic scores",
    ),
    "arca": ("arca.trainer:run_arca", ArcaConfig, "train Arca (encoder g, Adaptor, Actor)"),
    "lasr": ("lasr.trainer:run_lasr", LaSRConfig, "fine-tune the LaSR fusion head"),
    "baseline": (
        "lira.baselines.trainer:run_baselines",
        BaselinesConfig,
        "train the baselines (InfoNCE, CLEAR, LANCER, JSD, merging) on the same data",
    ),
    "eval": ("evaluators.runner:run_eval", EvalConfig, "evaluate one model"),
    "compare": (
        "evaluators.compare:run_compare",
        EvalConfig,
        "evaluate the backbone, LiRA and every baseline on the same scenarios",
    ),
    "reason": (
        "lira.reasoning.runner:run_reason",
        ReasonConfig,
        "MGSM / X-CSQA accuracy through a frozen LLM fed [g(x); h(y)] (direct, translate-en, LiRA)",
    ),
    "run": (
        "lira.pipeline:run_pipeline",
        RunConfig,
        "the main job: translate -> arca -> lasr -> compare, resumable stage by stage",
    ),
}


def describe_config(cls: type) -> str:
    """A readable list of a config dataclass's keys, types and defaults for ``--help``."""
    hints = typing.get_type_hints(cls)
    lines = [f"{cls.__name__} keys (override with section.key=value):"]
    for f in dataclasses.fields(cls):
        tp = str(hints[f.name]).replace("typing.", "").replace("lira.config.", "")
        if f.default is not dataclasses.MISSING:
            default = repr(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
            default = "{...}" if dataclasses.is_dataclass(value) else repr(value)
        else:
            default = "required"
        lines.append(f"  {f.name}: {tp} = {default}")
    return "\n".join(lines)


def _load_engine(target: str) -> Callable[..., Any]:
    module, func = target.split(":")
    try:
        return getattr(importlib.import_module(module), func)
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] in ("lira", "arca", "lasr", "evaluators"):
            raise SystemExit(
                f"lira: the engine for this stage ({target}) is not implemented in this "
                "version yet; see the project's open issues."
            ) from None
        raise


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``lira`` command."""
    parser = argparse.ArgumentParser(
        prog="lira",
        description="LiRA: cross-lingual retrieval anchored to an English embedding space.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (_, section, summary) in COMMANDS.items():
        p = sub.add_parser(
            name,
            help=summary,
            description=summary,
            epilog=describe_config(section) if section else None,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.add_argument("config", help="YAML file mapping 1:1 to RunConfig")
        p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. arca.steps=50")
        p.add_argument("--output-dir", default=None, help="overrides output_dir")
        if name in ("arca", "lasr", "run", "baseline"):
            p.add_argument("--resume", action="store_true", help="continue from checkpoints")
        if name == "translate":
            p.add_argument("--import", dest="import_file", default=None, help="JSONL to import")
            p.add_argument("--translator", default=None, help="translator name for --import")
        if name == "baseline":
            p.add_argument("--methods", nargs="+", default=None, help="subset of methods")
    m = sub.add_parser(
        "baseline-merge",
        help="average two or more checkpoints into one (paper 001 model merging)",
        description="Weighted average of checkpoints (fp32), written as a loadable folder.",
    )
    m.add_argument("checkpoints", nargs="+", help="checkpoint folders")
    m.add_argument("--weights", nargs="+", type=float, default=None)
    m.add_argument("--out", required=True, help="output folder")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``lira`` console script."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # Overrides may come after options too (`lira lasr cfg.yaml --output-dir o lasr.lr=1e-5`).
    stray = [a for a in extra if a.startswith("-") or "=" not in a]
    if stray or (extra and not hasattr(args, "overrides")):
        parser.error(f"unrecognized arguments: {' '.join(stray or extra)}")
    if extra:
        args.overrides = [*args.overrides, *extra]
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    if args.command == "baseline-merge":
        engine = _load_engine("lira.baselines.merging:merge_command")
        engine(args.checkpoints, args.weights, args.out)
        return 0
    overrides = list(args.overrides)
    if args.output_dir:
        overrides.append(f"output_dir={args.output_dir}")
    try:
        cfg = load_config(args.config, overrides)
    except ConfigError as e:
        print(f"lira: {e}", file=sys.stderr)
        return 2
    engine = _load_engine(COMMANDS[args.command][0])
    engine(cfg, args)
    return 0
