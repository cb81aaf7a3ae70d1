"""The machine fingerprint tells CPUs apart by what they can execute (provision/hostinfo.py), and a
run records those features (environments.cpu_flags, schema 12)."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from pathlib import Path

import pytest

from orchestrator.provision import hostinfo
from orchestrator.storage.db import Database, schema_version

DATA = Path(__file__).parent / "data"
MACHINE = {
    "hostname": "vm",
    "platform": "Linux-6.1-x86_64-with-glibc2.36",
    "cpu_model": "AMD EPYC",
    "cpu_count": 2,
    "memory_bytes": 24 * 2**30,
    "gpu_name": None,
    "gpu_driver": None,
}
X86 = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse4_2 avx hypervisor fma avx2 avx512f avx512_bf16 amx_tile amx_bf16 md_clear

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse4_2 avx hypervisor fma avx2 avx512f avx512_bf16 amx_tile amx_bf16 md_clear
"""
ARM = """processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd evtstrm aes asimdhp cpuid asimddp sve bf16 i8mm
CPU implementer\t: 0x41
"""


def test_two_flag_sets_give_two_fingerprints():
    with_bf16 = {**MACHINE, "cpu_flags": ["avx2", "avx512_bf16", "avx512f", "fma"]}
    without = {**MACHINE, "cpu_flags": ["avx2", "avx512f", "fma"]}
    assert hostinfo.fingerprint(with_bf16) != hostinfo.fingerprint(without)
    # The readable part is the same: only the hash tells them apart (the reports' labels show it).
    assert (
        hostinfo.fingerprint(with_bf16).rsplit(" [", 1)[0] == hostinfo.fingerprint(without).rsplit(" [", 1)[0]
    )


def test_flags_that_pick_no_kernel_do_not_split_a_machine():
    listed = "fpu sse4_2 avx fma avx2 hypervisor md_clear".split()
    a = {**MACHINE, "cpu_flags": hostinfo.kernel_flags(listed)}
    b = {**MACHINE, "cpu_flags": hostinfo.kernel_flags(["flush_l1d", *reversed(listed)])}
    assert a["cpu_flags"] == ["avx", "avx2", "fma", "sse4_2"]
    assert hostinfo.fingerprint(a) == hostinfo.fingerprint(b)


def test_unknown_features_keep_the_old_fingerprint_and_differ_from_none():
    old = hostinfo.fingerprint(MACHINE)  # a machine record from before the features were read
    assert hostinfo.fingerprint({**MACHINE, "cpu_flags": None}) == old
    assert hostinfo.fingerprint({**MACHINE, "cpu_flags": []}) != old
    assert hostinfo.fingerprint({**MACHINE, "cpu_flags": ["avx2"]}) != old


def test_model_and_flags_are_read_from_cpuinfo(tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(X86)
    monkeypatch.setattr(hostinfo, "CPUINFO", cpuinfo)
    assert hostinfo._cpu_model() == "Intel(R) Xeon(R) Platinum 8480+"
    assert hostinfo._cpu_flags() == [
        "amx_bf16",
        "amx_tile",
        "avx",
        "avx2",
        "avx512_bf16",
        "avx512f",
        "fma",
        "sse4_2",
    ]
    cpuinfo.write_text(ARM)
    assert hostinfo._cpu_flags() == ["asimd", "asimddp", "asimdhp", "bf16", "i8mm", "sve"]


def test_without_cpuinfo_sysctl_is_asked_or_the_features_are_unknown(tmp_path, monkeypatch):
    monkeypatch.setattr(hostinfo, "CPUINFO", tmp_path / "absent")
    sysctl = tmp_path / "bin" / "sysctl"
    sysctl.parent.mkdir()
    # A stand-in for macOS's sysctl: its two feature lists, as an Intel Mac prints them.
    sysctl.write_text("#!/bin/sh\necho 'FPU SSE4.2 AVX1.0 FMA'\necho 'AVX2 AVX512F AVX512VNNI'\n")
    sysctl.chmod(sysctl.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{sysctl.parent}{os.pathsep}{os.environ['PATH']}")
    assert hostinfo._cpu_flags() == ["avx", "avx2", "avx512_vnni", "avx512f", "fma", "sse4_2"]
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert hostinfo._cpu_flags() is None
    assert hostinfo._cpu_model()  # platform's answer, never empty


def test_this_machine_has_its_features_in_its_record():
    info = hostinfo.machine()
    if Path("/proc/cpuinfo").exists():
        assert isinstance(info["cpu_flags"], list)
        assert set(info["cpu_flags"]) <= hostinfo.KERNEL_FLAGS
    assert hostinfo.fingerprint(info) == hostinfo.fingerprint()


def test_a_version_11_database_gains_the_column_and_keeps_its_rows(tmp_path):
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old)
    conn.executescript((DATA / "schema_v11.sql").read_text())
    conn.execute(
        "INSERT INTO sweeps (name, started_at, status, total_configs, host, machine, bench_version, command)"
        " VALUES ('before', 'now', 'finished', 1, 'h', 'AMD EPYC x2, 24 GiB [5f2a26c8]', '0', 'bench run')"
    )
    conn.commit()
    conn.close()
    Database(str(old), create=False).close()
    conn = sqlite3.connect(old)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema_version() >= 12
    columns = [r[1] for r in conn.execute("PRAGMA table_info(environments)")]
    assert "cpu_flags" in columns
    assert conn.execute("SELECT name, machine FROM sweeps").fetchall() == [
        ("before", "AMD EPYC x2, 24 GiB [5f2a26c8]")
    ]
    conn.close()


@pytest.mark.slow
def test_a_run_records_the_features_and_the_fingerprint_that_covers_them(write_matrix, cli, workdir):
    write_matrix("include:\n  - {framework: fault}\n")
    assert cli("run", "--matrix", "m.yaml").exit_code == 0
    with sqlite3.connect(workdir / "bench.db") as conn:
        (flags,) = conn.execute("SELECT cpu_flags FROM environments").fetchone()
        (machine,) = conn.execute("SELECT machine FROM runs").fetchone()
    known = hostinfo.machine()["cpu_flags"]
    assert flags == (None if known is None else json.dumps(known))
    assert machine == hostinfo.fingerprint()
