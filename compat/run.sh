#!/usr/bin/env bash
# `make compat`: build the reference side-virtualenv if needed, then run the compat tests in our venv.
# Extra arguments go to pytest (for example: ./compat/run.sh -k order -x).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
./compat/setup.sh
exec .venv/bin/python -m pytest compat/tests -q -p no:cacheprovider "$@"
