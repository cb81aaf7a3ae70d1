"""Sweeps and runs in flight, on disk, so that what a killed bench left behind is found.

A SIGKILL gives bench no chance to end its worker's processes (the kernel's parent-death signal
reaches only the worker itself), to record the run or to close its sweep. So while it works,
bench keeps one small file per sweep and per run in flight in a state folder of the user's
(``$BENCH_STATE_DIR``, else ``$XDG_STATE_HOME/bench/in-flight``, else
``~/.local/state/bench/in-flight``), holding an exclusive lock (flock) on each. The kernel drops
the lock when its process dies, however it dies; so a file nobody holds is one a dead bench left.
The next command that starts runs (`bench run`, `rerun`, `train`) ends that run's processes (its
group, and whatever carries its marker: orchestrator/launch/orphans.py), records the run in the
database the file names (as it ended where its folder holds its record or, for another sweep than
the command's own, its worker's finished result: sweep/adopt.py; else `interrupted`, with the
evidence of its folder), and closes that sweep. A resumed sweep adopts its own finished runs
before it decides what to run (adopt_finished).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import signal
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from orchestrator.config.checks import config_from_data
from orchestrator.config.run_config import RunConfig
from orchestrator.errors import BenchError, DatabaseError
from orchestrator.launch import orphans
from orchestrator.launch.run_record import now
from orchestrator.storage.db import Database, sqlite_path
from orchestrator.sweep import adopt as adoption

STATE_VARIABLE = "BENCH_STATE_DIR"
FILE_BYTES = 64 << 10  # what is read of a state file; bench's own are under 4 KiB
TOKEN = re.compile(r"[0-9a-f]{32}")
# Sizes are stored in bytes; their matrix parser reads a bare number as MiB.
log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from orchestrator.executors.base import Job


def state_dir() -> Path | None:
    """The user's folder of files in flight, made private if new; None (with a warning) if unusable."""
    try:
        raw = os.environ.get(STATE_VARIABLE)
        if raw:
            folder = Path(raw)
        else:
            xdg = os.environ.get("XDG_STATE_HOME")
            folder = (Path(xdg) if xdg else Path.home() / ".local" / "state") / "bench" / "in-flight"
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = folder.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            raise OSError("not a folder of this user")
    except (OSError, RuntimeError) as exc:
        log.warning("runs in flight are not tracked (set %s): %s", STATE_VARIABLE, exc)
        return None
    return folder


def db_key(db: Database) -> str:
    """The database as the files name it: its URL without password, a SQLite file's path absolute."""
    path = sqlite_path(db.url) if db.backend == "sqlite" else None
    return f"sqlite:///{path.resolve()}" if path is not None else db.public_url


def note_worker(path: Path, pid: int) -> None:
    """Add the worker's process group and its leader's start time to a run's file."""
    try:
        with open(path, "a") as f:
            f.write(f"{pid} {orphans.start_time(pid) or 0}\n")
    except OSError as exc:
        log.warning("could not note the worker of %s: %s", path, exc)


@dataclass
class _Held:
    path: Path
    fd: int
    data: dict[str, Any]


def _create(folder: Path, name: str, data: dict[str, Any]) -> _Held | None:
    """Write the file under a temporary name, locked, then rename it: a reader never sees it
    half-written or unlocked."""
    tmp = folder / f".{name}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        log.warning("runs in flight are not tracked: %s: %s", tmp, exc)
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, (json.dumps(data, sort_keys=True) + "\n").encode())
        path = folder / name
        os.rename(tmp, path)
    except OSError as exc:
        log.warning("runs in flight are not tracked: %s: %s", tmp, exc)
        os.close(fd)
        tmp.unlink(missing_ok=True)
        return None
    return _Held(path, fd, data)


def _release(held: _Held) -> None:
    held.path.unlink(missing_ok=True)  # before the lock goes: whoever takes it then sees it removed
    os.close(held.fd)


