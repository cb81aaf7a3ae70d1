#!/usr/bin/env bash
# Run bench's tests: sets up what they need first (./setup.sh --no-run), then pytest.
# Extra arguments go to pytest, e.g. `./test.sh -m "not slow"`.
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh --no-run
exec .venv/bin/python -m pytest "$@"
