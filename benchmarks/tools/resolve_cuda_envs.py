"""Record what pip resolves each CUDA requirements file (envs/<framework>-cuda.txt) to.

The suite never reaches a package registry; this script does, once, when a CUDA requirements file
changes. It runs `pip install --dry-run --ignore-installed --report` on each file (package metadata
only, nothing installed) and writes every package's resolved version, with the file's SHA-256, to
tests/data/cuda_resolutions.json. tests/test_envs.py then checks, offline, that each recorded
resolution is of the file as it is now (else it says to run this again) and that it is the
framework's CUDA build with a single CUDA major version of CUPTI.

    .venv/bin/python -m benchmarks.tools.resolve_cuda_envs                # every framework with a CUDA file
    .venv/bin/python -m benchmarks.tools.resolve_cuda_envs --framework jax
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RECORD = REPO / "tests" / "data" / "cuda_resolutions.json"
FRAMEWORKS = ("jax", "mxnet", "pytorch", "tensorflow")


def requirements(framework: str) -> Path:
    return REPO / "envs" / f"{framework}-cuda.txt"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def resolve(framework: str) -> dict[str, str]:
    """Package name (lower case) -> version, as pip resolves the file for this machine's Python."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.json"
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
        command += ["--disable-pip-version-check", "--report", str(report)]
        command += ["-r", str(requirements(framework))]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            sys.exit(f"resolve_cuda_envs: {framework}: pip failed: {proc.stderr.strip()[-2000:]}")
        items = json.loads(report.read_text())["install"]
    return {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in items}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=FRAMEWORKS, action="append")
    args = parser.parse_args()
    record = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    python = ".".join(str(n) for n in sys.version_info[:2])
    for framework in args.framework or FRAMEWORKS:
        versions = resolve(framework)
        record[framework] = {
            "requirements_sha256": digest(requirements(framework)),
            "resolved_on": datetime.date.today().isoformat(),
            "python": python,
            "versions": dict(sorted(versions.items())),
        }
        print(f"{framework}: {len(versions)} packages")
    RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"wrote {RECORD.relative_to(REPO)}")


if __name__ == "__main__":
    main()
