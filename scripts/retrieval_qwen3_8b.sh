#!/usr/bin/env bash
# GPU recipe for the paper's retrieval setting (paper 004 §5, Tables 1, 2, 9, 10, 15, 16):
# h = Qwen3-Embedding-8B, g = mT5-XL (fine-tuned in full, App. C), the pass@k pool of Table 15 (Llama-3.3-70B,
# Gemma-2-27B, Qwen3-32B, DeepSeek-R1-Distill-Qwen-32B; NLLB-3.3B, m2m100, OPUS-MT, NLLB-600M)
# with Qwen3-32B as critic; Arca and LaSR on LazRetrieval's released train split; then the
# LazRetrieval test split per country and the MTEB tasks, printed as the paper's tables.
#
#   bash scripts/retrieval_qwen3_8b.sh                  # everything (one 8 x 80 GB node)
#   DRY_RUN=1 bash scripts/retrieval_qwen3_8b.sh        # print the stage commands only
#   MTEB_DATA=data/mteb bash scripts/retrieval_qwen3_8b.sh   # offline: local task copies
#   bash scripts/retrieval_qwen3_8b.sh translation.pass_at_k=2   # Table 16's other rows
#
# Data (not shipped): data/lazretrieval/{train,test}/{query,item,pairs_info}.json (the release).
# Weights: every model of configs/retrieval_qwen3_8b.yaml (checked first; Llama and Gemma are
# gated on the hub). Offline MTEB: MTEB_DATA=DIR with DIR/<Task> a copy of the task's dataset
# repo (`hf download mteb/belebele --repo-type dataset --local-dir DIR/BelebeleRetrieval`, and
# mteb/MLQARetrieval, mteb/sts22-crosslingual-sts for STS22).
#
# GPU memory (bf16, 8 x 80 GB):
#   translate: vLLM servers, one per LLM: Llama-3.3-70B 141 GB on GPUs 0-3 (TP 4), Qwen3-32B
#              66 GB on GPU 4 (translator and critic), Gemma-2-27B 54 GB on GPU 5,
#              DeepSeek-R1-Distill-Qwen-32B 66 GB on GPU 6; each server keeps the rest of its
#              GPUs (0.9 utilisation) as KV cache for max-model-len 2048. The `lira translate`
#              process runs the MT models of pass@k < 4 on GPU 7 (NLLB-3.3B 13 GB in fp32,
#              m2m100-418M 2 GB, OPUS-MT 0.3 GB, NLLB-600M 2.5 GB, one after the other).
#   arca/lasr: servers stopped; DDP on all 8 GPUs: Qwen3-Embedding-8B frozen bf16 15 GB + the
#              mT5-XL encoder trained in full (fp32 weights + grads + AdamW, 1.67 B x 16 B =
#              27 GB) + activations of batch 1 x 512 tokens: about 45 GB per GPU (README,
#              "Why DDP (not FSDP) at the paper's scale").
#   compare:   one GPU: Qwen3-Embedding-8B 16 GB + mT5-XL encoder 6.7 GB (fp32) + embeddings of the
#              largest corpus (MLQA test, ~5k contexts x 4096 floats) < 1 GB.
# Extra arguments are dotted config overrides passed to every stage.
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=${CONFIG:-configs/retrieval_qwen3_8b.yaml}
OUT=${OUT:-out/retrieval_qwen3_8b}
NUM_GPUS=${NUM_GPUS:-8}
BELEBELE=${BELEBELE:-ben_Beng ind_Latn zsm_Latn urd_Arab tha_Thai tgl_Latn vie_Latn deu_Latn spa_Latn rus_Cyrl arb_Arab hin_Deva zho_Hans}
subsets=""
for l in $BELEBELE; do subsets+="${subsets:++}${l}-${l}+eng_Latn-${l}"; done
MTEB_TASKS=${MTEB_TASKS:-MLQARetrieval,BelebeleRetrieval:${subsets},STS22}
MTEB_DATA=${MTEB_DATA:-}
PY=${PY:-.venv/bin/python}
LIRA=${LIRA:-.venv/bin/lira}
ACCELERATE=${ACCELERATE:-.venv/bin/accelerate}
VLLM=${VLLM:-vllm}
mteb_data=()
if [ -n "$MTEB_DATA" ]; then mteb_data=(--mteb-data "$MTEB_DATA"); fi

