"""A private PostgreSQL cluster that a test starts, stops mid-run and starts again: a real
outage of one database, without touching the machine's shared server. Each pytest worker
also runs the suite's own databases on one (``for_tests``, from ``tests/conftest.py``), so
that the tests on Postgres need not queue for one shared server's connections.

Made with the installed ``initdb`` and ``pg_ctl`` in a temporary directory, on a free
loopback port, with trust authentication and no fsync (its data is thrown away; commits are still
written to the WAL before they return, so an immediate stop loses nothing committed). initdb
refuses to run as root, so as root every command runs as the ``postgres`` user.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Sequence

import pytest

from tests.conftest import REQUIRE
from tests.ports import free_port


def _bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def installed() -> bool:
    """Whether ``initdb`` and ``pg_ctl`` are here to start a cluster of the tests' own."""
    return _bin("initdb") is not None and _bin("pg_ctl") is not None


# A worker's own server for the whole suite (``for_tests``): its data is thrown away, so
# nothing is flushed to disk (a crash of the machine is the only way to lose a commit, and
# then the run is lost anyway), and enough connections for a fleet test's nine processes.
FOR_TESTS = (
    "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200 "
    "-c shared_buffers=64MB"
)


class PgCluster:
    def __init__(
        self, *, for_tests: bool = False, wrap: Sequence[str] = (), address: str = "127.0.0.1"
    ) -> None:
        """``wrap``: what every command runs under (``ip netns exec NS``, for a server on a
        host of a test's own net, ``tests/netns.py``), listening on ``address``."""
        self.for_tests = for_tests
        self.wrap = list(wrap)
        self.address = address
        initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
        if initdb is None or pg_ctl is None:
            message = "initdb and pg_ctl are not installed"
            if REQUIRE:
                pytest.fail(f"{message} and PODIUM_REQUIRE_SERVICES=1")
            pytest.skip(message)
        self._initdb, self._pg_ctl = initdb, pg_ctl
        self._as_postgres = os.geteuid() == 0
        self.dir = tempfile.mkdtemp(prefix="podium-pg-")
        self.data = os.path.join(self.dir, "data")
        self.port = free_port()
        if self._as_postgres:
            shutil.chown(self.dir, "postgres", "postgres")
        self._run(self._initdb, "-D", self.data, "-U", "postgres", "-A", "trust", "--no-sync")
        if address != "127.0.0.1":  # initdb trusts loopback only; a net's hosts are its peers
            with open(os.path.join(self.data, "pg_hba.conf"), "a") as hba:
                hba.write("host all all samenet trust\n")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@{self.address}:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        cmd = ["runuser", "-u", "postgres", "--", *args] if self._as_postgres else list(args)
        cmd = self.wrap + cmd
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: {done.stderr or done.stdout}")

    def start(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses={self.address} -k {self.dir} "
            "-c fsync=off"  # a stop here is a process crash, not the machine's: nothing lost
        )
        if self.for_tests:
            options += f" {FOR_TESTS}"
        log = os.path.join(self.dir, "log")
        self._run(self._pg_ctl, "-D", self.data, "-l", log, "-o", options, "-w", "start")

    def stop(self) -> None:
        """As a crash: immediate shutdown, open connections dropped."""
        self._run(self._pg_ctl, "-D", self.data, "-m", "immediate", "-w", "stop")

    def running(self) -> bool:
        try:
            with socket.create_connection((self.address, self.port), timeout=1):
                return True
        except OSError:
            return False

    def destroy(self) -> None:
        if self.running():
            self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
