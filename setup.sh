#!/usr/bin/env bash
# Set bench up on a fresh machine and run the quick matrix:
#   1. the project's own virtual environment (.venv) with bench and its test tools;
#   2. one environment per framework (pinned in envs/*.txt; cached, see `bench env list`);
#      Singa needs a Python 3.6 (pyenv's, or BENCH_PYTHON36): without one it is skipped and its
#      runs are recorded `unavailable`, saying how to provide one;
#   3. `bench run --matrix matrices/quick.yaml` into ./bench.db, then `bench report`.
# `./setup.sh --no-run` stops after step 2. Re-running it is cheap: every step is idempotent.
set -euo pipefail
cd "$(dirname "$0")"

python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
    echo "setup.sh: bench needs Python 3.10 or newer as \$PYTHON or python3" >&2
    exit 1
fi
[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
.venv/bin/bench env setup

if [ "${1:-}" != "--no-run" ]; then
    .venv/bin/bench run --matrix matrices/quick.yaml
    .venv/bin/bench report
fi
