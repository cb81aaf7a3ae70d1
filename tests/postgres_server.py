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
    """A cluster; `create_database()` gives a fresh database's SQLAlchemy URL."""

    def __init__(self, bin_dir: Path, folder: Path, fsync: bool) -> None:
        self.bin_dir, self.folder = bin_dir, folder
        self.data, self.log = folder / "data", folder / "server.log"
        self.port = _free_port()
        self.as_user = _runner()
        self.options = f"-p {self.port} -k {folder} -c listen_addresses=127.0.0.1 -c max_connections=60"
        self.options += "" if fsync else " -c fsync=off"
        self._names = itertools.count(1)

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bin_dir / tool), *args]
        proc = subprocess.run(
            command, cwd=self.folder, capture_output=True, text=True, timeout=120, **self.as_user
        )
        if proc.returncode != 0:
            tail = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{tool} failed: {proc.stdout[-2000:]}{proc.stderr[-2000:]}{tail}")

    def init(self) -> None:
        pwfile = self.folder / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self.as_user:
            os.chown(pwfile, self.as_user["user"], self.as_user["group"])
        self._run(
            "initdb",
            *("-D", str(self.data), "-U", USER, f"--pwfile={pwfile}", "--encoding=UTF8", "--no-sync"),
            *("--auth-host=scram-sha-256", "--auth-local=trust"),
        )

    def start(self) -> None:
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", self.options, "-l", str(self.log), "-w", "-t", "60", "start"
        )

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def url(self, database: str, password: str | None = PASSWORD) -> str:
        auth = f"{USER}:{password}" if password is not None else USER
        return f"postgresql+psycopg://{auth}@127.0.0.1:{self.port}/{database}"

    def _admin(self):
        import psycopg

        return psycopg.connect(self.url("postgres").replace("+psycopg", ""), autocommit=True)

    def create_database(self, prefix: str = "t") -> str:
        """A new empty database; returns its URL."""
        name = f"{prefix}{next(self._names)}"
        with self._admin() as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def copy_database(self, url: str) -> str:
        """A new database holding what the one at url holds (its open connections are closed)."""
        source, name = url.rsplit("/", 1)[1], f"c{next(self._names)}"
        with self._admin() as conn:
            sql = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s"
            conn.execute(sql, (source,))
            conn.execute(f"CREATE DATABASE {name} TEMPLATE {source}")
        return self.url(name)


@contextmanager
def running(bin_dir: Path, fsync: bool = False) -> Iterator[Server]:
    """A cluster for as long as the block lasts. fsync off by default: a throwaway cluster on a disk
    shared with other work needs no durability; a benchmark that compares with SQLite wants it on."""
    folder = Path(tempfile.mkdtemp(prefix="bench-pg-"))
    os.chmod(folder, 0o755)
    server = Server(bin_dir, folder, fsync)
    if server.as_user:
        os.chown(folder, server.as_user["user"], server.as_user["group"])
    try:
        server.init()
        server.start()
        yield server
    finally:
        try:
            if (server.data / "postmaster.pid").exists():
                server.stop()
        finally:
            shutil.rmtree(folder, ignore_errors=True)
