"""Schema 12: the fault worker's ten settings are one JSON column, runs.fault. A version 11 database is
folded with every row kept, and the reports read each setting back as its old column held it."""

from __future__ import annotations

import json
from pathlib import Path

import sqlalchemy as sa

from orchestrator.config.run_config import FIELD_NAMES, RunConfig
from orchestrator.config.settings import FAULT_PARTS, fault_value
from orchestrator.storage import postgres
from orchestrator.storage.db import Database, _statements
from orchestrator.storage.migrate import FOLDED_FAULT_COLUMNS
from orchestrator.storage.setting_columns import run_columns, setting_column
from tests import dbs
from tests.dbs import FAULT_COLUMNS

DATA = Path(__file__).parent / "data"
RUN = (
    "INSERT INTO runs (sweep_id, config_hash, framework, model, device, batch_size, optimizer, lr, momentum,"
    " epochs, warmup_steps, repeats, timeout, dataset, dataset_size, image_size, classes, val_fraction,"
    " threads, seed, config_json, outcome, started_at, ended_at, wall_seconds, run_dir, worker_command,"
    " reproduce, fault, exit_code_setting, seconds, after_steps, ignore_sigterm, hold_threads,"
    " hold_memory_mb, hold_seconds, hold_child_memory_mb, fault_replica)"
    " VALUES (1, :hash, :framework, 'small_cnn', 'cpu', 8, 'sgd', 0.1, 0.9, 1, 0, 1, 1, 'synthetic', 8, 8,"
    " 2, 0.2, 0, 0, '{}', 'ok', 't', 't', 0, 'd', 'c', 'r', :fault, :exit_code_setting, :seconds,"
    " :after_steps, :ignore_sigterm, :hold_threads, :hold_memory_mb, :hold_seconds, :hold_child_memory_mb,"
    " :fault_replica)"
)
NAMES = ["hash", "framework", *FAULT_COLUMNS.values()]
ROWS = [
    ("a", "fault", "exit", 7, None, 2, 1, None, None, 0.5, None, 1),
    ("b", "pytorch", None, None, None, None, None, None, None, None, None, None),
    ("c", "fault", "ok", None, None, None, None, None, None, None, None, None),
    ("d", "fault", "hold", None, 1.5, None, 0, 3, 40, 2.0, 10, None),
]
FOLDED = [
    {
        "kind": "exit",
        "exit_code": 7,
        "after_steps": 2,
        "ignore_sigterm": True,
        "hold_seconds": 0.5,
        "replica": 1,
    },
    None,
    {"kind": "ok"},
    {
        "kind": "hold",
        "seconds": 1.5,
        "ignore_sigterm": False,
        "hold_threads": 3,
        "hold_memory_mb": 40,
        "hold_seconds": 2.0,
        "hold_child_memory_mb": 10,
    },
]


def version_11_database(url: str) -> None:
    """A database as bench wrote it at schema 11, holding ROWS, on url's backend."""
    statements = _statements((DATA / "schema_v11.sql").read_text())
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            postgres.portable_metadata(statements).create_all(conn)
            postgres.set_version(conn, 11)
        else:
            for statement in statements:
                conn.exec_driver_sql(statement)
        conn.execute(
            sa.text(
                "INSERT INTO sweeps (name, started_at, status, total_configs, host, machine, bench_version,"
                " command) VALUES ('s', 't', 'finished', 4, 'h', 'm', 'v', 'c')"
            )
        )
        for row in ROWS:
            conn.execute(sa.text(RUN), dict(zip(NAMES, row, strict=True)))
    engine.dispose()


def test_the_fold_keeps_every_row_and_its_fault_settings(db_url):
    version_11_database(db_url)
    Database(db_url, create=False).close()
    columns = set(dbs.columns(db_url)["runs"])
    gone = {column for _, column in FOLDED_FAULT_COLUMNS if column != "fault"}
    assert "fault" in columns and not columns & gone
    rows = dbs.query(db_url, "SELECT config_hash, framework, fault FROM runs ORDER BY id")
    assert [(r["config_hash"], r["framework"]) for r in rows] == [row[:2] for row in ROWS]
    assert [json.loads(r["fault"]) if r["fault"] else None for r in rows] == FOLDED
    db = Database(db_url, create=False)  # opened again: version 13 now, nothing more to fold
    db.close()


def test_the_reports_read_each_folded_setting_as_its_column_held_it(db_url):
    version_11_database(db_url)
    db = Database(db_url, create=False)
    try:
        query = sa.select(*(setting_column(db.runs, name).label(name) for name in FIELD_NAMES))
        read = list(db.rows(query.order_by(db.runs.c.id)))
        whole = list(db.rows(sa.select(*run_columns(db.runs)).order_by(db.runs.c.id)))
        # where_conditions filters the same way: `--where fault=hold` is a condition on the kind
        kind = setting_column(db.runs, "fault")
        held = list(db.rows(sa.select(db.runs.c.config_hash).where(kind.in_(["hold", "exit"]))))
    finally:
        db.close()
    for row, full, want in zip(read, whole, ROWS, strict=True):
        stored = dict(zip(NAMES, want, strict=True))
        for part, column in FAULT_COLUMNS.items():
            assert row[FAULT_PARTS[part]] == stored[column], (part, row[FAULT_PARTS[part]], stored[column])
            assert full[column] == stored[column], (column, full[column], stored[column])
    assert sorted(r["config_hash"] for r in held) == ["a", "d"]


def test_a_recorded_value_is_the_parts_that_are_set_kind_first():
    config = RunConfig(framework="fault", fault="segfault", after_steps=2, replicas=2, fault_replica=1)
    assert fault_value(config.to_dict()) == '{"kind": "segfault", "after_steps": 2, "replica": 1}'
    assert fault_value(RunConfig(framework="pytorch").to_dict()) is None
