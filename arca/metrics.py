"""Arca's measurements and training log (paper 004 App. D.2).

:func:`evaluate_items` scores the Actor's arg-max candidate on held-out sources (anchor loss,
cos, eps1, eps2, selection shares and ``cos_shuffled``, the collapse check);
:func:`backbone_epsilon2` is eps2_hat (Eq. 28) on the frozen backbone; :func:`append_log` and
:func:`trim_log` keep ``log.jsonl``: one row per logged step, each step once after a resume.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from arca.candidates import pad_candidates
from arca.data import ArcaItem, CandidateFn, clean_items, fetch_candidates
from arca.losses import anchor_loss, epsilon1, epsilon2, masked_mean
from arca.model import ArcaModel
from lira.accelerator import live_world
from lira.encoding import length_batches
from lira.jsonio import dumps_json

log = logging.getLogger(__name__)


@torch.no_grad()
def backbone_epsilon2(
    backbone: nn.Module, sources: list[str], selected: list[str], device: torch.device | str
) -> Tensor:
    """eps2_hat (Eq. 28) with the frozen backbone's masked-mean last hidden states (Eq. 27)."""
    hx, mx = backbone.token_stream(sources, stream="last_hidden")
    hy, my = backbone.token_stream(selected, stream="last_hidden")
    ex = masked_mean(torch.nan_to_num(hx.float()), mx)
    ey = masked_mean(torch.nan_to_num(hy.float()), my)
    return epsilon2(ex, ey).to(device)


@torch.no_grad()
def evaluate_items(
    model: ArcaModel,
    items: Sequence[ArcaItem],
    fetch: CandidateFn | None,
    batch_size: int,
    device: torch.device | str,
    across_processes: bool = False,
) -> dict[str, object]:
    """Arg-max candidate metrics on held-out sources: anchor loss, cos, eps1, eps2, shares,
    ``batch_size`` sources per forward, in batches sorted by the sources' length (little
    padding). ``across_processes``: every process of a launch calls it with the same items;
    each evaluates its share of the batches and the sums are gathered (the same result
    everywhere, each source evaluated once).

    ``cos_shuffled`` is cos(E_lr(x_i), E_en(y_j)) for mismatched pairs (j = i - 1 within a
    batch): Eq. 5 has no negatives, so cos rising together with cos_shuffled means the
    Adaptor is collapsing rather than aligning.
    """
    was = model.training
    model.eval()
    items, _ = clean_items(items)
    world, rank = live_world() if across_processes else (1, 0)
    batches = length_batches([it.source for it in items], batch_size)[rank::world]
    sums = {"l_anchor": 0.0, "cos": 0.0, "cos_shuffled": 0.0, "eps1": 0.0, "eps2": 0.0}
    picks: Counter[str] = Counter()
    n = 0
    for idx in batches:
        chunk = [items[i] for i in idx]
        cands = fetch_candidates(chunk, fetch)
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
        eps2 = backbone_epsilon2(model.backbone, texts, [c.text for c in sel], device)
        sums["eps2"] += eps2.item() * m
        picks.update(c.translator for c in sel)
        n += m
    model.train(was)
    if world > 1:  # every process's sums, in process order
        from accelerate.utils import gather_object

        parts = gather_object([(sums, dict(picks), n)])
        sums = {k: sum(p[0][k] for p in parts) for k in sums}
        picks = sum((Counter(p[1]) for p in parts), Counter())
        n = sum(p[2] for p in parts)
    res: dict[str, object] = {k: v / n for k, v in sums.items()} if n else {}
    res["n"] = n
    res["selection"] = {k: v / n for k, v in sorted(picks.items())} if n else {}
    return res


