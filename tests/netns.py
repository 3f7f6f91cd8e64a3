"""Hosts with addresses of their own on one machine, and a network between them that a test
can break: a Linux network namespace per host, each linked by a veth pair to a bridge in a
namespace of the net's own (the switch), and the test's own process joined to that bridge
too, so that it can reach every host as a client would.

What a test can do to a link, each on the hosts' own packet filters (``nft``), and undo:

- ``cut(a, b)``: nothing passes between ``a`` and ``b`` either way; ``cut(a, b,
  both=False)``: ``a`` cannot send to ``b``, ``b``'s packets still reach ``a`` (what a
  one-way partition looks like to TCP: the connection hangs, nobody is told);
- ``lossy(a, b, percent)``: that share of the packets between them dropped at random.

A delay is not offered: the machine's kernel has no ``netem`` queueing discipline (``tc
qdisc add ... netem`` answers "Specified qdisc kind is unknown"), so a slow link is a TCP
proxy's job (``tests/proxy.py``), not the kernel's.

A process runs on a host through ``ip netns exec``; ``paused`` stops it with ``SIGSTOP``
(a frozen process that wakes up believing it still holds its role), and ``argv(skew_s=)`` runs it
under libfaketime with the wall clock moved (the monotonic clock left alone, as NTP would).

Every address is one the net made inside its own namespaces; nothing leaves them. Nets run
at once (one per pytest worker) each on a /24 of their own: a file in a directory of their
own holds a subnet with its owner's pid, so two nets cannot take the same one; a net whose
process died without closing it is swept by the next one that finds its owner gone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pytest

from tests.conftest import REQUIRE

PREFIX = "podnet"  # every namespace of ours starts with it; nothing else is touched
SUBNETS = range(1, 200)  # 10.213.N.0/24
TABLE = "podium_faults"
LOCKS = "/tmp/podium-netns"  # a file per subnet taken, holding its owner's pid


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)


def _must(done: subprocess.CompletedProcess[str], what: str) -> None:
    if done.returncode != 0:
        raise RuntimeError(f"{what}: {done.stderr.strip() or done.stdout.strip()}")


def unavailable() -> str | None:
    """Why nets cannot be made here (no ``ip``, ``nft`` or privileges), or None."""
    if shutil.which("ip") is None or shutil.which("nft") is None:
        return "ip and nft are needed for the network fault tests (scripts/services installs nft)"
    probe = f"{PREFIX}-probe{os.getpid()}"
    made = _ip("netns", "add", probe)
    if made.returncode != 0:
        return f"network namespaces cannot be made here: {made.stderr.strip()}"
    _ip("netns", "del", probe)
    return None


def need() -> None:
    """Skip where nets cannot be made; fail under ``PODIUM_REQUIRE_SERVICES=1`` (CI), as a
    missing backend does."""
    why = unavailable()
    if why is None:
        return
    if REQUIRE:
        pytest.fail(f"{why} and PODIUM_REQUIRE_SERVICES=1")
    pytest.skip(why)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _claim(n: int) -> bool:
    """Take subnet ``n`` for this process: a file made only if absent holds it, with the
    owner's pid, so that two processes cannot both take it."""
    os.makedirs(LOCKS, exist_ok=True)
    try:
        fd = os.open(os.path.join(LOCKS, f"{n}.pid"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(str(os.getpid()))
    return True


def _release(n: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(LOCKS, f"{n}.pid"))


def _sweep() -> None:
    """Remove the namespaces of nets whose process is gone (killed mid-test)."""
    if not os.path.isdir(LOCKS):
        return
    listed = _ip("netns", "list").stdout.split()
    for entry in os.listdir(LOCKS):
        n = entry.removesuffix(".pid")
        try:
            with open(os.path.join(LOCKS, entry)) as f:
                owner = int(f.read().strip() or "0")
        except (OSError, ValueError):
            continue
        if owner and _alive(owner):
            continue
        for name in listed:
            if name.startswith(f"{PREFIX}-{n}-"):
                _ip("netns", "del", name)
        _ip("link", "del", f"pn{n}")
        _release(int(n))


FAKETIME_LIBS = (
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
)


def libfaketime() -> str:
    """libfaketime's multithreaded library (Debian's ``libfaketime``, which ``faketime``
    brings)."""
    for path in FAKETIME_LIBS:
        if os.path.exists(path):
            return path
    raise RuntimeError("libfaketime is needed for a skewed clock (scripts/services installs it)")


@dataclass
class Host:
    net: Net
    name: str
    ns: str
    address: str

    def argv(self, args: Sequence[str], *, skew_s: float = 0.0) -> list[str]:
        """``args`` as run on this host; with ``skew_s``, its wall clock that far off."""
        out = ["ip", "netns", "exec", self.ns]
        if skew_s:
            # libfaketime preloaded by ``env``, which execs: the process keeps the pid the
            # test holds, so a stop reaches it (the ``faketime`` program forks, and its
            # child outlives a kill). Only the wall clock moves; monotonic clocks stay
            # true, as a machine whose NTP is off would have them.
            out += [
                "env",
                f"LD_PRELOAD={libfaketime()}",
                f"FAKETIME={skew_s:+.0f}",
                "DONT_FAKE_MONOTONIC=1",
            ]
        return out + list(args)

    def run(self, *args: str) -> str:
        done = subprocess.run(self.argv(args), capture_output=True, text=True, timeout=30)
        _must(done, f"{self.name}: {' '.join(args)}")
        return done.stdout

    def _nft(self, *rule: str) -> None:
        self.run("nft", *rule)


@dataclass
class Net:
    """A net of hosts; ``close`` removes every namespace and link it made."""

    subnet: int
    switch: str
    root_address: str
    hosts: dict[str, Host] = field(default_factory=dict)

    @classmethod
    def make(cls) -> Net:
        need()
        _sweep()
        for n in SUBNETS:
            if not _claim(n):
                continue
            switch = f"{PREFIX}-{n}-sw"
            _ip("netns", "del", switch)  # left by an owner that was swept meanwhile
            _ip("link", "del", f"pn{n}")
            net = cls(n, switch, f"10.213.{n}.1")
            try:
                _must(_ip("netns", "add", switch), f"namespace {switch}")
                net._wire_switch()
            except BaseException:
                net.close()
                raise
            return net
        raise RuntimeError("every subnet of the network fault tests is taken")

    def _wire_switch(self) -> None:
        sw = self.switch
        _must(_ip("-n", sw, "link", "add", "br0", "type", "bridge"), "bridge")
        _must(_ip("-n", sw, "link", "set", "br0", "up"), "bridge up")
        # The test's own process joins the bridge from the root namespace, under a name
        # that holds the subnet (interface names are at most 15 characters).
        root = f"pn{self.subnet}"
        _must(
            _ip("link", "add", root, "type", "veth", "peer", "name", "root", "netns", sw),
            "the root's link",
        )
        _must(_ip("-n", sw, "link", "set", "root", "master", "br0", "up"), "root port")
        _must(_ip("addr", "add", f"{self.root_address}/24", "dev", root), "root address")
        _must(_ip("link", "set", root, "up"), "root link up")

    def host(self, name: str) -> Host:
        """A new host on the net, with the next address and a loopback of its own."""
        number = len(self.hosts) + 2
        ns = f"{PREFIX}-{self.subnet}-{name}-{os.getpid()}"
        _must(_ip("netns", "add", ns), f"namespace {ns}")
        port = f"h{number}"
        _must(
            _ip(
                "link", "add", "eth0", "netns", ns, "type", "veth",
                "peer", "name", port, "netns", self.switch,
            ),
            f"{name}'s link",
        )  # fmt: skip
        address = f"10.213.{self.subnet}.{number}"
        _must(_ip("-n", self.switch, "link", "set", port, "master", "br0", "up"), "port")
        _must(_ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0"), "address")
        _must(_ip("-n", ns, "link", "set", "eth0", "up"), "link up")
        _must(_ip("-n", ns, "link", "set", "lo", "up"), "loopback up")
        host = Host(self, name, ns, address)
        # The filter every fault goes through: addresses this host may not send to or hear
        # from, and those whose packets are lost at random.
        host._nft("add", "table", "inet", TABLE)
        for s in ("no_send", "no_hear", "lossy"):
            host._nft("add", "set", "inet", TABLE, s, "{ type ipv4_addr; }")
        host._nft("add", "chain", "inet", TABLE, "out", "{ type filter hook output priority 0; }")
        host._nft("add", "chain", "inet", TABLE, "in", "{ type filter hook input priority 0; }")
        host._nft("add", "rule", "inet", TABLE, "out", "ip", "daddr", "@no_send", "drop")
        host._nft("add", "rule", "inet", TABLE, "in", "ip", "saddr", "@no_hear", "drop")
        self.hosts[name] = host
        return host

    def _address(self, who: Host | str) -> str:
        return who.address if isinstance(who, Host) else who

    def cut(self, a: Host, b: Host | str, *, both: bool = True) -> None:
        """``a`` can no longer send to ``b`` (an address, or ``"client"`` for the test's
        own process); with ``both``, nor hear from it. Packets are dropped, not refused:
        to TCP the link hangs."""
        addr = self.root_address if b == "client" else self._address(b)
        a._nft("add", "element", "inet", TABLE, "no_send", f"{{ {addr} }}")
        if both:
            a._nft("add", "element", "inet", TABLE, "no_hear", f"{{ {addr} }}")

    def heal(self, a: Host, b: Host | str) -> None:
        addr = self.root_address if b == "client" else self._address(b)
        for s in ("no_send", "no_hear"):
            with contextlib.suppress(RuntimeError):  # not cut that way
                a._nft("delete", "element", "inet", TABLE, s, f"{{ {addr} }}")

    def lossy(self, a: Host, percent: int) -> None:
        """``percent`` of what ``a`` sends dropped at random (0: none)."""
        a._nft("flush", "chain", "inet", TABLE, "out")
        a._nft("add", "rule", "inet", TABLE, "out", "ip", "daddr", "@no_send", "drop")
        if percent:
            a._nft(
                "add", "rule", "inet", TABLE, "out", "numgen", "random", "mod", "100",
                "<", str(percent), "drop",
            )  # fmt: skip

    def close(self) -> None:
        for host in self.hosts.values():
            _ip("netns", "del", host.ns)
        _ip("netns", "del", self.switch)
        _ip("link", "del", f"pn{self.subnet}")
        _release(self.subnet)


@contextlib.contextmanager
def paused(pid: int) -> Iterator[None]:
    """The process frozen (``SIGSTOP``) for the block, then woken, whatever happened."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)
