#!/usr/bin/env bash
# Build the reference side-virtualenv (.venv-ref) holding mosaicml-streaming 0.13.0, idempotently.
#
#   compat/setup.sh            reference only
#   compat/setup.sh --bench    also litdata 0.2.76 (with zstd and pyarrow, so it writes every chunk kind) and
#                              webdataset 1.0.2 (for benchmarks/ and the tests that write litdata datasets)
#
# torch is pinned to the local CPU wheel (2.13.0) in every install through a constraints file, and
# torchvision's fake-kernel registrations for nms/qnms are guarded so `import streaming` works next to it.
# A stamp file makes a second run instant; a half-built venv is finished (or rebuilt) on the next run.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${STREAMING_REF_VENV:-$ROOT/.venv-ref}"
PYTHON="${PYTHON:-python3}"
BENCH=0
for arg in "$@"; do
  case "$arg" in
    --bench) BENCH=1 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "compat/setup.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

# Bump when this script's recipe changes so existing venvs are brought up to date.
RECIPE=3
STAMP="$VENV/.compat-ref-$RECIPE"
BENCH_RECIPE=4
BENCH_STAMP="$VENV/.compat-bench-$BENCH_RECIPE"
CONSTRAINTS="$VENV/constraints-ref.txt"

if [[ -f "$STAMP" && ( $BENCH -eq 0 || -f "$BENCH_STAMP" ) ]]; then
  exit 0
fi

log() { echo "[compat/setup] $*" >&2; }

if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import sys' 2>/dev/null; then
  log "creating $VENV"
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
# pip installs torch (it takes the local CPU wheel, which uv does not look for) and uv; uv installs the rest against
# that torch, in seconds where pip takes minutes (without compiling its modules: the first process to import one
# writes its .pyc; the Makefile does not pass PYTHONDONTWRITEBYTECODE on). pip warns about every empty local index
# directory on these machines; keep the real messages only.
pip_install() {
  "$PY" -m pip --disable-pip-version-check -q install -c "$CONSTRAINTS" "$@" 2>&1 \
    | { grep -v 'is ignored: it is neither a file nor a directory' || true; }
}
uv_install() {
  [[ -x "$VENV/bin/uv" ]] || pip_install 'uv==0.13.9'
  "$VENV/bin/uv" pip install --python "$PY" --quiet -c "$CONSTRAINTS" "$@"
}

cat > "$CONSTRAINTS" <<'PINS'
# Keep torch on the local CPU wheel in the reference venv (an unpinned torch pulls GBs of CUDA wheels).
torch==2.13.0
numpy<2.2
PINS

if [[ ! -f "$STAMP" ]]; then
  log "installing torch==2.13.0 (CPU wheel)"
  pip_install torch==2.13.0 'uv==0.13.9'
  log "installing mosaicml-streaming==0.13.0"
  uv_install 'mosaicml-streaming==0.13.0' 'numpy<2.2'
  log "guarding torchvision nms/qnms fake registrations"
  "$PY" "$ROOT/compat/patch_torchvision.py"
  log "verifying import streaming"
  "$PY" -c 'import streaming, torch; assert streaming.__version__ == "0.13.0", streaming.__version__; assert torch.__version__.startswith("2.13.0"), torch.__version__'
  touch "$STAMP"
fi

if [[ $BENCH -eq 1 && ! -f "$BENCH_STAMP" ]]; then
  log "installing litdata==0.2.76 (with zstd, pyarrow) and webdataset==1.0.2"
  uv_install 'litdata==0.2.76' 'webdataset==1.0.2' 'zstd' 'pyarrow'
  # A new install may have replaced torchvision; re-apply (idempotent) and re-verify everything.
  "$PY" "$ROOT/compat/patch_torchvision.py"
  "$PY" -c 'import streaming, litdata, webdataset, zstd, pyarrow, torch; assert torch.__version__.startswith("2.13.0")'
  touch "$BENCH_STAMP"
fi
log "ready: $VENV"
