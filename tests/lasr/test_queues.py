"""CorrQueue / DocQueue: FIFO order, size cap, warm-up, mining rules, DDP all-gather."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from lasr.queues import CorrQueue, DocQueue


def test_corr_queue_fifo_cap_warmup_and_detach():
    q = CorrQueue(max_size=5, min_size=6)
    p = torch.tensor([0.1, 0.2, 0.3], requires_grad=True)
    assert not q.ready(3)  # 0 + 3 < 6: enqueue only
    q.push(p, torch.tensor([1.0, 2.0, 3.0]))
    assert q.ready(3)  # 3 + 3 >= 6
    cp, cg = q.concat(torch.tensor([9.0]), torch.tensor([9.0]))
    assert cp.tolist() == pytest.approx([0.1, 0.2, 0.3, 9.0])
    assert cg.tolist() == [1.0, 2.0, 3.0, 9.0]
    assert not q.pred.requires_grad
    q.push(torch.tensor([0.4, 0.5, 0.6]), torch.tensor([4.0, 5.0, 6.0]))
    assert len(q) == 5 and q.gold.tolist() == [2.0, 3.0, 4.0, 5.0, 6.0]  # oldest dropped
    fresh = CorrQueue(5, 6)
    fresh.load_state_dict(q.state_dict())
    assert fresh.gold.tolist() == q.gold.tolist()


def test_corr_queue_keeps_pred_aligned_with_gold():
    """Each queued prediction stays next to its own label through overflow, concat and resume:
    pred = gold + 100 in every batch, so any misalignment breaks pred − gold = 100."""
    q = CorrQueue(max_size=4)
    for start in (0.0, 3.0, 6.0):
        gold = torch.arange(start, start + 3)
        q.push(gold + 100, gold)
    assert q.gold.tolist() == [5.0, 6.0, 7.0, 8.0]
    assert q.pred.tolist() == [105.0, 106.0, 107.0, 108.0]
    p, t = q.concat(torch.tensor([150.0]), torch.tensor([50.0]))
    assert (p - t).tolist() == [100.0] * 5
    fresh = CorrQueue(4)
    fresh.load_state_dict(q.state_dict())
    assert fresh.pred.tolist() == q.pred.tolist() and fresh.gold.tolist() == q.gold.tolist()
    empty = CorrQueue(0)
    empty.push(torch.tensor([1.0]), torch.tensor([0.0]))
    assert len(empty) == 0 and empty.gold.numel() == 0


def test_corr_queue_gradient_only_through_batch():
    q = CorrQueue(10)
    q.push(torch.tensor([0.5, -0.5]), torch.tensor([1.0, 0.0]))
    batch = torch.tensor([0.2, 0.1], requires_grad=True)
    p, _ = q.concat(batch, torch.tensor([0.7, 0.3]))
    p.sum().backward()
    assert batch.grad.tolist() == [1.0, 1.0]


def _docs(ids, langs, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (
        list(ids),
        list(langs),
        torch.nn.functional.normalize(torch.randn(len(ids), d, generator=g), dim=-1),
    )


def test_doc_queue_fifo_cap_and_replacement():
    q = DocQueue(max_size=4)
    q.push(*_docs(["a", "b", "c"], ["de"] * 3))
    q.push(*_docs(["d", "e"], ["de"] * 2, seed=1))
    assert q.ids == ["b", "c", "d", "e"]
    q.push(*_docs(["c"], ["de"], seed=2))  # re-pushed doc moves to the newest slot
    assert q.ids == ["b", "d", "e", "c"] and len(q) == 4
    fresh = DocQueue(4)
    fresh.load_state_dict(q.state_dict())
    assert fresh.ids == q.ids and torch.equal(fresh.emb, q.emb)


def test_doc_queue_mining_same_language_never_positive():
    q = DocQueue(max_size=10)
    e = torch.eye(4)
    # queued docs: p1 (the positive, most similar), x_de similar, y_es most similar but Spanish
    q.push(
        ["p1", "x_de", "y_es", "z_de"],
        ["de", "de", "es", "de"],
        torch.stack([e[0], 0.9 * e[0] + 0.1 * e[1], e[0], e[2]]),
    )
    query = e[0:1]
    idx, valid = q.mine(query, ["p1"], ["de"], m=3)
    pool = q.ids  # no batch: the pool is the queue
    mined = [pool[i] for i, v in zip(idx[0].tolist(), valid[0].tolist()) if v]
    assert mined[0] == "x_de" and "p1" not in mined and "y_es" not in mined
    assert set(mined) == {"x_de", "z_de"} and valid[0].tolist() == [True, True, False]
    # batch docs come first in the pool; a batch doc equal to a queued id is not duplicated
    b_ids, b_langs, b_emb = ["x_de", "w_de"], ["de", "de"], torch.stack([e[3], e[0]])
    idx, valid = q.mine(
        query, [{"p1", "w_de"}], ["de"], m=4, batch_ids=b_ids, batch_langs=b_langs, batch_emb=b_emb
    )
    pool_ids = ["x_de", "w_de", "p1", "y_es", "z_de"]  # batch first, queued x_de dropped
    pool_emb = torch.cat([b_emb, q.emb[[0, 2, 3]]])
    chosen = idx[0][valid[0]].tolist()
    assert {pool_ids[i] for i in chosen} == {"x_de", "z_de"}  # w_de is also a positive
    neg = q.negatives(idx, b_emb)
    assert neg.shape == (1, idx.shape[1], 4)
    for k, i in enumerate(chosen):
        assert torch.equal(neg[0, k], pool_emb[i])


def test_doc_queue_rescoring_uses_current_model():
    q = DocQueue(max_size=10)
    feats = torch.eye(3)
    stale = torch.stack([torch.eye(3)[1], torch.eye(3)[2], torch.eye(3)[0]])
    q.push(["a", "b", "c"], ["de"] * 3, stale, feats=feats)
    query = torch.eye(3)[0:1]
    idx, _ = q.mine(query, ["zzz"], ["de"], m=1)
    assert q.ids[idx[0, 0]] == "c"  # stale embeddings: c looks hardest
    idx, _ = q.mine(query, ["zzz"], ["de"], m=1, rescore=lambda f: f)
    assert q.ids[idx[0, 0]] == "a"  # current model (identity): a is hardest
    w = torch.ones(3, requires_grad=True)
    neg = q.negatives(idx, torch.zeros(0, 3), rescore=lambda f: f * w)
    neg.sum().backward()
    assert w.grad is not None and w.grad.abs().sum() > 0


def _ddp_worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    cq, dq = CorrQueue(max_size=6), DocQueue(max_size=5)
    for step in range(2):
        n = 2 + rank  # ranks push different batch sizes
        base = 10 * step + 100 * rank
        cq.push(torch.arange(n).float() + base, torch.arange(n).float() - base)
        ids = [f"r{rank}s{step}d{i}" for i in range(n)]
        dq.push(ids, ["de"] * n, torch.full((n, 3), float(base)))
    torch.save(
        {"corr": cq.state_dict(), "doc": dq.state_dict()}, os.path.join(out_dir, f"{rank}.pt")
    )
    dist.destroy_process_group()


@pytest.mark.slow
def test_ddp_all_gather_gives_identical_queues(tmp_path):
    mp.spawn(_ddp_worker, args=(2, str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=True)
    a, b = (torch.load(tmp_path / f"{r}.pt") for r in (0, 1))
    assert torch.equal(a["corr"]["pred"], b["corr"]["pred"])
    assert torch.equal(a["corr"]["gold"], b["corr"]["gold"])
    assert a["doc"]["ids"] == b["doc"]["ids"] and torch.equal(a["doc"]["emb"], b["doc"]["emb"])
    # step 1 gathered rank 0 (2 items) then rank 1 (3 items); max 6 keeps the newest
    assert a["corr"]["pred"].tolist() == [102.0, 10.0, 11.0, 110.0, 111.0, 112.0]
    assert a["doc"]["ids"] == ["r0s1d0", "r0s1d1", "r1s1d0", "r1s1d1", "r1s1d2"]