class Ledger:
    """This bench's sweep and runs in flight, each a locked file until it is recorded."""

    def __init__(self, db: Database, sweep_id: int, folder: Path | None) -> None:
        self.db, self.sweep_id, self.folder = db, sweep_id, folder
        self.key = db_key(db)
        self.runs: dict[Path, _Held] = {}
        self.sweep: _Held | None = None
        if folder is not None:
            data = {"version": 1, "kind": "sweep", "db": self.key, "sweep_id": sweep_id}
            self.sweep = _create(folder, f"sweep-{orphans.new_token()}.json", data)

    def open(self, job: Job) -> Job:
        """The job, marked with a fresh token, and its file written (before its worker starts)."""
        token = orphans.new_token()
        held = None
        if self.folder is not None:
            data = {
                "version": 1,
                "kind": "run",
                "db": self.key,
                "sweep_id": self.sweep_id,
                "run_dir": str(job.run_dir.resolve()),
                "config": job.config.to_dict(),
                "run_index": job.run_index,
                "token": token,
                "started_at": now(),
                "started": time.time(),
            }
            held = _create(self.folder, f"run-{token}.json", data)
        if held is not None:
            self.runs[job.run_dir] = held
        return replace(job, token=token, on_worker_start=partial(note_worker, held.path) if held else None)

    def done(self, run_dir: Path) -> None:
        held = self.runs.pop(run_dir, None)
        if held is not None:
            _release(held)

    def close(self, reason: str) -> None:
        """Record what was handed out but never recorded (the sweep stopped between the worker's
        end and its record), then let the sweep's file go."""
        for run_dir in list(self.runs):
            held = self.runs[run_dir]
            _end_processes(held.data, held.path)
            try:
                adoption.settle(self.db, {**held.data, "config": RunConfig(**held.data["config"])}, reason)
            except (BenchError, sa.exc.SQLAlchemyError, OSError) as exc:
                log.warning("could not record the run in %s: %s", run_dir, exc)
                # The file stays, for the next bench; it says why this one left it.
                _add_note(held.path, f"{reason}, and could not be recorded then ({str(exc)[:300]})")
                os.close(held.fd)
                del self.runs[run_dir]
                continue
            self.done(run_dir)
        if self.sweep is not None:
            _release(self.sweep)
            self.sweep = None


def _end_processes(data: dict[str, Any], path: Path) -> int:
    """End what the run left running: its group if still its own, and everything marked; returns
    how many marked processes there were."""
    token = data["token"]
    before = set(orphans.marked(token))
    worker = _worker_line(path)
    if worker is not None:
        pgid, started = worker
        if orphans.start_time(pgid) != started:  # the leader is gone: is the group still the run's?
            orphans.kill_group_if_ours(pgid, token)
        else:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except OSError:
                pass
    return len(before | orphans.kill_marked(token))


def _add_note(path: Path, note: str) -> None:
    try:
        with open(path, "a") as f:
            f.write(f"note {json.dumps(note)}\n")
    except OSError as exc:
        log.warning("could not add a note to %s: %s", path, exc)


def _note(path: Path) -> str | None:
    """Why a living bench left this run unrecorded, where it could say (its last note)."""
    try:
        with open(path, "rb") as f:
            lines = f.read(FILE_BYTES).split(b"\n")
        notes = [json.loads(line[5:]) for line in lines[1:] if line.startswith(b"note ")]
    except (OSError, ValueError, RecursionError):
        return None
    return notes[-1][:1000] if notes and isinstance(notes[-1], str) else None


def _worker_line(path: Path) -> tuple[int, int] | None:
    try:
        with open(path, "rb") as f:
            lines = f.read(FILE_BYTES).split(b"\n")
    except OSError:
        return None
    match = re.fullmatch(rb"(\d{1,10}) (\d{1,20})", lines[1]) if len(lines) > 1 else None
    return (int(match.group(1)), int(match.group(2))) if match and int(match.group(1)) > 1 else None


def parse(text: bytes) -> dict[str, Any]:
    """A state file's first line, checked; ValueError says what is wrong."""
    data = json.loads(text.split(b"\n", 1)[0].decode("utf-8"))
    if not isinstance(data, dict) or data.get("version") != 1 or data.get("kind") not in ("run", "sweep"):
        raise ValueError("not a bench state file of version 1")
    if not isinstance(data.get("db"), str) or type(data.get("sweep_id")) is not int:
        raise ValueError("db or sweep_id missing")
    if data["kind"] == "run":
        if not isinstance(data.get("token"), str) or not TOKEN.fullmatch(data["token"]):
            raise ValueError("token: not one bench makes")
        if not isinstance(data.get("run_dir"), str) or not Path(data["run_dir"]).is_absolute():
            raise ValueError("run_dir: not an absolute path")
        if not isinstance(data.get("started_at"), str) or type(data.get("started")) is not float:
            raise ValueError("started_at or started missing")
        data["config"] = config_from(data.get("config"))
        index = data.get("run_index", 0)  # absent from a file an older bench wrote
        if type(index) is not int or not 0 <= index < data["config"].runs:
            raise ValueError("run_index: not one of its configuration's runs")
    return data


def config_from(raw: Any) -> RunConfig:
    """A configuration as bench wrote it, checked as a stored row's is (config_checks)."""
    try:
        return config_from_data(raw, "config")
    except DatabaseError as exc:
        raise ValueError(str(exc)) from None


