#!/usr/bin/env bash
# Run bench's tests: sets up what they need first (./setup.sh --no-run), then pytest on two
# pytest-xdist workers, a module's tests on one worker (tests/machine_lock.py: the tests that measure
# the machine itself run with no other test beside them). BENCH_TEST_WORKERS=0 runs them in one
# process. Extra arguments go to pytest, e.g. `./test.sh -m "not slow"`.
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh --no-run
workers="${BENCH_TEST_WORKERS:-$(( $(nproc) < 2 ? $(nproc) : 2 ))}"
exec .venv/bin/python -m pytest -n "$workers" --dist loadfile "$@"
