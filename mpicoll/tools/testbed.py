"""A multi-host test bed on one machine: H emulated hosts joined by a bridge.

``python -m mpicoll.launch --emulate-hosts 2 [--link-rate 1gbit] -n 4 PROGRAM...``
starts the job on H emulated hosts.  Each host is a Linux network + UTS
namespace (its own host name ``emuhost<i>``, its own loopback) with one veth
link, ``eth0`` with address ``10.77.0.<i+1>/24``, whose other end is plugged
into a bridge that lives in a namespace of its own (the "switch").  Nothing is
created in the machine's own network namespace: no address, no route, no
interface, so the emulated hosts can reach each other and nothing else.

Open MPI sees H nodes: ``mpirun`` runs on host 0 and starts its daemon on the
other hosts through PRRTE's ssh launcher, whose agent (``plm_ssh_agent``) is a
script that enters the host's namespaces with ``nsenter`` instead of logging
in.  Ranks on one host share memory (Open MPI's ``sm`` transport and
``COMM_TYPE_SHARED``); between hosts they use TCP over the veth links.
MPICH's ``mpiexec`` (hydra) works the same way: its ssh launcher
(``-launcher-exec``) is the same agent, and UCX is held to TCP on ``eth0``
(``UCX_TLS=tcp,self``; left free, UCX sees one machine and uses shared memory
between the emulated hosts, past the link and its rate).

``--link-rate RATE`` (tc units: ``1gbit``, ``500mbit``) shapes every host's
link in both directions with a token bucket (``tc qdisc ... tbf``: on the
host's ``eth0`` for what it sends, on the switch's port for what it receives),
so each host has RATE up and RATE down, shared by its ranks.  Added latency
(``netem``) is not offered: the kernel of these machines has no netem.

Privileges: as root the namespaces are made directly; as another user the
whole launcher re-runs inside an unprivileged user namespace (``unshare --user
--map-root-user``) when the kernel allows it.  When neither works,
:func:`available` says why and the launcher exits with :data:`SKIP_STATUS`.
The namespaces live as long as their holder processes; on exit (normal,
error, Ctrl-C, SIGTERM) every process left in them is killed, which removes
the namespaces and their links.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

__all__ = ["TestBed", "available", "parse_rate", "run_emulated", "OPTIONS", "SKIP_STATUS"]

OPTIONS = ("--emulate-hosts", "--link-rate")
SKIP_STATUS = 77          # the automake convention for "skipped"
SUBNET = "10.77.0"        # host i is SUBNET.(i+1); only on the test bed's own links
MAX_HOSTS = 200
_INSIDE = "MPICOLL_TESTBED_USERNS"   # set by launch when it re-runs itself inside a user namespace


def _can(cmd: list[str]) -> str | None:
    """None when ``cmd`` runs and succeeds, else a one-line reason."""
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{cmd[0]}: {exc}"
    return None if res.returncode == 0 else (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1]


def available() -> tuple[str | None, str]:
    """(mode, reason): mode ``"root"`` or ``"userns"`` when the test bed can run here, else None and why."""
    for tool in ("unshare", "nsenter", "ip"):
        if shutil.which(tool) is None:
            return None, f"the test bed needs `{tool}` (util-linux / iproute2), which is not on PATH"
    if os.geteuid() == 0:
        why = _can(["unshare", "--net", "--uts", "--", "ip", "link", "add", "b0", "type", "bridge"])
        if why is None:
            return "root", "running as root"
        root_why = why
    else:
        root_why = "not root"
    why = _can(["unshare", "--user", "--map-root-user", "--net", "--uts", "--",
                "ip", "link", "add", "b0", "type", "bridge"])
    if why is None:
        return "userns", "unprivileged user namespaces"
    return None, (f"cannot create network namespaces here (as root: {root_why}; in a user namespace: {why}); "
                  "the emulated multi-host test bed is skipped")


_RATE = re.compile(r"^(\d+(?:\.\d+)?)([kmgt]?)(bit|bps)$", re.IGNORECASE)
_SCALE = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}


def parse_rate(text: str) -> float:
    """A tc rate (``1gbit``, ``100mbit``, ``50mbps``) in bytes per second; ValueError otherwise."""
    match = _RATE.match(text.strip())
    if not match:
        raise ValueError(f"--link-rate: expected a rate such as 1gbit or 100mbit, got {text!r}")
    value = float(match.group(1)) * _SCALE[match.group(2).lower()]
    rate = value / 8 if match.group(3).lower() == "bit" else value
    if rate <= 0:
        raise ValueError(f"--link-rate: the rate must be positive, got {text!r}")
    return rate


def _run(args: list[str]) -> None:
    res = subprocess.run(args, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"test bed: `{' '.join(args)}` failed: {res.stderr.strip()}")


@dataclass
class TestBed:
    """H emulated hosts (namespaces, veth links, a bridge), made on enter and torn down on exit."""

    hosts: int
    link_rate: str | None = None
    holders: list[subprocess.Popen] = field(default_factory=list)
    workdir: str | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.hosts <= MAX_HOSTS:
            raise ValueError(f"--emulate-hosts: expected 1 .. {MAX_HOSTS} hosts, got {self.hosts}")
        if self.link_rate is not None:
            parse_rate(self.link_rate)

    @staticmethod
    def address(i: int) -> str:
        return f"{SUBNET}.{i + 1}"

    @property
    def pids(self) -> list[int]:
        """Holder pids: the switch, then host 0 .. H-1."""
        return [p.pid for p in self.holders]

    def _holder(self, uts: bool) -> subprocess.Popen:
        # unshare execs sleep inside the new namespaces (no fork needed for net and uts): its pid is theirs
        args = ["unshare", "--net"] + (["--uts"] if uts else []) + ["--", "sleep", "infinity"]
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL)
        self.holders.append(proc)
        mine = os.readlink("/proc/self/ns/net")
        for _ in range(500):  # wait until sleep runs in its own namespace
            try:
                if os.readlink(f"/proc/{proc.pid}/ns/net") != mine:
                    return proc
            except OSError:
                pass
            if proc.poll() is not None:
                raise RuntimeError(f"test bed: `{' '.join(args)}` exited with {proc.returncode}")
            time.sleep(0.01)
        raise RuntimeError("test bed: a namespace holder did not start")

    def _in(self, pid: int, *cmd: str, uts: bool = False) -> None:
        _run(["nsenter", "-t", str(pid), "-n", *(["-u"] if uts else []), "--", *cmd])

    def _shape(self, pid: int, dev: str) -> None:
        assert self.link_rate is not None
        rate = parse_rate(self.link_rate)
        burst = max(32 * 1024, int(rate / 1000))  # one millisecond of traffic, and at least 32 KiB
        self._in(pid, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", self.link_rate,
                 "burst", str(burst), "latency", "50ms")

    def __enter__(self) -> TestBed:
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def _build(self) -> None:
        switch = self._holder(uts=False).pid
        self._in(switch, "ip", "link", "add", "br0", "type", "bridge")
        self._in(switch, "ip", "link", "set", "br0", "up")
        for i in range(self.hosts):
            host = self._holder(uts=True).pid
            self._in(switch, "ip", "link", "add", f"h{i}", "type", "veth", "peer", "name", "eth0",
                     "netns", f"/proc/{host}/ns/net")
            self._in(switch, "ip", "link", "set", f"h{i}", "master", "br0", "up")
            self._in(host, "hostname", f"emuhost{i}", uts=True)
            self._in(host, "ip", "link", "set", "lo", "up")
            self._in(host, "ip", "addr", "add", f"{self.address(i)}/24", "dev", "eth0")
            self._in(host, "ip", "link", "set", "eth0", "up")
            if self.link_rate:
                self._shape(host, "eth0")       # what host i sends
                self._shape(switch, f"h{i}")    # what host i receives
        self.workdir = tempfile.mkdtemp(prefix="mpicoll-testbed-")
        cases = "\n".join(f"    {self.address(i)}|emuhost{i}) pid={pid} ;;" for i, pid in enumerate(self.pids[1:]))
        agent = os.path.join(self.workdir, "agent.sh")
        with open(agent, "w") as fh:  # PRRTE calls: agent [options] HOST COMMAND...
            fh.write(f"""#!/bin/sh
