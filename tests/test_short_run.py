"""An outside program's output, kept bounded: an interpreter bench only asks for its version may
print gigabytes, bytes that are not UTF-8, hang, or leave a child holding its pipes."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.provision.short_run import run_short
from tests import test_env_use
from tests.test_outcomes import pid_alive

env_dir = test_env_use.env_dir  # the fixture: an env dir of the test's own


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_flood_is_cut_at_the_limit_and_said():
    ran = run_short(python("import sys\nfor _ in range(800): sys.stdout.write('x' * 65536)"), 30, 1 << 20)
    assert ran.returncode == 0 and len(ran.stdout) == 1 << 20 and ran.cut


def test_bytes_that_are_not_utf8_are_replaced_not_raised():
    ran = run_short(python("import os; os.write(1, b'3.11\\xff\\xfe\\n'); os.write(2, b'\\xc0')"), 30)
    assert ran.stdout == "3.11\ufffd\ufffd\n" and ran.stderr == "\ufffd" and not ran.cut


def test_a_child_holding_the_pipes_does_not_hold_bench(tmp_path: Path):
    """The program prints, starts a child that keeps stdout open, and exits: bench returns at once
    and the child is ended with its group (subprocess.run would wait for the child, which would
    then finish its sleep and leave its mark)."""
    pid_file, mark = tmp_path / "child", tmp_path / "slept"
    child_code = f"import time; time.sleep(30); open({str(mark)!r}, 'w').write('slept')"
    code = (
        "import subprocess, sys\n"
        f"p = subprocess.Popen([sys.executable, '-c', {child_code!r}])\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
        "print('3.11.7', flush=True)\n"
    )
    ran = run_short(python(code), 120)
    assert ran.returncode == 0 and ran.stdout.strip() == "3.11.7"
    child = int(pid_file.read_text())
    wait_until(lambda: not pid_alive(child), 30)
    assert not mark.exists()  # it never finished its sleep: ended with its group, not waited for


def test_a_program_that_hangs_is_killed_at_the_deadline(tmp_path: Path):
    """Ended at its deadline: the program, which would sleep a minute and then leave its mark, is
    gone when bench gives up on it."""
    pid_file, mark = tmp_path / "pid", tmp_path / "slept"
    code = (
        "import os, time\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "print('x', flush=True)\n"
        f"time.sleep(60); open({str(mark)!r}, 'w').write('slept')"
    )
    with pytest.raises(subprocess.TimeoutExpired):
        run_short(python(code), 1.0)
    if pid_file.exists():  # it may not have started within the second, on a loaded machine
        wait_until(lambda: not pid_alive(int(pid_file.read_text())), 30)
    assert not mark.exists()


def wait_until(condition, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def test_a_program_that_cannot_start_is_oserror(tmp_path: Path):
    with pytest.raises(OSError):
        run_short([str(tmp_path / "none")], 5)


@pytest.mark.parametrize(
    "script,says",
    [
        ("head -c 50000000 /dev/zero | tr '\\0' 'x'", "does not run as Python"),
        ("printf '\\377\\376\\033]0;pwned\\007\\n'", "does not run as Python"),
        ("sleep 600", "does not run"),
    ],
    ids=["flood", "garbage", "hang"],
)
def test_env_use_of_a_hostile_interpreter_is_one_line(
    cli, workdir, env_dir, tmp_path, monkeypatch, script, says
):
    from orchestrator.provision import external_env, short_run

    if script.startswith("sleep"):
        real = short_run.run_short
        monkeypatch.setattr(external_env, "run_short", lambda cmd, timeout: real(cmd, 1.0))
    path = tmp_path / "python"
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)
    start = time.monotonic()
    result = cli("env", "use", "pytorch", "--python", str(path))
    assert time.monotonic() - start < 30
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], lines
    assert "\x1b" not in result.output and len(lines[0]) < 1000
    assert (
        not (env_dir / "external.json").exists() or "pytorch" not in (env_dir / "external.json").read_text()
    )
