"""Hand-built study databases for the study tests: a study folder written into a test's folder, and
a SQLite database whose runs carry figures the test chose, so each claim has a known answer."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from orchestrator.config.run_config import RunConfig
from orchestrator.config.settings import BY_NAME
from orchestrator.storage.db import Database

MATRIX = """\
name: grid
settings: {device: cpu, threads: 2}
axes:
  framework: [pytorch, tensorflow, mxnet]
  model: [alexnet, resnet50]
  batch_size: [1, 8, 32]
"""

STUDY_HEAD = """\
name: t
title: A hand-built study
citation: the tests
matrices:
  - path: grid.yaml
    scale: cpu
"""

SWEEP = "study t/cpu: grid"


def write_study(folder: Path, tail: str = "", matrix: str = MATRIX) -> Path:
    """A study folder `t` under `folder` holding grid.yaml and a study.yaml of STUDY_HEAD + tail."""
    study = folder / "t"
    study.mkdir(parents=True, exist_ok=True)
    (study / "grid.yaml").write_text(matrix)
    (study / "study.yaml").write_text(STUDY_HEAD + tail)
    return study


Cell = tuple[dict[str, Any], Sequence[float], dict[str, Any]]


def write_db(path: Path, cells: Sequence[Cell], sweep: str = SWEEP) -> str:
    """A bench database at `path` whose one sweep, named `sweep`, holds each cell's runs: one ok run
    per figure (seconds per image; images per second its inverse), with the cell's extra columns
    (a list gives each run its own value); an `outcome` in the extras makes every run end so."""
    url = f"sqlite:///{path}"
    Database(url, create=True).close()
    conn = sqlite3.connect(path)
    try:
        cursor = conn.execute(
            "INSERT INTO sweeps (name, started_at, status, total_configs, host, machine, bench_version, "
            "command) VALUES (?, '2026-01-01T00:00:00', 'finished', ?, 'host', 'machine [abc]', 'v', 'b')",
            (sweep, len(cells)),
        )
        sweep_id = cursor.lastrowid
        for settings, figures, extra in cells:
            config = RunConfig(**{"device": "cpu", "threads": 2, **settings})
            values = {BY_NAME[k].runs_column: v for k, v in config.to_dict().items() if not BY_NAME[k].group}
            for index, figure in enumerate(figures):
                row = {
                    **values,
                    "sweep_id": sweep_id,
                    "config_hash": config.config_hash,
                    "config_json": json.dumps(config.to_dict()),
                    "outcome": "ok",
                    "seconds_per_image": figure,
                    "images_per_second": 1 / figure,
                    "disturbed": 0,
                    "started_at": "2026-01-01T00:00:00",
                    "ended_at": "2026-01-01T00:00:01",
                    "wall_seconds": 1.0,
                    "run_dir": "r",
                    "worker_command": "w",
                    "reproduce": "bench rerun",
                    "run_index": index,
                }
                row.update({k: v[index] if isinstance(v, list) else v for k, v in extra.items()})
                names = ", ".join(row)
                marks = ", ".join("?" for _ in row)
                conn.execute(f"INSERT INTO runs ({names}) VALUES ({marks})", list(row.values()))
        conn.commit()
    finally:
        conn.close()
    return url


# Figures for two cells that the runs tell apart (5 runs a side, no overlap), and two that they do not.
FAST = [1.00, 1.01, 0.99, 1.02, 0.98]
SLOW = [2.00, 2.02, 1.98, 2.01, 1.99]
NOISY_A = [1.00, 1.30, 0.80, 1.10, 0.95]
NOISY_B = [1.05, 0.85, 1.25, 0.98, 1.12]