def adopt_finished(db: Database, sweep_id: int, folder: Path | None) -> int:
    """Before a resumed sweep decides what to run: the record of each of its runs a dead bench left
    in flight whose worker finished, written for catch_up to import (so it is not run again); how
    many. The run's file stays, for reap_stale to end what the run left running."""
    if folder is None:
        return 0
    key, count = db_key(db), 0
    for path in sorted(folder.glob("run-*.json")):
        found = _claim(path, set())  # held meanwhile: another bench's reap_stale leaves it alone
        if found is None:
            continue
        try:
            data = found.data
            if (data["db"], data["sweep_id"]) == (key, sweep_id) and not adoption.recorded(db, data):
                count += adoption.adopt_run(db, data)
        except BenchError as exc:
            log.warning("%s: not adopted: %s", data["run_dir"], exc)
        finally:
            os.close(found.fd)
    return count


@dataclass
class _Found:
    path: Path
    fd: int
    data: dict[str, Any]


def _claim(path: Path, live: set[tuple[str, int]]) -> _Found | None:
    """The file if its bench is dead (its lock free) and nobody removed it meanwhile; a live
    bench's sweep goes into ``live``; a malformed file is set aside as .bad."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held = False
    except OSError:
        held = True
    try:
        data = parse(os.read(fd, FILE_BYTES))
    except (ValueError, RecursionError, UnicodeDecodeError, OSError) as exc:
        data = None
        if not held and os.fstat(fd).st_nlink:
            log.warning("%s: not a state file bench can use (%s): set aside as .bad", path, exc)
            path.rename(path.with_suffix(".bad"))
    if held or data is None or not os.fstat(fd).st_nlink:
        if held and data is not None and data["kind"] == "sweep":
            live.add((data["db"], data["sweep_id"]))
        os.close(fd)
        return None
    return _Found(path, fd, data)


def reap_stale(db: Database, current_sweep: int, folder: Path | None) -> None:
    """End, record and close what benches that died left in flight (see the module's docstring)."""
    if folder is None:
        return
    live: set[tuple[str, int]] = set()
    found = [f for f in (_claim(p, live) for p in sorted(folder.glob("*-*.json"))) if f is not None]
    key = db_key(db)
    live.add((key, current_sweep))
    for item in found:
        if item.data["kind"] == "run":
            # The current sweep adopted its finished runs before it decided what to run
            # (adopt_finished); one that finished since is in its plan: interrupted, run once more.
            _settle_run(db, key, item, adopt=(item.data["db"], item.data["sweep_id"]) != (key, current_sweep))
    for item in found:
        if item.data["kind"] == "sweep":
            if (item.data["db"], item.data["sweep_id"]) not in live:
                _close_sweep(db, key, item.data)
            _release(_Held(item.path, item.fd, item.data))


def _settle_run(db: Database, key: str, item: _Found, adopt: bool) -> None:
    killed = _end_processes(item.data, item.path)
    why = _note(item.path) or "bench was killed (SIGKILL, or it crashed) while this run was in flight"
    reason = f"{why}; found by the next bench run at {now()}" + (
        f", which ended {killed} process(es) the run had left running" if killed else ""
    )
    try:
        with _database(db, key, item.data["db"]) as target:
            if adoption.settle(target, item.data, reason, adopt):
                log.warning("recorded the run in %s interrupted: %s", item.data["run_dir"], reason)
    except (BenchError, sa.exc.SQLAlchemyError, OSError) as exc:
        log.warning(
            "ended what the run in %s left running, but could not record it in %s: %s",
            item.data["run_dir"],
            item.data["db"],
            exc,
        )
        os.close(item.fd)  # the file stays: a bench that can open that database records it
        return
    _release(_Held(item.path, item.fd, item.data))


def _close_sweep(db: Database, key: str, data: dict[str, Any]) -> None:
    try:
        with _database(db, key, data["db"]) as target:
            with target.begin() as conn:
                conn.execute(
                    sa.update(target.sweeps)
                    .where(target.sweeps.c.id == data["sweep_id"], target.sweeps.c.status == "running")
                    .values(status="interrupted", ended_at=now())
                )
    except (BenchError, sa.exc.SQLAlchemyError, OSError) as exc:
        log.warning("could not close sweep %s of %s: %s", data["sweep_id"], data["db"], exc)


@contextlib.contextmanager
def _database(db: Database, key: str, wanted: str) -> Iterator[Database]:
    """The database a file names: this command's, or that one opened for the purpose."""
    if wanted == key:
        yield db
        return
    other = Database(wanted, create=False)
    try:
        yield other
    finally:
        other.close()
