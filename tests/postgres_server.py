"""A real, throwaway PostgreSQL server for the tests: a cluster in a temporary folder, on a loopback
port, run by an unprivileged user (PostgreSQL refuses to run as root), with password login.

The binaries are Debian's (`apt-get install postgresql`: /usr/lib/postgresql/VERSION/bin), or
BENCH_PG_BIN. Where there are none the PostgreSQL tests skip, unless BENCH_REQUIRE_POSTGRES=1.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

USER = "bench"
PASSWORD = "bench-test-pw"


def binaries() -> Path | None:
    if os.environ.get("BENCH_PG_BIN"):
        given = Path(os.environ["BENCH_PG_BIN"])
        return given if (given / "pg_ctl").exists() else None
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: int(p.parts[-3]))
    return found[-1].parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _runner() -> dict[str, int]:
    """As root, run the server as the `postgres` user Debian's package makes (or `nobody`)."""
    if os.geteuid() != 0:
        return {}
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return {"user": entry.pw_uid, "group": entry.pw_gid}
    raise RuntimeError("running as root, and no unprivileged user to run PostgreSQL as")


class Server:
    """A running cluster; `url(name)` gives a fresh database's SQLAlchemy URL."""

    def __init__(self, bin_dir: Path, folder: Path, port: int) -> None:
        self.bin_dir, self.folder, self.port = bin_dir, folder, port
        self._names = itertools.count(1)

    def url(self, database: str, password: str | None = PASSWORD) -> str:
        auth = f"{USER}:{password}" if password is not None else USER
        return f"postgresql+psycopg://{auth}@127.0.0.1:{self.port}/{database}"

    def create_database(self, prefix: str = "t") -> str:
        """A new empty database; returns its URL."""
        import psycopg

        name = f"{prefix}{next(self._names)}"
        with psycopg.connect(self.url("postgres").replace("+psycopg", ""), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def copy_database(self, url: str) -> str:
        """A new database holding what the one at url holds (its open connections are closed)."""
        import psycopg

        source, name = url.rsplit("/", 1)[1], f"c{next(self._names)}"
        with psycopg.connect(self.url("postgres").replace("+psycopg", ""), autocommit=True) as conn:
            sql = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s"
            conn.execute(sql, (source,))
            conn.execute(f"CREATE DATABASE {name} TEMPLATE {source}")
        return self.url(name)


@contextmanager
def running(bin_dir: Path) -> Iterator[Server]:
    as_user = _runner()
    folder = Path(tempfile.mkdtemp(prefix="bench-pg-"))
    os.chmod(folder, 0o755)
    if as_user:
        os.chown(folder, as_user["user"], as_user["group"])
    data, pwfile, log = folder / "data", folder / "pw", folder / "server.log"
    pwfile.write_text(PASSWORD + "\n")
    if as_user:
        os.chown(pwfile, as_user["user"], as_user["group"])
    port = _free_port()

    def run(*args: str) -> None:
        proc = subprocess.run(args, cwd=folder, capture_output=True, text=True, timeout=120, **as_user)
        if proc.returncode != 0:
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"{args[0]} failed: {proc.stdout[-2000:]}{proc.stderr[-2000:]}{tail}")

    run(
        str(bin_dir / "initdb"),
        "-D",
        str(data),
        "-U",
        USER,
        f"--pwfile={pwfile}",
        "--auth-host=scram-sha-256",
        "--auth-local=trust",
        "--encoding=UTF8",
        "--no-sync",
    )
    # fsync off: a throwaway cluster on a disk shared with other work; nothing here needs durability.
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60"
    run(str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(log), "-w", "-t", "60", "start")
    try:
        yield Server(bin_dir, folder, port)
    finally:
        try:
            run(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
