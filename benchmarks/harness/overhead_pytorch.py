"""The PyTorch overhead benchmark under its first name: benchmarks/harness/overhead.py --framework pytorch.

Kept so that the commands recorded in docs/performance.md before the benchmark covered every
framework still run as written; every option of overhead.py applies.

    .venv/bin/python -m benchmarks.harness.overhead_pytorch
"""

import sys

from benchmarks.harness.overhead import main

if __name__ == "__main__":
    sys.exit(main(["--framework", "pytorch", *sys.argv[1:]]))
