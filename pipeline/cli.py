"""The ``lira`` command: one subcommand per pipeline stage, all reading the same YAML config.

    lira run configs/demo.yaml --output-dir out/demo arca.steps=50
    lira translate configs/demo.yaml [--import FILE --translator NAME | --mteb TASK[,TASK…]]
    lira translate configs/demo.yaml --shard I/N   then   lira translate configs/demo.yaml --merge
    lira arca|lasr configs/demo.yaml [--resume]
    lira tune-translator configs/demo.yaml [--resume] tune_translator.steps=20   [--evaluate]
    lira baseline configs/demo.yaml [--methods clear lancer]
    lira baseline-merge A B --weights 0.5 0.5 --out merged/
    lira eval|compare configs/demo.yaml [--mteb TASK[,TASK…] [--mteb-data DIR]] [--paper-tables]
    lira ablate configs/demo.yaml [--rows no-llm-critic no-queue]   (paper 004 Table 5)

Every subcommand takes ``key.sub=value`` overrides after the config path.

Errors caused by user input (:class:`~lira.errors.LiRAError`: config values, data files, the
translation store, checkpoints; a path that does not exist; a full, read-only or forbidden
output location) print one line ``lira: <message>`` on stderr and exit non-zero (2 for config
errors, 1 otherwise, 130 on Ctrl-C) without a traceback; ``-v`` adds the traceback. Any other
exception is a bug and keeps its traceback.

Every command that writes into ``output_dir`` holds its run lock
(:func:`lira.checkpoint.run_lock`): a second run into the same folder stops in one line naming
the first one's pid (``translate --shard`` excepted: shards run side by side).
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import logging
import os
import re
import sys
import traceback
import typing
from types import ModuleType

from arca.tuning.config import TuneTranslatorConfig
from evaluators.config import EvalConfig
from lira import __version__
from lira.checkpoint.lock import run_lock
from lira.config import DataConfig, ModelsConfig, field_docs, open_sections
from lira.data.splits import load_splits_early
from lira.errors import LiRAError, UserInputError
from pipeline.ablation_rows import ROWS as ABLATION_ROWS
from pipeline.preflight import check_resume, preflight, reads_data
from pipeline.runconfig import RunConfig, load_config
from pipeline.stages import STAGES, refuse_launcher

ENVIRONMENT_ERRNOS = {
    errno.ENOSPC: "free disk space or choose another --output-dir",
    errno.EDQUOT: "free space in your quota or choose another --output-dir",
    errno.EROFS: "the file system is read-only: choose a writable --output-dir",
    errno.EACCES: "check the permissions, or choose a writable --output-dir",
    errno.EPERM: "check the permissions, or choose a writable --output-dir",
    errno.EEXIST: "a file stands where LiRA makes a folder: move it away, or choose another "
    "--output-dir",
    errno.ENOTDIR: "a file stands where LiRA needs a folder: move it away, or choose another "
    "--output-dir",
    errno.ENAMETOOLONG: "choose a shorter path",
}
"""OS errors a user fixes (disk full, read-only, permission) and the fix printed with them."""
VERBOSITY = ("-v", "--verbose", "-q", "--quiet")
"""Logging flags taken anywhere on the command line."""

# subcommand -> (the stage of `lira run` it runs alone, "" for the others; config section shown
# in --help; one-line summary): one per stage of the main job (pipeline.stages.STAGES), then the
# commands outside it. What each runs: pipeline.run.run_command.
COMMANDS: dict[str, tuple[str, type, str]] = {
    **{s.command: (name, s.config, s.summary) for name, s in STAGES.items()},
    "eval": ("", EvalConfig, "evaluate one model"),
    "tune-translator": (
        "",
        TuneTranslatorConfig,
        "fine-tune an LLM translator of the pool with GRPO on Arca's anchor reward (beyond the paper)",
    ),
    "ablate": (
        "",
        RunConfig,
        "paper 004 Table 5: train each ablation row (same data and budget) under "
        "<output_dir>/ablations/ and write table5.md",
    ),
    "run": (
        "",
        RunConfig,
        "the main job: translate -> arca -> lasr -> compare, resumable stage by stage",
    ),
}


def describe_config(cls: type) -> str:
    """A readable list of a config dataclass's keys, types and defaults for ``--help``."""
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    opened = open_sections(cls)
    sections = opened[1] if opened else {}
    lines = [f"{cls.__name__} keys (override with section.key=value):"]
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        tp = hint.__name__ if isinstance(hint, type) else str(hint)
        tp = re.sub(r"\b[a-z_]+(\.[a-z_]+)*\.(?=[A-Z])", "", tp.replace("typing.", ""))
        if opened and f.name == opened[0]:  # written as one section per entry, listed below
            lines.append(f"  {', '.join(sections)}: sections = {{...}}")
        elif f.default is not dataclasses.MISSING:
            lines.append(f"  {f.name}: {tp} = {f.default!r}")
        elif f.default_factory is not dataclasses.MISSING:
            nested = isinstance(hint, type) and dataclasses.is_dataclass(hint)
            default = "{...}" if nested else repr(f.default_factory())
            lines.append(f"  {f.name}: {tp} = {default}")
        else:
            lines.append(f"  {f.name}: {tp} = required")
        if f.name in docs:
            lines.append(f"      {docs[f.name]}")
    if cls is not RunConfig:  # nested sections (translators, critic); `run` lists sections only
        nested = {a for name, tp in hints.items() for a in (tp, *typing.get_args(tp))
                  if dataclasses.is_dataclass(a) and isinstance(a, type)
                  and not (opened and name == opened[0])}  # fmt: skip
        for sub in sorted(nested, key=lambda c: c.__name__):
            lines += ["", describe_config(sub)]
        for name, sub in sections.items():
            lines += ["", f"{name}.* (a section of {cls.__name__}):", describe_config(sub)]
    return "\n".join(lines)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose config description (``section``) is built when it is printed:
    ``lira --help`` and a stage's start import no engine (listing the baselines' recipes
    imports their method files)."""

    section: type | None = None

    def format_help(self) -> str:
        if self.section is not None and self.epilog is None:
            shared = [f"{name}.* (read by every command):\n{describe_config(cls)}"
                      for name, cls in (("data", DataConfig), ("models", ModelsConfig))]  # fmt: skip
            self.epilog = "\n\n".join([describe_config(self.section), *shared])
        return super().format_help()


class _Names(argparse.Action):
    """A list option (``--methods``, ``--rows``) that hands ``key=value`` items back to the
    overrides: ``lira baseline cfg.yaml --methods clear baselines.steps=5`` trains clear for 5
    steps (a name never holds '='); a name outside ``valid`` is a one-line usage error."""

    def __init__(self, *args: object, valid: list[str] | None = None, **kwargs: object) -> None:
        self.valid = valid
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        items = [str(v) for v in values] if isinstance(values, list) else [str(values)]
        late = [v for v in items if "=" in v]
        names = [v for v in items if "=" not in v]
        if not names:
            parser.error(f"{option_string} needs at least one name before {' '.join(late)}")
        if self.valid is not None and (bad := [n for n in names if n not in self.valid]):
            parser.error(f"{option_string}: unknown {', '.join(bad)}; choose from "
                         f"{', '.join(self.valid)}")  # fmt: skip
        setattr(namespace, self.dest, names)
        namespace.late_overrides = [*getattr(namespace, "late_overrides", []), *late]


def _count(text: str) -> int:
    """An integer >= 0 (``--pairs``); anything else is a one-line usage error."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"{n} is negative; give 0 or more")
    return n


