#!/usr/bin/env bash
# The test command (README, .ci/run): set up .venv/, lint, then run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
.venv/bin/ruff check .
.venv/bin/ruff format --check .
df -h . "${TMPDIR:-/tmp}" | sed "s/^/[test] /" || true  # the suite needs ~4 GB free beside .venv* (README)
.venv/bin/python -m pytest "$@"
