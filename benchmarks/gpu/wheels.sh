#!/usr/bin/env bash
# Fill .whl/ (git-ignored) with the wheels bench's orchestrator needs on the GPU machine and that its
# Python 3.12 lacks (docs/gpu.md): SQLAlchemy, the one pure-Python dependency missing there (torch,
# psutil, click, PyYAML, matplotlib, nvidia-ml-py and typing-extensions are installed). greenlet is
# fetched only where the SQLAlchemy version asks for it. Carry the folder with the device tool's
# `carry: [".whl"]`; benchmarks/gpu/check.py installs from it into .gpu-check/site, nothing else.
#
#   benchmarks/gpu/wheels.sh            # the SQLAlchemy version this checkout's .venv runs
#   benchmarks/gpu/wheels.sh 2.0.44     # another version
set -euo pipefail
cd "$(dirname "$0")/../.."  # the repository root
version="${1:-$(.venv/bin/python -c 'import sqlalchemy; print(sqlalchemy.__version__)')}"
platforms=()
for n in 2_28 2_27 2_17 2_5; do platforms+=(--platform "manylinux_${n}_x86_64"); done
platforms+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)
fetch() {
    python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp "${platforms[@]}" -d .whl "$@"
}
mkdir -p .whl
fetch "SQLAlchemy==${version}"
wheel=$(ls .whl/[Ss][Qq][Ll][Aa]lchemy-"${version}"-*.whl)
# Requires-Dist lines without an extra: the ones pip would install with it.
needs=$(unzip -p "$wheel" '*/METADATA' | grep '^Requires-Dist' | grep -v 'extra ==' || true)
echo "SQLAlchemy ${version} requires: ${needs:-nothing}"
if grep -q greenlet <<<"$needs"; then
    fetch "greenlet"
fi
ls -l .whl
du -sh .whl