def _engines() -> ModuleType:
    """:mod:`pipeline.run` (every command's adapter and engine), imported when a command runs."""
    try:
        # here, not at the top: the engines import torch, and `lira --help` starts without it
        from pipeline import run
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] in ("lira", "arca", "lasr", "evaluators", "pipeline"):
            raise SystemExit(
                f"lira: cannot import pipeline.run ({e}); the installation is incomplete: "
                "run `pip install -e .` (or `bash scripts/setup.sh`) in the LiRA checkout"
            ) from None
        raise
    return run


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``lira`` command."""
    parser = argparse.ArgumentParser(
        prog="lira",
        description="LiRA: cross-lingual retrieval anchored to an English embedding space.",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="debug logging (anywhere on the line)"
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="warnings and errors only (anywhere on the line)"
    )
    parser.add_argument("--version", action="version", version=f"lira {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, (_, section, summary) in COMMANDS.items():
        p = sub.add_parser(
            name,
            help=summary,
            description=summary,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.section = section
        p.add_argument("config", help="YAML file mapping 1:1 to RunConfig")
        p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. arca.steps=50")
        p.add_argument("--output-dir", default=None, help="overrides output_dir")
        if name in ("arca", "lasr", "run", "baseline", "tune-translator"):
            p.add_argument("--resume", action="store_true", help="continue from checkpoints")
        if name == "translate":
            p.add_argument("--import", dest="import_file", default=None, help="JSONL to import")
            p.add_argument("--translator", default=None, help="translator name for --import")
            p.add_argument(
                "--shard",
                default=None,
                metavar="I/N",
                help="translate shard I (0-based) of N only, into <store>.shard-I-of-N (texts "
                "split by a stable hash); default: the launcher's RANK/WORLD_SIZE if set",
            )
            p.add_argument(
                "--merge",
                nargs="*",
                default=None,
                metavar="STORE",
                help="merge shard stores (default: every <store>.shard-*-of-* next to the store) "
                "into the configured store; same key -> one row",
            )
        if name == "tune-translator":
            p.add_argument(
                "--evaluate",
                action="store_true",
                help="instead of tuning: translate the --split questions with the base and the "
                "tuned translator and compare the backbone on each one's output (nDCG@10, paired "
                "Δ, no-translation rate) -> <output>/evaluation/<split>/",
            )
            p.add_argument(
                "--pairs",
                type=_count,
                default=20,
                help="random (source, base, tuned) triples shown (>= 0)",
            )
            p.add_argument(
                "--split",
                choices=["validation", "test"],
                default="validation",
                help="--evaluate's questions: the validation split (default; where the pool is "
                "decided) or the held-out test split (read once, for a shipped pool)",
            )
        if name == "baseline":
            p.add_argument("--methods", nargs="+", default=None, action=_Names,
                           help="subset of methods")  # fmt: skip
        if name == "ablate":
            p.add_argument(
                "--rows",
                nargs="+",
                default=None,
                action=_Names,
                valid=list(ABLATION_ROWS),
                metavar="ROW",
                help="Table 5 rows to train (default: all; 'full' always runs): "
                + ", ".join(f"{r.name} ({r.label})" for r in ABLATION_ROWS.values()),
            )
        if name in ("eval", "compare", "translate"):
            p.add_argument(
                "--mteb",
                default=None,
                metavar="TASK[,TASK…]",
                help=(
                    "translate the texts of these MTEB tasks into the store (instead of the "
                    "configured data)"
                    if name == "translate"
                    else "evaluate on these MTEB tasks through the mteb package instead of the "
                    "configured data"
                )
                + " (TASK:SUB+SUB keeps some subsets, e.g. BelebeleRetrieval:deu_Latn-eng_Latn); "
                "needs the mteb extra",
            )
            p.add_argument(
                "--mteb-data",
                default=None,
                metavar="DIR",
                help="offline: local copies of the MTEB tasks (DIR/<Task>: a copy of the hub "
                "dataset repo or datasets save_to_disk folders per config; or DIR = a hub "
                "cache); default: the Hugging Face hub",
            )
        if name == "compare":
            p.add_argument(
                "--paper-tables",
                action="store_true",
                help="also print paper 004's Tables 1, 2 and 16 filled with the results under "
                "<output_dir>/compare ('—' where not run); written to compare/paper_tables.md",
            )
    m = sub.add_parser(
        "baseline-merge",
        help="average two or more checkpoints into one (paper 001 model merging)",
        description="Weighted average of checkpoints (fp32), written as a loadable folder.",
    )
    m.add_argument("checkpoints", nargs="+", help="checkpoint folders")
    m.add_argument("--weights", nargs="+", type=float, default=None)
    m.add_argument("--out", required=True, help="output folder")
    return parser


def user_error(e: BaseException) -> tuple[str, int] | None:
    """(one-line message, exit code) when ``e`` is a user error, else None (a bug)."""
    if isinstance(e, LiRAError):
        msg, code = str(e), e.exit_code
    elif isinstance(e, FileNotFoundError):
        msg, code = str(e), 1
    elif isinstance(e, OSError) and e.errno in ENVIRONMENT_ERRNOS:
        msg, code = f"{e}; {ENVIRONMENT_ERRNOS[e.errno]}", 1
    else:
        return None
    msg = " ".join(msg.split()) or type(e).__name__
    if len(msg) > MAX_MESSAGE:  # e.g. a 10 MB path in an OSError: keep its start and the fix
        msg = f"{msg[: MAX_MESSAGE // 2]} …[{len(msg) - MAX_MESSAGE} characters]… {msg[-MAX_MESSAGE // 2 :]}"
    return msg, code


MAX_MESSAGE = 2000
"""Longest error line printed (the start and the end of a longer one, with the fix)."""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``lira`` console script."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    flags = {a for a in argv if a in VERBOSITY}  # -v / -q anywhere, not only before the command
    argv = [a for a in argv if a not in VERBOSITY]
    args, extra = parser.parse_known_args(argv)
    args.verbose = bool(flags & {"-v", "--verbose"})
    quiet = bool(flags & {"-q", "--quiet"}) and not args.verbose
    if quiet:  # read by tqdm when it is first imported (engines import it when a stage runs)
        os.environ.setdefault("TQDM_DISABLE", "1")
    # Overrides may come after options too (`lira lasr cfg.yaml --output-dir o lasr.lr=1e-5`).
    stray = [a for a in extra if a.startswith("-") or "=" not in a]
    if stray or (extra and not hasattr(args, "overrides")):
        parser.error(f"unrecognized arguments: {' '.join(stray or extra)}")
    late = [*getattr(args, "late_overrides", []), *extra]  # after a list option, or options
    if late:
        args.overrides = [*args.overrides, *late]
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING if quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    try:
        _dispatch(args)
    except KeyboardInterrupt:
        print("lira: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        found = user_error(e)
        if found is None:
            raise  # a bug: keep the traceback
        if args.verbose:
            traceback.print_exc()
        print(f"lira: {found[0]}", file=sys.stderr)
        return found[1]
    return 0


def _dispatch(args: argparse.Namespace) -> None:
    """Load the config and run the command ``args.command`` (:func:`pipeline.run.run_command`)."""
    if args.command == "baseline-merge":
        _engines().baseline_merge(args.checkpoints, args.weights, args.out)
        return
    overrides = list(args.overrides)
    if args.output_dir:
        overrides.append(f"output_dir={args.output_dir}")
    cfg = load_config(args.config, overrides)
    if (
        args.command == "translate"
        and args.mteb
        and (args.shard is not None or args.merge is not None)
    ):
        raise UserInputError("--shard and --merge do not work with --mteb (yet)")
    if args.command in ("compare", "eval"):
        refuse_launcher(args.command)
    preflight(cfg, args.command)  # model paths: before the engines import torch
    if getattr(args, "resume", False):  # a checkpoint of another config: its saved fingerprint
        check_resume(cfg, args.command)
    if reads_data(args):  # a bad record too; the engine takes these splits (no second read)
        load_splits_early(cfg.data)
    try:
        if args.command == "translate" and args.shard is not None:
            run = _engines()  # shards of one store run side by side (each its own file)
            run.run_command(cfg, run.Options.from_args(args))
        else:
            # one run per output folder: a folder in use is refused before the engines import
            with run_lock(cfg.output_dir, f"lira {args.command}"):
                run = _engines()
                run.run_command(cfg, run.Options.from_args(args))
    finally:
        if "torch.distributed" in sys.modules:  # a launcher's process group: ended once, here
            from lira.accelerator import end_process_group  # torch: loaded by then, not at start

            end_process_group()