# mpicoll test bed: PRRTE's ssh agent; runs COMMAND inside emulated HOST's namespaces
while [ $# -gt 0 ]; do
  case "$1" in
{cases}
    *) shift; continue ;;
  esac
  shift; break
done
[ -n "$pid" ] || {{ echo "mpicoll test bed agent: no emulated host in: $*" >&2; exit 1; }}
exec nsenter -t "$pid" -n -u -- /bin/sh -c "$*"
""")
        os.chmod(agent, 0o755)

    def hostfile(self, nprocs: int, family: str = "openmpi") -> str:
        """A hostfile giving host i ``n // H`` ranks, one more for the first ``n % H``: consecutive ranks
        (``ADDRESS slots=N`` lines for Open MPI, ``ADDRESS:N`` for MPICH's hydra)."""
        assert self.workdir is not None
        path = os.path.join(self.workdir, "hosts")
        base, extra = divmod(nprocs, self.hosts)
        with open(path, "w") as fh:
            for i in range(self.hosts):
                slots = base + (1 if i < extra else 0)
                if slots:
                    fh.write(f"{self.address(i)} slots={slots}\n" if family == "openmpi" else
                             f"{self.address(i)}:{slots}\n")
        return path

    def command(self, mpirun_cmd: list[str], nprocs: int) -> list[str]:
        """``mpirun_cmd`` run on host 0 with the hostfile, the agent and TCP kept to the test bed's subnet."""
        from mpicoll.tools.mpirun import mpi_family  # noqa: PLC0415

        assert self.workdir is not None
        net = f"{SUBNET}.0/24"
        agent = os.path.join(self.workdir, "agent.sh")
        mpirun, rest = mpirun_cmd[0], mpirun_cmd[1:]
        if mpi_family(mpirun) == "mpich":   # hydra: its ssh launcher runs the agent; UCX's TCP on eth0 only
            extra = ["-f", self.hostfile(nprocs, "mpich"), "-launcher", "ssh", "-launcher-exec", agent,
                     "-iface", "eth0", "-genv", "UCX_NET_DEVICES", "eth0", "-genv", "UCX_TLS", "tcp,self"]
        else:
            extra = ["--hostfile", self.hostfile(nprocs), "--map-by", "slot", "--bind-to", "none",
                     "--prtemca", "plm_ssh_agent", agent, "--prtemca", "oob_tcp_if_include", net,
                     "--mca", "oob_tcp_if_include", net, "--mca", "btl_tcp_if_include", net]
        host0 = self.pids[1]
        return ["nsenter", "-t", str(host0), "-n", "-u", "--", mpirun, *extra, *rest]

    def close(self) -> None:
        """Kill every process in the test bed's namespaces, then the holders; remove the work files."""
        spaces = set()
        for p in self.holders:
            try:
                spaces.add(os.readlink(f"/proc/{p.pid}/ns/net"))
            except OSError:
                pass
        mine = os.getpid()
        if spaces:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                left = [pid for pid in _pids() if pid != mine and _netns(pid) in spaces]
                for pid in left:
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        pass
                deadline = time.time() + 3
                while left and time.time() < deadline:
                    left = [pid for pid in left if _alive(pid)]
                    time.sleep(0.05)
        for p in self.holders:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        self.holders.clear()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def __exit__(self, *exc: object) -> None:
        self.close()


def _pids() -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def _netns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


USAGE = ("usage: python -m mpicoll.launch --emulate-hosts H [--link-rate RATE] [-n N] PROGRAM-ARGS...\n"
         "  e.g. --emulate-hosts 2 --link-rate 1gbit -n 4 -m mpicoll.examples.hierarchical_allreduce")


def _parse(args: list[str]) -> tuple[int, str | None, int, list[str]]:
    hosts, rate, nprocs = None, None, 4
    while args and args[0] in (*OPTIONS, "-n", "-np", "--np"):
        if len(args) < 2:
            raise ValueError(f"{args[0]} needs a value\n{USAGE}")
        opt, value, args = args[0], args[1], args[2:]
        if opt == "--emulate-hosts":
            if not value.isdigit():
                raise ValueError(f"--emulate-hosts: expected a number of hosts, got {value!r}")
            hosts = int(value)
        elif opt == "--link-rate":
            parse_rate(value)
            rate = value
        else:
            if not value.isdigit() or int(value) < 1:
                raise ValueError(f"{opt}: expected a number of processes, got {value!r}")
            nprocs = int(value)
    if hosts is None:
        raise ValueError(f"--link-rate needs --emulate-hosts\n{USAGE}")
    if not args:
        raise ValueError(USAGE)
    return hosts, rate, nprocs, args


def run_emulated(args: list[str]) -> int:
    """``launch``'s entry for ``--emulate-hosts``: make the test bed, run mpirun on it, tear it down."""
    from mpicoll.tools.mpirun import launch_env, mpirun_command  # noqa: PLC0415

    try:
        hosts, rate, nprocs, rest = _parse(list(args))
        TestBed(hosts, rate)  # checks the values before anything is made
    except ValueError as exc:
        print(f"mpicoll.launch: {exc}", file=sys.stderr)
        return 2
    if rate and shutil.which("tc") is None:
        print("mpicoll.launch: --link-rate needs `tc` (iproute2), which is not on PATH", file=sys.stderr)
        return 2
    mode = "root" if os.environ.get(_INSIDE) else available()[0]
    if mode is None:
        print(f"mpicoll.launch: {available()[1]}", file=sys.stderr)
        return SKIP_STATUS
    if mode == "userns":  # re-run the launcher as root of a fresh user namespace
        env = dict(os.environ, **{_INSIDE: "1"})
        cmd = ["unshare", "--user", "--map-root-user", "--", sys.executable, "-m", "mpicoll.launch", *args]
        return subprocess.call(cmd, env=env)

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    old = signal.signal(signal.SIGTERM, stop)
    try:
        with TestBed(hosts, rate) as bed:
            return subprocess.call(bed.command(mpirun_command(nprocs, rest), nprocs), env=launch_env())
    except RuntimeError as exc:
        print(f"mpicoll.launch: {exc}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, old)
