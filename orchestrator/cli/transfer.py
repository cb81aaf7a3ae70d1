"""`bench export` and `bench import`: sweeps carried between databases as one JSON document
(orchestrator/storage/transfer.py): a study's results committed beside it, a colleague's sweeps
added to a team's database; and `bench import RUN_DIR...`, runs added from their folders' records
(orchestrator/sweep/catch_up.py)."""

from __future__ import annotations

import os
from pathlib import Path

import click
import sqlalchemy as sa

from orchestrator import shipped
from orchestrator.cli.options import IdType, db_option, echo
from orchestrator.errors import BenchError
from orchestrator.storage import transfer
from orchestrator.storage.db import Database
from orchestrator.sweep import catch_up


@click.command("export")
@click.option(
    "--sweep",
    "sweep_ids",
    multiple=True,
    type=IdType("export --sweep"),
    help="A sweep to export (repeat for several; default: every sweep in --db).",
)
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The JSON file to write ('-' for standard output).",
)
@click.option(
    "--portable",
    is_flag=True,
    help="Write this machine's home folder as ~ and the current folder as . in every text value "
    "(run folders, interpreters, data folders), so the file holds no path of this machine.",
)
@db_option
def export_command(sweep_ids: tuple[int, ...], out: Path, portable: bool, db_url: str) -> None:
    """Write sweeps to a JSON file another database can import: each sweep, its calibrations, and
    per run its row, environment, epochs, phases, kernel classes and replicas (not the profiler's
    raw samples, which only the timeline reads).

    \b
    Examples:
      bench export --out sweeps.json
      bench export --sweep 3 --portable --out studies/umons/results/cpu.json
    """
    db = Database(db_url, create=False, writing=False)
    try:
        ids = list(sweep_ids) or [
            row["id"] for row in db.rows(sa.select(db.sweeps.c.id).order_by(db.sweeps.c.id))
        ]
        if not ids:
            raise BenchError(f"{db.where}: no sweep to export")
        # A checkout's folder (it holds studies/, whose matrices a study's sweeps name) is written
        # as `.`; an installed bench's parent folder is site-packages, no place of the user's.
        checkout = shipped.CHECKOUT if (shipped.CHECKOUT / "studies").is_dir() else None
        document = transfer.export(db, ids, portable, checkout)
        text = transfer.dumps(document)
    finally:
        db.close()
    if str(out) == "-":
        click.echo(text, nl=False)
        return
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        tmp.replace(out)  # whole or absent
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise BenchError(f"{out}: cannot write ({exc.strerror})") from None
    runs = sum(len(s["runs"]) for s in document["sweeps"])
    echo(f"exported {len(ids)} sweep(s), {runs} runs, to {out}")


@click.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@db_option
def import_command(paths: tuple[Path, ...], db_url: str) -> None:
    """Add to --db (created if absent) what PATHS hold: the sweeps of files that `bench export`
    wrote, and the runs of run folders (or of each run folder in a folder: a sweep's), read from
    their record.json.

    An export file is checked whole before anything is written and imported in one transaction; a
    sweep the database already holds is skipped. A run folder's record joins the sweep it names
    (matched by name, start, host, machine and command, or made), and a record the database holds
    already is counted, not added: importing twice changes nothing. Imported sweeps and runs get
    new ids; a bad record is refused in one line naming its file and key.

    \b
    Examples:
      bench import sweeps.json --db team.db
      bench import studies/umons/results/cpu.json --db umons.db
      bench import bench-runs/sweep-3 --db team.db
      bench import ~/colleague/bench-runs/sweep-7/0002-pytorch-small_cnn-1a2b3c4d --db team.db
    """
    folders = [p for p in paths if p.is_dir()]
    documents = [(path, transfer.read(path)) for path in paths if not path.is_dir()]
    db = Database(db_url, create=True)
    try:
        for path, document in documents:
            done = transfer.import_document(db, document, str(path))
            added = ", ".join(map(str, done.added)) or "none"
            line = f"{path}: {len(done.added)} sweep(s) added (ids {added}), {done.runs} runs"
            if done.skipped:
                line += f"; already here, skipped: {'; '.join(done.skipped)}"
            echo(line)
        if folders:
            _import_folders(db, folders)
    finally:
        db.close()


def _import_folders(db: Database, folders: list[Path]) -> None:
    found = catch_up.import_run_folders(db, folders)
    for line in found.refused:
        echo(f"refused: {line}", err=True)
    ids = ", ".join(str(i.run_id) for i in found.imported)
    echo(
        f"run folders: {len(found.imported)} imported"
        + (f" (runs {ids})" if ids else "")
        + f", {len(found.already)} already there, {len(found.refused)} refused"
    )
    if found.refused:
        raise BenchError(f"{len(found.refused)} run folder(s) refused (above)")
