#!/usr/bin/env bash
# GPU recipe for the paper's reasoning setting (paper 004 §5.1-5.3): Qwen3-8B frozen, Arca trained
# zero-shot on XQuAD-R with Qwen3-8B's input embeddings as h, then MGSM in 10 languages with the
# four modes (direct, translate-en, soft_only, both = LiRA).
#
# Data (not shipped): data/xquad-r/<lang>.json (XQuAD-R) and data/mgsm/mgsm_<lang>.tsv (MGSM,
# question<TAB>answer). X-CSQA: add `xcsqa` to reason.tasks and point reason.xcsqa_path at a
# folder of xcsqa_<lang>.jsonl files (X-CSR's <lang>/dev.jsonl, renamed).
#
# Expected GPU memory (bf16), one 80 GB GPU:
#   translate: vLLM Qwen3-8B, 16.4 GB weights + KV cache (vLLM takes gpu_memory_utilization);
#              NLLB-3.3B 6.6 GB and m2m100-1.2B 2.5 GB run one after the other.
#   arca:      Qwen3-8B frozen as h 16.4 GB (only its input embeddings are read) + mT5-XL encoder
#              with LoRA 3.8 GB + activations for batch 8 x 256 tokens: about 26 GB.
#   reason:    Qwen3-8B 16.4 GB + mT5-XL encoder 3.8 GB + KV cache (36 layers x 8 KV heads x 128
#              x 2 x 2 bytes = 147 kB/token; batch 16 x ~900 tokens = 2.1 GB): about 23 GB.
# A 40 GB GPU runs it with reason.batch_size=8; a 24 GB GPU needs arca.batch_size=2.
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=${CONFIG:-configs/reason_qwen3_8b.yaml}
OUT=${OUT:-out/reason_qwen3_8b}
# translate fills the store (vLLM in-process, tensor_parallel_size in the config);
.venv/bin/lira translate "$CONFIG" --output-dir "$OUT" "$@"
# Arca on every visible GPU through accelerate's DDP launcher;
.venv/bin/accelerate launch --num_processes "${NUM_GPUS:-1}" --mixed_precision bf16 \
  -m lira arca "$CONFIG" --output-dir "$OUT" "$@"
# then generation (one process): per-language accuracy table with 95% bootstrap intervals.
.venv/bin/lira reason "$CONFIG" --output-dir "$OUT" "$@"
cat "$OUT/reason/results.md"
