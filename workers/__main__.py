"""Entry point: ``python -m workers --spec spec.json``.

Deliberately dumb: read the spec, run the runner with the framework's adapter, write the result.
Every failure it can see becomes a result with plain-data evidence (type, message, traceback);
the ones it cannot see (signals, hard exits) are classified by the orchestrator from outside.
"""

import argparse
import faulthandler
import importlib
import json
import os
import platform
import signal
import sys
import traceback

from workers.adapters.base import Unavailable, Unsupported
from workers.events import EventWriter
from workers import frameworks, releases, runner


def _write_result(path, result):
    # Write-then-rename: a result file is either whole or absent, never half-written.
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, sort_keys=True)
    os.rename(tmp, path)


def _failure(status, exc, events):
    return {
        "status": status,
        "reason": str(exc),
        "exception": {
            "type": type(exc).__name__,
            "message": str(exc),
            "traceback": traceback.format_exc(),
        },
        "phase": events.phase,
    }


def _classify(exc, adapter):
    if isinstance(exc, Unsupported):
        return "unsupported"
    if isinstance(exc, Unavailable):
        return "unavailable"
    try:
        if adapter is not None and adapter.is_oom(exc):
            return "oom"
    except Exception:
        pass
    return "oom" if isinstance(exc, MemoryError) else "error"


def _device_memory(adapter):
    try:
        return adapter.device_memory() if adapter is not None else None
    except Exception:  # a broken device is no reason to lose the failure's own evidence
        return None


def _load_adapter(config, result_path, events):
    module = importlib.import_module("workers.adapters." + config["framework"])
    adapter = module.Adapter(config)
    adapter.result_path = result_path
    adapter.events = events
    return adapter


def _check_release(config):
    """Before the framework is imported: the installed release must be the one the run asked for,
    and one its adapter serves. Returns the installed release (None where unknown)."""
    info = frameworks.BY_NAME.get(config["framework"])
    outcome, reason, installed = releases.refusal(
        config["framework"], info.distribution if info else None, config.get("version"))
    if outcome == "unsupported":
        raise Unsupported(reason)
    if outcome == "unavailable":
        raise Unavailable(reason)
    return installed


def _affinity():
    """The CPUs this process may run on, as the kernel sees it (None where unknown)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m workers")
    parser.add_argument("--spec", required=True, help="the run's spec.json")
    args = parser.parse_args(argv)
    # A segfault or abort leaves a Python traceback in stderr; so does the orchestrator's
    # SIGTERM on timeout, which shows where a hung run was stuck before it dies.
    faulthandler.enable(all_threads=True)
    faulthandler.register(signal.SIGTERM, all_threads=True, chain=True)
    with open(args.spec) as f:
        spec = json.load(f)
    config = spec["config"]
    # The decoded dataset file is where the data is, not part of what the configuration is.
    config["data_file"] = spec.get("data_file")
    # A data-parallel run's replica: its rank, the count and the rendezvous; its share of the
    # threads where the configuration left them to bench (threads 0).
    replica = spec.get("replica")
    config["replica"] = replica
    if replica and replica.get("threads") and not config.get("threads"):
        config["threads"] = replica["threads"]
    events = EventWriter(spec["events_path"])
    events.emit("start", pid=os.getpid(), python=platform.python_version(), executable=sys.executable,
                cpus=_affinity())
    adapter = None
    checked = False
    try:
        _check_release(config)
        checked = True
        adapter = _load_adapter(config, spec["result_path"], events)
        task = runner.probe if spec.get("task") == "probe" else runner.run
        result = task(adapter, config, events)
    except Exception as exc:  # every failure becomes data; BaseExceptions (exit, ^C) pass
        result = _failure(_classify(exc, adapter), exc, events)
        if not checked:  # refused before the import: the release found is the run's evidence
            info = frameworks.BY_NAME.get(config["framework"])
            found = releases.installed(info.distribution) if info and info.distribution else None
            result["info"] = {"framework_version": found}
        sys.stderr.write(result["exception"]["traceback"])
        memory = _device_memory(adapter)
        if memory is not None:
            result["device_memory"] = memory  # an out-of-memory failure's peak, as evidence
    result["python_version"] = platform.python_version()
    result["python_executable"] = sys.executable
    events.emit("end", status=result["status"])
    _write_result(spec["result_path"], result)
    events.close()
    return 0 if result["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
