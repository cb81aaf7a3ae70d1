"""One sweep session for bench run, rerun and train (orchestrator/sweep/session.py): the executor is
closed whatever happens, and a --resume with nothing to resume says so and starts a new sweep.
Fast: the fault worker, one short run."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from orchestrator.config.run_config import RunConfig
from orchestrator.errors import ConfigError
from orchestrator.executors.local import LocalExecutor
from orchestrator.storage.db import Database
from orchestrator.sweep.session import Plan, earlier_sweep, run_sweep


class _Closing(LocalExecutor):
    closed = 0

    def close(self) -> None:
        self.closed += 1


def _sweeps(db: Database) -> list[dict]:
    return list(db.rows(sa.select(db.sweeps).order_by(db.sweeps.c.id)))


def test_a_run_folder_that_cannot_be_made_records_nothing_and_closes_the_executor(tmp_path):
    db_url = str(tmp_path / "r.db")
    db = Database(db_url, create=True)
    (tmp_path / "file").write_text("")
    runner = _Closing(None)
    plan = Plan("m", "matrix", [RunConfig(framework="fault")], db_url, str(tmp_path / "file"), None)

    with pytest.raises(ConfigError, match="is not a folder"):
        run_sweep(db, plan, runner)

    assert runner.closed == 1 and _sweeps(db) == []


def test_resume_without_an_earlier_sweep_says_so_then_runs_and_resumes_it(tmp_path):
    db_url = str(tmp_path / "r.db")
    db = Database(db_url, create=True)
    config = RunConfig(framework="fault", dataset_size=16, batch_size=8, epochs=1, warmup_steps=0)
    said: list[str] = []
    plan = Plan("m", "matrix", [config], db_url, None, None, resume=True, matrix_hash="h1")

    first = run_sweep(db, plan, say=said.append)

    assert said == ["no earlier sweep named 'm': starting a new one"]
    assert list(first.outcomes.values()) == ["ok"] and first.skipped == 0
    earlier = earlier_sweep(db, "m", backstop=True)
    assert earlier is not None and earlier.done == {config.config_hash: {0}}
    plan.earlier, plan.matrix_hash, plan.matrix_path = earlier, "h2", "m.yaml"
    again = run_sweep(db, plan, say=said.append)
    assert again.sweep_id == first.sweep_id and again.outcomes == {} and again.skipped == 1
    assert said[1] == "note: m.yaml changed since sweep 1; configurations are matched by their settings"
    assert [(s["kind"], s["status"]) for s in _sweeps(db)] == [("matrix", "finished")]


def test_resume_with_retry_disturbed_runs_again_what_was_last_flagged_disturbed(tmp_path):
    """A sweep taken beside other load, resumed on a quiet machine with --retry-disturbed: a
    configuration whose latest run was flagged disturbed is not done (it runs again, in the same
    sweep); once a quiet run follows, it is. Without --retry-disturbed, a flagged run is done."""
    db_url = str(tmp_path / "r.db")
    db = Database(db_url, create=True)
    configs = [
        RunConfig(framework="fault", dataset_size=16, batch_size=8, epochs=1, warmup_steps=0, seed=s)
        for s in (1, 2)
    ]
    first = run_sweep(db, Plan("m", "matrix", configs, db_url, None, None, matrix_hash="h"))
    with db.engine.begin() as conn:  # as bench's disturbance check would have flagged them
        conn.execute(sa.update(db.runs).values(disturbed=1))
    both = {c.config_hash for c in configs}
    assert set(earlier_sweep(db, "m", backstop=True).done) == both  # type: ignore[union-attr]
    redo = earlier_sweep(db, "m", backstop=True, redo_disturbed=True)
    assert redo is not None and redo.done == {}

    plan = Plan("m", "matrix", configs[1:], db_url, None, None, resume=True, matrix_hash="h", earlier=redo)
    again = run_sweep(db, plan, say=lambda _line: None)

    assert again.sweep_id == first.sweep_id and list(again.outcomes.values()) == ["ok"]
    ids = [r["id"] for r in db.rows(sa.select(db.runs.c.id).order_by(db.runs.c.id))]
    assert len(ids) == 3  # the flagged attempt is kept
    with db.engine.begin() as conn:  # quiet, whatever this machine's load made of the fault run
        conn.execute(sa.update(db.runs).where(db.runs.c.id == ids[-1]).values(disturbed=0))
    quiet = earlier_sweep(db, "m", backstop=True, redo_disturbed=True)
    assert quiet is not None and quiet.done == {configs[1].config_hash: {0}}
