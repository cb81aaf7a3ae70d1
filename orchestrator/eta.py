"""How long what remains of a sweep will take, from what is known of each configuration.

Each configuration still to run is estimated, in this order (docs/progress.md):

1. the median wall time of earlier `ok` runs of the same configuration (its config_hash), in any
   sweep of the database, and in this sweep as its runs end;
2. else the median time per image of `ok` runs of the same framework, model, device, image size
   and task, times this configuration's images (warm-up steps × batch + training split × epochs
   × repeats): a different batch, data set size or epoch count scales;
3. else nothing: it is counted as a run without history, and the ETA says how many there are.

A run in flight counts its estimate less the time it has run so far, so the ETA moves every time
the line is drawn; one that has run past its estimate adds nothing, and the line says by how much.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence

import sqlalchemy as sa

from orchestrator.config import RunConfig
from orchestrator.db import Database
from orchestrator.errors import BenchError

log = logging.getLogger(__name__)

Family = tuple[str, str, str, int, str | None]


def family(config: RunConfig) -> Family:
    """What a configuration's time per image is taken to depend on, apart from the amount of work."""
    return (config.framework, config.model, config.device, config.image_size, config.task)


def images(config: RunConfig) -> int:
    """The images a run processes, warm-up included (the unit work is scaled by)."""
    return config.warmup_steps * config.batch_size + config.train_size * config.epochs * config.repeats


def clock(seconds: float) -> str:
    seconds = int(max(0, seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"


class History:
    """Wall times of finished `ok` runs: per configuration, and per family as seconds per image."""

    def __init__(self) -> None:
        self.by_hash: dict[str, list[float]] = {}
        self.per_image: dict[Family, list[float]] = {}

    def add(self, config: RunConfig, seconds: float, config_hash: str | None = None) -> None:
        """``config_hash``: a recorded run's own (its row has more settings than an estimate reads)."""
        if not (math.isfinite(seconds) and seconds > 0):  # a row any program wrote may hold anything
            return
        self.by_hash.setdefault(config_hash or config.config_hash, []).append(seconds)
        work = images(config)
        if work > 0:
            self.per_image.setdefault(family(config), []).append(seconds / work)

    def estimate(self, config: RunConfig) -> float | None:
        """Seconds the configuration is expected to take, or None where nothing is known."""
        same = self.by_hash.get(config.config_hash)
        if same:
            return statistics.median(same)
        rates = self.per_image.get(family(config))
        if rates:
            return statistics.median(rates) * images(config)
        return None

    @classmethod
    def from_db(cls, db: Database, configs: Iterable[RunConfig]) -> History:
        """The `ok` runs of the frameworks and models of ``configs``. A database whose rows cannot
        be read for this costs the estimate, never the sweep: a warning, and no history."""
        history = cls()
        wanted = list(configs)
        runs = db.runs
        query = sa.select(
            *(runs.c[name] for name in _COLUMNS), runs.c.config_hash, runs.c.wall_seconds
        ).where(
            runs.c.outcome == "ok",
            runs.c.framework.in_(sorted({c.framework for c in wanted})),
            runs.c.model.in_(sorted({c.model for c in wanted})),
        )
        try:
            for row in db.rows(query):
                history._add_row(row)
        except BenchError as exc:
            log.warning("ETA: earlier runs not read (%s)", exc)
            return cls()
        return history

    def _add_row(self, row: dict) -> None:
        try:
            config = RunConfig(**{name: row[name] for name in _COLUMNS})
            self.add(config, float(row["wall_seconds"]), str(row["config_hash"]))
        except (TypeError, ValueError, OverflowError):  # a value no run of bench would record
            return


# The columns an estimate needs (the rest of a configuration does not enter it).
_COLUMNS = (
    "framework",
    "model",
    "device",
    "image_size",
    "task",
    "batch_size",
    "epochs",
    "repeats",
    "warmup_steps",
    "dataset_size",
    "val_fraction",
)


class Eta:
    """What remains of a sweep: the configurations not yet begun, and those in flight."""

    def __init__(self, total: int, plan: Sequence[RunConfig] = (), history: History | None = None) -> None:
        self.history = history or History()
        self.pending = Counter(c.config_hash for c in plan)
        self.configs = {c.config_hash: c for c in plan}
        self.unplanned = max(0, total - len(plan))  # counted, but not known: nothing to estimate

    def begin(self, config: RunConfig) -> None:
        if self.pending[config.config_hash] > 0:
            self.pending[config.config_hash] -= 1
        elif self.unplanned > 0:
            self.unplanned -= 1

    def end(self, config: RunConfig | None, outcome: str, seconds: float) -> None:
        if config is not None and outcome == "ok":
            self.history.add(config, seconds)

    def text(self, running: Sequence[tuple[RunConfig | None, float]], at_once: int = 1) -> str:
        """`ETA 03:10`, `ETA 03:10 + 2 runs without history`, or `ETA unknown (...)`."""
        known, unknown, over = 0.0, self.unplanned, 0.0
        for hash_, count in self.pending.items():
            estimate = self.history.estimate(self.configs[hash_]) if count else 0.0
            if estimate is None:
                unknown += count
            else:
                known += estimate * count
        for config, elapsed in running:
            estimate = self.history.estimate(config) if config is not None else None
            if estimate is None:
                unknown += 1
            else:
                known += max(0.0, estimate - elapsed)
                over = max(over, elapsed - estimate)
        known /= max(1, at_once)  # runs side by side (Ray): that many at a time
        if unknown and not known:
            text = f"ETA unknown ({_runs(unknown)} without history)"
        else:
            text = f"ETA {clock(known)}" + (f" + {_runs(unknown)} without history" if unknown else "")
        return text + (f" (a run {clock(over)} past its estimate)" if over >= 1 else "")


def _runs(n: int) -> str:
    return f"{n} run" + ("s" if n != 1 else "")
