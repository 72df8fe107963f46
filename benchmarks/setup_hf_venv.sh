#!/usr/bin/env bash
# Build the Parquet peers' side-virtualenv (.venv-hf at the repository root) for benchmarks/bench_parquet.py,
# idempotently:
#   Hugging Face `datasets` 5.x (it needs huggingface-hub 2.x, which breaks the reference's transformers in
#   .venv-ref, hence a virtualenv of its own), torch (for the DataLoader rows), litdata 0.2.76 with polars (its
#   ParquetLoader needs polars, which .venv-ref lacks) and pyarrow.
#
#   benchmarks/setup_hf_venv.sh          build or finish the venv (a stamp makes a second run instant)
#
# Every install goes through the repository's constraints.txt (torch stays on the local CPU wheel, 2.13.0), and
# torchvision's nms/qnms fake registrations are guarded as in .venv-ref (compat/patch_torchvision.py).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${STREAMING_HF_VENV:-$ROOT/.venv-hf}"
PYTHON="${PYTHON:-python3}"
# Bump when this recipe changes so an existing venv is brought up to date.
RECIPE=1
STAMP="$VENV/.bench-hf-$RECIPE"

[[ -f "$STAMP" ]] && exit 0
log() { echo "[setup_hf_venv] $*" >&2; }

if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import sys' 2>/dev/null; then
  log "creating $VENV"
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
pip_install() {
  "$PY" -m pip --disable-pip-version-check -q install -c "$ROOT/constraints.txt" "$@" 2>&1 \
    | { grep -v 'is ignored: it is neither a file nor a directory' || true; }
}

log "installing torch==2.13.0 (CPU wheel)"
pip_install torch==2.13.0
log "installing datasets, litdata==0.2.76, polars, pyarrow"
pip_install 'datasets>=5,<6' 'litdata==0.2.76' 'polars>1.0.0' pyarrow
"$PY" "$ROOT/compat/patch_torchvision.py"
"$PY" -c '
import datasets, huggingface_hub, litdata, polars, pyarrow, torch
from litdata.streaming.item_loader import ParquetLoader
assert torch.__version__.startswith("2.13.0"), torch.__version__
assert int(datasets.__version__.split(".")[0]) >= 5, datasets.__version__
'
touch "$STAMP"
log "ready: $VENV"
