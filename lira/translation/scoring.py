"""The critic pass of a translate run: score the stored candidates that have no scores yet.

:func:`score_candidates` scores every ok row not yet scored by the configured critic, every
row whose scoring failed before (request error, no valid reply after ``critic.max_retries``)
and every row whose stored scores are corrupt, in chunks leased in the store
(:func:`lira.translation.scheduling.leased_chunks`), so several processes on one store split
the work. :func:`g_encode` gives the embedding critic the run's g.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import closing
from typing import TypedDict

from tqdm.auto import tqdm

from lira.config import ModelsConfig
from lira.translation.config import TranslationConfig, TranslatorConfig
from lira.translation.critic import Encode, build_critic, critic_id
from lira.translation.scheduling import CRITIC_STATE, check_source, leased_chunks
from lira.translation.store import TranslationStore, key_for

log = logging.getLogger(__name__)


class CriticStats(TypedDict):
    """The critic pass's entry in ``translate_summary.json`` (see the module docstring)."""

    kind: str
    scored: int
    failed: int
    retried: int
    corrupt: int
    by_others: int
    seconds: float


def g_encode(models: ModelsConfig) -> tuple[Encode, str]:
    """The run's g as the embedding critic's encoder (no cache): texts -> [N, d] sentence
    vectors (a token-level g: the masked mean of its token states) and g's name."""
    # imported here: a translate pass without the embedding critic never loads torch
    import torch

    from lira.models import load_encoder

    encoder = load_encoder(models)

    @torch.no_grad()
    def encode(texts: list[str]) -> torch.Tensor:
        tokens, mask = encoder(list(texts), "query")  # [N, L, d], [N, L]
        m = mask.to(tokens.dtype).unsqueeze(-1)
        return ((tokens * m).sum(1) / m.sum(1).clamp_min(1.0)).float().cpu()

    return encode, str(getattr(encoder, "name", "") or models.encoder)


def score_candidates(
    store: TranslationStore,
    tc: TranslationConfig,
    translators: list[TranslatorConfig],
    by_lang: dict[str, list[str]],
    poll_s: float,
    cache_dir: str = "",
    g: Callable[[], tuple[Encode, str]] | None = None,
) -> CriticStats:
    """Run the critic on ok rows it has not scored yet, or whose scoring failed; its stats.

    ``scored``/``failed``: pairs scored / still failed in this run; ``retried``: pairs whose
    critic had failed in an earlier run (tried again here); ``corrupt``: pairs whose stored
    scores were outside 1-10 (scored again here); ``by_others``: pairs another
    process scored meanwhile. Failed pairs keep ``scores=None`` until a later run scores them.
    ``g``: builds (encode, name) of the run's g for ``critic.kind: embedding`` (called only
    when that critic has pairs to score). ``poll_s``: how often to re-check pairs another
    process has leased.
    """
    stats: CriticStats = {
        "kind": tc.critic.kind, "scored": 0, "failed": 0, "retried": 0, "corrupt": 0,
        "by_others": 0, "seconds": 0.0,
    }  # fmt: skip
    if tc.critic.kind == "none":
        return stats
    encode: Encode | None = None
    g_name = ""
    if tc.critic.kind == "embedding" and not tc.critic.encoder:
        if g is None:
            raise ValueError("critic kind 'embedding' with the run's g needs the run's models")
        encode, g_name = g()
    cid = critic_id(tc.critic, g_name)
    keys = [key_for(x, lang, t) for t in translators for lang, texts in by_lang.items()
            for x in dict.fromkeys(texts)]  # fmt: skip
    before = store.states(keys, CRITIC_STATE)
    todo = [
        (lang, item)
        for t in translators
        for lang, texts in by_lang.items()
        for item in store.needs_critic(texts, lang, t, cid)
    ]
    if not todo:
        return stats
    stats["retried"] = sum(
        1 for _, it in todo if (b := before.get(it[0])) and b[0] == cid and b[1] == "failed"
    )
    # scored ok by this critic and still to do: its stored scores are outside 1-10
    stats["corrupt"] = sum(
        1 for _, it in todo if (b := before.get(it[0])) and b[0] == cid and b[1] == "ok"
    )
    if stats["corrupt"]:
        log.warning(
            "critic: %d stored score(s) are outside 1-10 (corrupt or edited rows); scoring "
            "them again", stats["corrupt"],
        )  # fmt: skip
    t0 = time.perf_counter()
    critic = None
    chunk = max(tc.commit_every, tc.critic.batch_size)
    with tqdm(total=len(todo), desc="critic", unit="pair") as bar:

        def elsewhere(n: int) -> None:
            stats["by_others"] += n
            bar.update(n)

        todo_keys = [it[0] for _, it in todo]
        # closed here, not by the garbage collector once the store is closed
        leases = leased_chunks(
            store, todo_keys, CRITIC_STATE, before, chunk, "critic", elsewhere, poll_s
        )
        with closing(leases):
            for idx in leases:
                part = [todo[j] for j in idx]
                critic = critic or build_critic(tc.critic, cache_dir=cache_dir, encode=encode,
                                                g_name=g_name)  # fmt: skip
                updates = []
                for lang in dict.fromkeys(lang for lang, _ in part):
                    items = [it for lg, it in part if lg == lang]
                    srcs = [check_source(it[1], tc.source_max_chars)[0] for it in items]
                    results = critic.score(srcs, [it[2] for it in items], lang)
                    for (key, _, _), r in zip(items, results):
                        s = r.scores or (None, None, None)
                        updates.append((key, {
                            "semantic": s[0], "emotional": s[1], "pragmatic": s[2],
                            "critic_id": cid, "critic_status": "ok" if r.ok else "failed",
                            "critic_raw": r.raw if isinstance(r.raw, str) else repr(r.raw)[:2000],
                            "critic_error": r.error, "critic_seconds": r.seconds,
                        }))  # fmt: skip
                        stats["scored" if r.ok else "failed"] += 1
                store.write_scores(updates)
                bar.update(len(part))
    stats["seconds"] = round(time.perf_counter() - t0, 3)
    if stats["failed"]:
        log.warning(
            "critic: %d pair(s) have no scores (request failed or no valid reply); the next "
            "`lira translate` scores them again", stats["failed"],
        )  # fmt: skip
    return stats
