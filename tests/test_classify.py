"""The outcome rules on their own, for the cases no fault can stage safely on a shared machine
(the kernel's OOM killer) and for the precedence between kinds of evidence."""

from __future__ import annotations

import json
import signal

from orchestrator.launch.outcomes import classify, fatal_traceback, read_events
from orchestrator.launch.process import Finished


def finished(code: int, **kw) -> Finished:
    return Finished(returncode=code, wall_seconds=1.0, **kw)


def test_sigkill_with_oom_kill_evidence_is_oom(tmp_path):
    out = classify(finished(-signal.SIGKILL, oom_kills=1), tmp_path, 10)
    assert out.outcome == "oom" and out.signal_name == "SIGKILL"
    assert "OOM killer" in out.reason


def test_sigkill_without_evidence_is_a_crash(tmp_path):
    out = classify(finished(-signal.SIGKILL), tmp_path, 10)
    assert (out.outcome, out.signal_name, out.signal_number) == ("crash", "SIGKILL", 9)


def test_bus_error_and_fpe_are_named(tmp_path):
    assert classify(finished(-signal.SIGBUS), tmp_path, 10).signal_name == "SIGBUS"
    assert classify(finished(-signal.SIGFPE), tmp_path, 10).signal_name == "SIGFPE"


def test_timeout_and_interruption_win_over_the_signal(tmp_path):
    assert classify(finished(-15, timed_out=True), tmp_path, 10).outcome == "timeout"
    assert classify(finished(-15, interrupted=True), tmp_path, 10).outcome == "interrupted"


def test_nonzero_exit_saying_out_of_memory_is_oom(tmp_path):
    (tmp_path / "stderr.log").write_text("terminate called after throwing an instance of 'std::bad_alloc'\n")
    assert classify(finished(1), tmp_path, 10).outcome == "oom"


EPOCH = {"repeat": 0, "epoch": 1, "seconds": 1.0, "steps": 2, "images": 8}


def test_ok_result_with_nonzero_exit_is_error(tmp_path):
    (tmp_path / "result.json").write_text(json.dumps({"status": "ok", "epochs": [EPOCH]}))
    out = classify(finished(3), tmp_path, 10)
    assert out.outcome == "error" and "after reporting ok" in out.reason


def test_ok_without_epochs_is_invalid(tmp_path):
    (tmp_path / "result.json").write_text(json.dumps({"status": "ok", "epochs": []}))
    assert classify(finished(0), tmp_path, 10).outcome == "invalid"
    (tmp_path / "result.json").write_text(json.dumps({"status": "great"}))
    assert classify(finished(0), tmp_path, 10).outcome == "invalid"


def test_a_truncated_last_event_is_skipped(tmp_path):
    (tmp_path / "events.jsonl").write_text('{"event": "start"}\n{"event": "step", "epo')
    assert read_events(tmp_path / "events.jsonl") == [{"event": "start"}]


def test_fatal_traceback_is_cut_from_stderr():
    stderr = "noise\nFatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent call first):\n"
    assert fatal_traceback(stderr).startswith("Fatal Python error: Segmentation fault")
    assert fatal_traceback("no dump here") is None
