"""The PyTorch overhead benchmark under its first name: benchmarks/overhead.py --framework pytorch.

Kept so that the commands recorded in docs/performance.md before the benchmark covered every
framework still run as written; every option of overhead.py applies.

    .venv/bin/python benchmarks/overhead_pytorch.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from overhead import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["--framework", "pytorch", *sys.argv[1:]]))
