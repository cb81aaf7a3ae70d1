"""`bench calibrate`: time the calibration a sweep takes before its first run and after its last
(profiler/calibration.py), now, and say whether the machine runs at the speed a recorded sweep ran
at: the check to make before resuming a sweep, or before setting a new sweep beside an old one.
It writes nothing."""

from __future__ import annotations

import click
import sqlalchemy as sa

from orchestrator.cli.options import IdType, db_option, echo
from orchestrator.errors import BenchError
from orchestrator.launch import calibration as take_calibration
from orchestrator.report.notes import calibration as verdicts
from orchestrator.storage.db import Database, normalise_url, sqlite_path
from profiler.disturbance import OTHER_LIMIT


@click.command()
@click.option(
    "--count",
    default=3,
    show_default=True,
    type=click.IntRange(1, 20),
    help="Calibrations to take, one after another (about a second each); the verdict reads their "
    "median figures, since one alone lies up to a quarter from the next on a quiet machine.",
)
@click.option(
    "--sweep",
    "sweep_id",
    default=None,
    type=IdType("calibrate --sweep"),
    help="The recorded sweep to compare with (default: the last sweep in --db with a calibration).",
)
@db_option
def calibrate(count: int, sweep_id: int | None, db_url: str) -> None:
    """Time the fixed work a sweep times before its first run and after its last (a Python loop, a
    float32 matrix product and a 64 MiB copy, one thread) now, and say whether this machine runs at
    the speed of a recorded sweep. Nothing is written. A calibration beside other load is said and
    left out of the verdict.

    \b
    Examples:
      bench calibrate
      bench calibrate --sweep 3 --db team.db
    """
    db, missing = _database(db_url, sweep_id)
    usable = []
    for index in range(1, count + 1):
        figures = take_calibration.take()
        if "error" in figures:
            echo(f"calibration {index}/{count}: error: {figures['error']}")
            continue
        echo(f"calibration {index}/{count}: {take_calibration.describe(figures)}")
        other = figures.get("other_cpu_percent")
        if other is None or other <= OTHER_LIMIT:
            usable.append({key: figures[key] for key, _ in verdicts.FIGURES})
    if not usable:
        raise BenchError(
            f"no calibration of the {count} taken is usable (each had an error or ran beside other load): "
            "no verdict"
        )
    now = verdicts.medians(usable)
    if db is None:
        echo(f"nothing to compare with: no database at {missing}")
        return
    recorded = verdicts.read(db, [sweep_id] if sweep_id is not None else verdicts.calibrated_sweeps(db))
    if not recorded:
        which = f"sweep {sweep_id} has" if sweep_id is not None else "no sweep has"
        raise BenchError(
            f"{db.where}: {which} a usable calibration (bench run takes one unless --no-calibrate)"
        )
    chosen = sweep_id if sweep_id is not None else max(recorded)
    taken = recorded[chosen]
    echo(verdicts.against(f"now against sweep {chosen} ({len(taken)} taken)", now, verdicts.medians(taken)))


def _database(db_url: str, sweep_id: int | None) -> tuple[Database | None, str]:
    """The database to compare with; None and the missing file where a SQLite file is not there
    and no sweep was asked for (a first calibration on a new machine)."""
    try:
        path = sqlite_path(normalise_url(db_url))
    except sa.exc.ArgumentError:
        path = None  # not a URL: Database says so
    if path is not None and not path.exists() and sweep_id is None:
        return None, str(path)
    return Database(db_url, create=False, writing=False), ""