run() {  # print a stage's command, then run it (DRY_RUN=1: print only)
  echo "+ $*"
  if [ "${DRY_RUN:-0}" != 1 ]; then "$@"; fi
}

PIDS=()
serve() {  # serve MODEL on GPUS (comma list) at PORT with tensor parallelism TP
  local model=$1 gpus=$2 port=$3 tp=$4
  echo "+ CUDA_VISIBLE_DEVICES=$gpus $VLLM serve $model --port $port --tensor-parallel-size $tp"
  if [ "${DRY_RUN:-0}" = 1 ]; then return; fi
  mkdir -p "$OUT/logs"
  CUDA_VISIBLE_DEVICES=$gpus "$VLLM" serve "$model" --host 127.0.0.1 --port "$port" \
    --tensor-parallel-size "$tp" --dtype bfloat16 --max-model-len 2048 \
    --gpu-memory-utilization 0.9 >"$OUT/logs/vllm-$port.log" 2>&1 &
  PIDS+=($!)
}
stop_servers() {
  if [ "${#PIDS[@]}" -gt 0 ]; then kill "${PIDS[@]}" 2>/dev/null || true; wait "${PIDS[@]}" 2>/dev/null || true; fi
  PIDS=()
}
wait_ready() {  # until every server answers /health (model loading takes minutes)
  if [ "${DRY_RUN:-0}" = 1 ]; then return; fi
  for port in "$@"; do
    until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do sleep 15; done
  done
}
trap stop_servers EXIT

# 0. every model and data path the stages need: one clear message naming what is missing
run "$PY" scripts/check_recipe.py "$CONFIG" "${mteb_data[@]}" "$@"
# 1. the translator LLMs and the critic as OpenAI-compatible vLLM servers (ports as in the config)
serve meta-llama/Llama-3.3-70B-Instruct 0,1,2,3 8001 4
serve google/gemma-2-27b-it 5 8002 1
serve Qwen/Qwen3-32B 4 8003 1
serve deepseek-ai/DeepSeek-R1-Distill-Qwen-32B 6 8004 1
wait_ready 8001 8002 8003 8004
# 2. the store: K candidates + critic scores of LazRetrieval's sources, then of the MTEB texts
CUDA_VISIBLE_DEVICES=7 run "$LIRA" translate "$CONFIG" --output-dir "$OUT" "$@"
CUDA_VISIBLE_DEVICES=7 run "$LIRA" translate "$CONFIG" --output-dir "$OUT" \
  --mteb "$MTEB_TASKS" "${mteb_data[@]}" "$@"
stop_servers
# 3. Arca, then LaSR, on every GPU through accelerate's DDP launcher (offline translation)
run "$ACCELERATE" launch --num_processes "$NUM_GPUS" --mixed_precision bf16 \
  -m lira arca "$CONFIG" --output-dir "$OUT" "$@"
run "$ACCELERATE" launch --num_processes "$NUM_GPUS" --mixed_precision bf16 \
  -m lira lasr "$CONFIG" --output-dir "$OUT" "$@"
# 4. LazRetrieval's test split per country (Table 1), then the MTEB tasks (Tables 2, 16)
CUDA_VISIBLE_DEVICES=0 run "$LIRA" compare "$CONFIG" --output-dir "$OUT" "$@"
CUDA_VISIBLE_DEVICES=0 run "$LIRA" compare "$CONFIG" --output-dir "$OUT" \
  --mteb "$MTEB_TASKS" "${mteb_data[@]}" --paper-tables "$@"
