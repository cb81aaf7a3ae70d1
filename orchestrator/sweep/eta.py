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
from typing import Any

import sqlalchemy as sa

from orchestrator.config.run_config import RunConfig
from orchestrator.errors import BenchError
from orchestrator.storage.db import Database

log = logging.getLogger(__name__)

Family = tuple[str, str, str, int, str | None]


def family(config: RunConfig) -> Family:
    """What a configuration's time per image is taken to depend on, apart from the amount of work."""
    return (config.framework, config.model, config.device, config.image_size, config.task)


def images(config: RunConfig) -> int:
    """The images a run processes, warm-up included (the unit work is scaled by)."""
    return config.warmup_steps * config.batch_size + config.train_size * config.epochs * config.repeats


def _row_images(row: dict[str, Any]) -> int:
    """images() of a recorded run, from its columns (a RunConfig per row costs more than the rest)."""
    size = int(row["dataset_size"])
    train = size - int(round(size * float(row["val_fraction"])))
    timed = train * int(row["epochs"]) * int(row["repeats"])
    return int(row["warmup_steps"]) * int(row["batch_size"]) + timed


def clock(seconds: float) -> str:
    seconds = int(max(0, seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"


class History:
    """Wall times of finished `ok` runs: per configuration, and per family as seconds per image."""

    def __init__(self) -> None:
        self.by_hash: dict[str, list[float]] = {}
        self.per_image: dict[Family, list[float]] = {}
        self._medians: dict[object, float] = {}  # a sweep of 100,000 asks the same medians again

    def add(self, config: RunConfig, seconds: float) -> None:
        self._add(config.config_hash, family(config), images(config), seconds)

    def _add(self, config_hash: str, group: Family, work: int, seconds: float) -> None:
        if not (math.isfinite(seconds) and seconds > 0):  # a row any program wrote may hold anything
            return
        self.by_hash.setdefault(config_hash, []).append(seconds)
        self._medians.pop(config_hash, None)
        if work > 0:
            self.per_image.setdefault(group, []).append(seconds / work)
            self._medians.pop(group, None)

    def estimate(self, config: RunConfig, config_hash: str | None = None) -> float | None:
        """Seconds the configuration is expected to take, or None where nothing is known."""
        key = config_hash or config.config_hash
        if key in self.by_hash:
            return self._median(key, self.by_hash[key])
        group = family(config)
        if group in self.per_image:
            return self._median(group, self.per_image[group]) * images(config)
        return None

    def _median(self, key: object, values: list[float]) -> float:
        if key not in self._medians:
            self._medians[key] = statistics.median(values)
        return self._medians[key]

    @classmethod
    def from_db(cls, db: Database, configs: Iterable[RunConfig]) -> History:
        """The `ok` runs that may share a family with ``configs`` (each part of the family among the
        values ``configs`` take). A database whose rows cannot be read for this costs the
        estimate, never the sweep: a warning, and no history."""
        history = cls()
        wanted = list(configs)
        runs = db.runs
        query = sa.select(*(runs.c[name] for name in _COLUMNS)).where(
            runs.c.outcome == "ok",
            runs.c.framework.in_(sorted({c.framework for c in wanted})),
            runs.c.model.in_(sorted({c.model for c in wanted})),
            runs.c.device.in_(sorted({c.device for c in wanted})),
            runs.c.image_size.in_(sorted({c.image_size for c in wanted})),
        )
        try:
            for row in db.rows(query):
                history._add_row(row)
        except BenchError as exc:
            log.warning("ETA: earlier runs not read (%s)", exc)
            return cls()
        return history

    def _add_row(self, row: dict[str, Any]) -> None:
        try:
            group = (row["framework"], row["model"], row["device"], row["image_size"], row["task"])
            work = _row_images(row)
            self._add(str(row["config_hash"]), group, work, float(row["wall_seconds"]))
        except (TypeError, ValueError, OverflowError):  # a value no run of bench would record
            return


# The columns an estimate needs (the rest of a configuration does not enter it).
_COLUMNS = (
    "id",  # only so that a bad value's message names its run
    "config_hash",
    "wall_seconds",
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
    """What remains of a sweep: the configurations not yet begun, and those in flight.

    The sum for those not begun is kept per family: a run that begins or ends changes only its own
    family's estimates, so only that family is summed again (a sweep of 100,000 configurations
    would otherwise spend a second at each run's end).
    """

    def __init__(self, total: int, plan: Sequence[RunConfig] = (), history: History | None = None) -> None:
        self.history = history or History()
        self.pending: dict[Family, Counter[str]] = {}
        self.configs: dict[str, RunConfig] = {}
        for config in plan:
            key = config.config_hash
            self.pending.setdefault(family(config), Counter())[key] += 1
            self.configs[key] = config
        self.unplanned = max(0, total - len(plan))  # counted, but not known: nothing to estimate
        self._sums = {group: self._sum(group) for group in self.pending}

    def _sum(self, group: Family) -> tuple[float, int]:
        """Seconds of the family's configurations not yet begun that can be estimated, and how
        many cannot."""
        known, unknown = 0.0, 0
        for key, count in self.pending[group].items():
            estimate = self.history.estimate(self.configs[key], key) if count else 0.0
            if estimate is None:
                unknown += count
            else:
                known += estimate * count
        return known, unknown

    def begin(self, config: RunConfig) -> None:
        group, key = family(config), config.config_hash
        waiting = self.pending.get(group)
        if waiting is not None and waiting[key] > 0:
            waiting[key] -= 1
            self._sums[group] = self._sum(group)
        elif self.unplanned > 0:
            self.unplanned -= 1

    def end(self, config: RunConfig | None, outcome: str, seconds: float) -> None:
        if config is not None and outcome == "ok":
            self.history.add(config, seconds)
            group = family(config)
            if group in self.pending:
                self._sums[group] = self._sum(group)

    def waiting(self) -> tuple[float, int]:
        """Seconds of the configurations not yet begun that can be estimated, and how many cannot."""
        sums = self._sums.values()
        return sum(k for k, _ in sums), sum(u for _, u in sums)

    def text(self, running: Sequence[tuple[RunConfig | None, float]], at_once: int = 1) -> str:
        """`ETA 03:10`, `ETA 03:10 + 2 runs without history`, or `ETA unknown (...)`."""
        known, unknown = self.waiting()
        unknown += self.unplanned
        over = 0.0
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