def append_log(path: Path, row: dict[str, object]) -> None:
    """Append one row to ``log.jsonl`` (strict JSON, one line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(dumps_json(row, None) + "\n")


def trim_log(path: Path, step: int) -> None:
    """Keep only the ``log.jsonl`` rows up to ``step`` (a resumed run re-logs the steps after
    its checkpoint; a fresh run starts the file anew); drop torn lines."""
    if not path.is_file():
        return
    kept, dropped = [], 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            ok = int(json.loads(line)["step"]) <= step
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
        log.info("Arca: dropped %d log.jsonl row(s) past step %d", dropped, step)


def selection_metrics(
    logits: Tensor, mask: Tensor, critic: Tensor, reference: Tensor
) -> dict[str, Tensor]:
    """Per source, how the Actor's policy picks: ``best_critic`` (its arg-max has the
    best critic score, ties included), ``reference`` (its arg-max is a reference candidate; NaN
    where none is in the pool), ``entropy`` (nats) and ``k`` (candidates).

    logits, critic [B, K] (critic: 0.1 (alpha s + beta e + gamma p), Eq. 7's critic part);
    mask, reference [B, K] bool (real candidates, reference candidates)."""
    mask = mask.bool()
    low = torch.finfo(logits.dtype).min
    lg = logits.float().masked_fill(~mask, low)
    idx = lg.argmax(-1, keepdim=True)  # [B, 1]
    best = critic.float().masked_fill(~mask, float("-inf")).amax(-1)
    picked = critic.float().gather(-1, idx).squeeze(-1)
    logp = torch.log_softmax(lg, dim=-1)
    entropy = -(logp.exp() * logp.masked_fill(~mask, 0.0)).sum(-1)
    ref = (reference.bool() & mask).float()
    has_ref = ref.any(-1)
    hit = ref.gather(-1, idx).squeeze(-1)
    return {
        "best_critic": (picked >= best - 1e-6).float(),
        "reference": torch.where(has_ref, hit, torch.full_like(hit, float("nan"))),
        "entropy": entropy,
        "k": mask.sum(-1).float(),
    }


@torch.no_grad()
def evaluate_actor(
    model: ArcaModel,
    items: Sequence[ArcaItem],
    batch_size: int,
    reference: Sequence[str] = (),
) -> dict[str, object]:
    """The Actor's selection metrics on held-out sources (``eval.actor`` of Arca's summary):
    ``argmax_best_critic``, ``argmax_reference`` (over sources whose pool holds a candidate of a
    translator in ``reference``; None when none does), ``entropy`` (mean nats), ``k`` (mean
    candidates per source), ``n`` sources and ``n_reference``, and ``shares`` /
    ``shares_by_lang``: each translator's share of the arg-max picks among the inference pool
    (the reference candidates left out), pooled and per language."""
    was = model.training
    model.eval()
    items, _ = clean_items(items)
    ac = model.arca_cfg
    weights = torch.tensor([ac.alpha, ac.beta, ac.gamma])
    refs = set(reference)
    rows: dict[str, list[Tensor]] = {"best_critic": [], "reference": [], "entropy": [], "k": []}
    picks: dict[str, Counter[str]] = {}  # lang -> translator -> inference picks
    for i in range(0, len(items), batch_size):
        chunk = [it for it in items[i : i + batch_size] if it.candidates]
        if not chunk:
            continue
        cands = [it.candidates or [] for it in chunk]
        scores, mask, cand_texts, slot = pad_candidates(cands)
        out = model(
            [it.source for it in chunk], model.english_inputs(cand_texts), scores, mask, slot
        )
        is_ref = torch.zeros_like(mask)
        for b, cs in enumerate(cands):
            for k, c in enumerate(cs):
                is_ref[b, k] = c.translator in refs
        critic = 0.1 * (scores * weights).sum(-1)  # [B, K]
        m = selection_metrics(out["logits"].cpu(), mask, critic, is_ref)
        pool = out["logits"].cpu().masked_fill(~mask.bool() | is_ref.bool(), float("-inf"))
        for b, (it, k) in enumerate(zip(chunk, pool.argmax(-1).tolist())):
            if (~is_ref[b].bool() & mask[b].bool()).any():  # the pick at inference
                picks.setdefault(it.lang, Counter())[cands[b][k].translator] += 1
        for k, v in m.items():
            rows[k].append(v)
    model.train(was)
    if not rows["k"]:
        return {"n": 0}
    cat = {k: torch.cat(v) for k, v in rows.items()}
    ref = cat["reference"][~cat["reference"].isnan()]
    return {
        "argmax_best_critic": float(cat["best_critic"].mean()),
        "argmax_reference": float(ref.mean()) if len(ref) else None,
        "entropy": float(cat["entropy"].mean()),
        "k": float(cat["k"].mean()),
        "n": len(cat["k"]),
        "n_reference": len(ref),
        "shares": _shares(sum(picks.values(), Counter())),
        "shares_by_lang": {lang: _shares(c) for lang, c in sorted(picks.items())},
    }


def _shares(picks: Counter[str]) -> dict[str, float]:
    """{translator: its share of the picks} (sorted by name)."""
    total = sum(picks.values())
    return {name: n / total for name, n in sorted(picks.items())} if total else {}
