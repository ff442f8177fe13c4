"""Private, throwaway Slurm clusters for the tests, of Debian's slurm-wlm, each with a slurm.conf
of its own in a temporary directory (random ports, auth/none, proctrack/linuxproc, task/none:
nothing systemd or cgroups would give; no accounting, a jobcomp/filetxt file), reached by
setting ``SLURM_CONF``:

- ``cluster()``: slurmctld + one slurmd on 127.0.0.1 (this machine's hardware).
- ``nodes()``: slurmctld and two slurmd nodes, each in its own network namespace with its own
  hostname (veth pairs on a private bridge; this host, where the tests submit, is the bridge's
  first address), each node in its own mount namespace where only the cluster's shared
  directory, slurm.conf and the node's own spool are visible of the cluster's directory, and in
  its own PID namespace whose init is slurmd: ``kill -9`` of a node's slurmd ends the node and
  every task on it, as a power cut would (Slurm then marks the node DOWN and its jobs
  NODE_FAIL). A CPU partition ``cpu`` (node ``rbcpu``) and a GPU partition ``gpu`` (node
  ``rbgpu``, one GPU GRES without a device).

Each starts the daemons, waits for the nodes to be idle and tears everything down (scancel,
wait, scontrol shutdown, the daemons by pid, the namespaces and links)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

SBIN = "/usr/sbin:/sbin"


FIXED = """SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
MinJobAge=3600
"""
"""The slurm.conf lines both clusters share (what runs here without systemd, cgroups, munge or
accounting)."""


@dataclass(frozen=True)
class Cluster:
    conf: Path
    dir: Path
    node: str
    """The (first) node's name."""
    env: dict[str, str]
    started_s: float
    """Seconds from starting slurmctld to every node being idle."""
    shared: Path | None = None
    """``nodes()``: the directory every node sees (work there)."""
    node_pids: dict[str, int] | None = None
    """``nodes()``: each node's slurmd, as this host's pid (the init of the node's PID
    namespace: killing it ends the node)."""

    def kill_node(self, name: str) -> None:
        """``kill -9`` of node ``name``'s slurmd (``nodes()`` only): the node and its tasks end."""
        assert self.node_pids is not None
        os.kill(self.node_pids[name], 9)

    def sh(self, *argv: str, check: bool = True) -> str:
        res = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=60)
        if check and res.returncode != 0:
            raise RuntimeError(f"{argv}: rc {res.returncode}: {res.stderr.strip()}")
        return res.stdout


def serve(make: Callable[[], contextlib.AbstractContextManager[Cluster]]) -> Iterator[Cluster]:
    """The body of a test module's cluster fixture: skip (saying why) where no cluster can
    start, else the cluster ``make()`` starts with ``SLURM_CONF`` set (the executor's sbatch,
    squeue and scontrol read it) until the fixture ends."""
    import pytest

    reason = why_not()
    if reason:
        pytest.skip(reason)
    with make() as c, pytest.MonkeyPatch.context() as mp:
        mp.setenv("SLURM_CONF", str(c.conf))
        yield c


def why_not() -> str | None:
    """Why no cluster can start here, or None."""
    path = f"{os.environ.get('PATH', '')}:{SBIN}"
    for tool in ("slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel"):
        if shutil.which(tool, path=path) is None:
            return f"{tool} is not installed (apt-get install slurmctld slurmd slurm-client)"
    if os.geteuid() != 0:
        return "the test cluster's daemons run as root (SlurmdUser) and this is not root"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pid(path: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int(path.read_text().strip())
    return None


@contextlib.contextmanager
def cluster(gpu: bool = False) -> Iterator[Cluster]:
    """``gpu``: the node also declares one GPU GRES without a device (gres.conf ``Name=gpu
    Count=1``, no File: Slurm counts it, binds nothing) and a second partition ``gpu`` holds
    it, so ``--partition=gpu --gres=gpu:1`` is scheduled as on a GPU node."""
    base = Path(tempfile.mkdtemp(prefix="rocmbuild-slurm-"))
    base.chmod(0o755)
    for d in ("state", "spool", "log"):
        (base / d).mkdir()
    env = {**os.environ, "PATH": f"{os.environ.get('PATH', '')}:{SBIN}",
           "SLURM_CONF": str(base / "slurm.conf")}
    node_line = subprocess.run(["slurmd", "-C"], env=env, capture_output=True, text=True,
                               check=True, timeout=60).stdout.splitlines()[0]
    node = node_line.split()[0].split("=", 1)[1]
    (base / "slurm.conf").write_text(f"""\
ClusterName=rocmbuildtest
SlurmctldHost=localhost
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
StateSaveLocation={base}/state
SlurmdSpoolDir={base}/spool
SlurmctldPidFile={base}/slurmctld.pid
SlurmdPidFile={base}/slurmd.pid
SlurmctldLogFile={base}/log/slurmctld.log
SlurmdLogFile={base}/log/slurmd.log
JobCompLoc={base}/log/jobcomp.txt
{FIXED}{"GresTypes=gpu" if gpu else ""}
{node_line}{" Gres=gpu:1" if gpu else ""} NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
{"PartitionName=gpu Nodes=ALL MaxTime=INFINITE State=UP" if gpu else ""}
""")
    if gpu:
        (base / "gres.conf").write_text("Name=gpu Count=1 File=/dev/null\n")
    t0 = time.monotonic()
    try:
        subprocess.run(["slurmctld"], env=env, check=True, timeout=60)
        subprocess.run(["slurmd", "-N", node], env=env, check=True, timeout=60)
        state = ""
        while time.monotonic() - t0 < 60:
            state = subprocess.run(["sinfo", "-h", "-n", node, "-o", "%t"], env=env,
                                   capture_output=True, text=True, timeout=30).stdout.strip()
            if state == "idle":
                break
            time.sleep(0.1)
        else:
            logs = "\n".join(p.read_text()[-2000:] for p in (base / "log").glob("*.log"))
            raise RuntimeError(f"the test Slurm node is {state!r}, not idle, after 60 s:\n{logs}")
        yield Cluster(base / "slurm.conf", base, node, env, time.monotonic() - t0)
    finally:
        _teardown(base, env)


def _teardown(base: Path, env: dict[str, str], procs: list[int] | None = None,
              keep: bool = False) -> None:
    """Cancel every job, wait for the queue to empty, shut the cluster down, then kill the
    daemons (``procs``, else the pid files') that are still alive; remove ``base`` unless
    ``keep``."""
    def quiet(*argv: str) -> str:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            return subprocess.run(argv, env=env, capture_output=True, text=True,
                                  timeout=30).stdout
        return ""

    pids = procs if procs is not None else [
        p for p in (_pid(base / "slurmctld.pid"), _pid(base / "slurmd.pid")) if p]
    try:
        quiet("scancel", "--user=root")  # running jobs would outlive scontrol shutdown
        for _ in range(150):
            if not quiet("squeue", "-h").strip():
                break
            time.sleep(0.2)
        quiet("scontrol", "shutdown")
        for _ in range(100):
            if not any(_alive(p) for p in pids):
                break
            time.sleep(0.1)
    finally:  # whatever stopped the polite way (even a BaseException): no daemon outlives us
        for p in pids:
            if _alive(p):
                with contextlib.suppress(OSError):
                    os.kill(p, 9)
        if not keep:
            shutil.rmtree(base, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    # A zombie (not reaped: PID 1 here does not reap orphans) counts as gone.
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    return False


NODE_BOOT = r"""set -e
cd "$1"
mount -t tmpfs -o size=8m,mode=0755 rbnode "$1"  # the cluster's directory, emptied here...
mkdir -p "$1/shared" "$1/etc" "$1/node/$2"      # ...but for what a node of a real cluster sees
mount --no-canonicalize --bind ./shared "$1/shared"
mount --no-canonicalize --bind ./etc "$1/etc"
mount --no-canonicalize --bind "./node/$2" "$1/node/$2"
cd /
hostname "$2"
exec slurmd -D -N "$2"
"""
"""A node's start, in its own network, UTS, mount and PID namespaces (``$1`` the cluster's
directory, ``$2`` the node's name). The cwd is the directory before the tmpfs hides it, so the
bind mounts' sources still resolve."""

CPUS = 4
"""CPUs each node declares (``SlurmdParameters=config_overrides``: more than this machine has,
so that several 1-CPU cells run at once)."""


def _ip(*argv: str) -> None:
    subprocess.run(["ip", *argv], check=True, capture_output=True, timeout=30)


@contextlib.contextmanager
def nodes() -> Iterator[Cluster]:
    """slurmctld (``rbctl``) and two slurmd nodes (``rbcpu`` in partition ``cpu``, the default;
    ``rbgpu`` in partition ``gpu`` with one GPU GRES without a device), each in its own network
    namespace on a private bridge (see the module's doc)."""
    tag = os.urandom(2).hex()
    net = f"10.{200 + int(tag[:2], 16) % 50}.{int(tag[2:], 16)}"
    base = Path(tempfile.mkdtemp(prefix="rocmbuild-slurm-"))
    base.chmod(0o755)
    for d in ("etc", "ctl/state", "shared", "node/rbcpu/spool", "node/rbgpu/spool"):
        (base / d).mkdir(parents=True)
    (base / "shared").chmod(0o1777)
    conf = base / "etc" / "slurm.conf"
    env = {**os.environ, "PATH": f"{os.environ.get('PATH', '')}:{SBIN}", "SLURM_CONF": str(conf)}
    names = ("rbctl", "rbcpu", "rbgpu")
    addr = {n: f"{net}.{i + 2}" for i, n in enumerate(names)}
    conf.write_text(f"""\
ClusterName=rocmbuildnodes
SlurmctldHost=rbctl({addr['rbctl']})
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
StateSaveLocation={base}/ctl/state
SlurmdSpoolDir={base}/node/%n/spool
SlurmctldPidFile={base}/ctl/slurmctld.pid
SlurmdPidFile={base}/node/%n/slurmd.pid
SlurmctldLogFile={base}/ctl/slurmctld.log
SlurmdLogFile={base}/node/%n/slurmd.log
JobCompLoc={base}/ctl/jobcomp.txt
SlurmdParameters=config_overrides
SlurmdTimeout=10
{FIXED}GresTypes=gpu
NodeName=rbcpu NodeAddr={addr['rbcpu']} CPUs={CPUS} RealMemory=4096 State=UNKNOWN
NodeName=rbgpu NodeAddr={addr['rbgpu']} CPUs={CPUS} RealMemory=4096 Gres=gpu:1 State=UNKNOWN
PartitionName=cpu Nodes=rbcpu Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=rbgpu MaxTime=INFINITE State=UP
""")
    (base / "etc" / "gres.conf").write_text("NodeName=rbgpu Name=gpu Count=1 File=/dev/null\n")
    bridge = f"rb{tag}br"
    made: list[str] = []  # namespaces made, for the teardown
    procs: list[subprocess.Popen[bytes]] = []
    t0 = time.monotonic()
    try:
        _ip("link", "add", bridge, "type", "bridge")
        _ip("addr", "add", f"{net}.1/24", "dev", bridge)
        _ip("link", "set", bridge, "up")
        for i, n in enumerate(names):
            ns = f"rb{tag}{n}"
            _ip("netns", "add", ns)
            made.append(ns)
            _ip("link", "add", f"rb{tag}h{i}", "type", "veth", "peer", "name", f"rb{tag}n{i}")
            _ip("link", "set", f"rb{tag}h{i}", "master", bridge, "up")
            _ip("link", "set", f"rb{tag}n{i}", "netns", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "addr", "add", f"{addr[n]}/24", "dev", f"rb{tag}n{i}")
            _ip("-n", ns, "link", "set", f"rb{tag}n{i}", "up")
        logs = open(base / "ctl" / "daemons.out", "ab")  # noqa: SIM115 (closed by the teardown)
        procs.append(subprocess.Popen(
            ["nsenter", f"--net=/run/netns/rb{tag}rbctl", "unshare", "--uts", "sh", "-c",
             "hostname rbctl && exec slurmctld -D"], env=env, stdout=logs, stderr=logs))
        pids: dict[str, int] = {}
        for n in names[1:]:
            p = subprocess.Popen(
                ["nsenter", f"--net=/run/netns/rb{tag}{n}", "unshare", "--uts", "--mount", "--pid",
                 "--fork", "--mount-proc", "sh", "-c", NODE_BOOT, "sh", str(base), n],
                env=env, stdout=logs, stderr=logs)
            procs.append(p)
            pids[n] = _init_of(p.pid, base / "ctl" / "daemons.out")
        logs.close()
        state = ""
        while time.monotonic() - t0 < 60:
            state = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=env,
                                   capture_output=True, text=True, timeout=30).stdout
            if sorted(state.split()) == sorted(["rbcpu", "idle", "rbgpu", "idle"]):
                break
            time.sleep(0.2)
        else:
            tails = "\n".join(f"{p}: {p.read_text()[-1500:]}" for p in base.rglob("*.log"))
            out = (base / "ctl" / "daemons.out").read_text()[-1500:]
            raise RuntimeError(f"the test Slurm nodes are {state!r}, not idle, after 60 s:\n"
                               f"{out}\n{tails}")
        yield Cluster(conf, base, "rbcpu", env, time.monotonic() - t0, base / "shared", pids)
    finally:
        _teardown_nodes(base, env, procs, made, bridge)


def _init_of(pid: int, out: Path) -> int:
    """The child ``unshare --fork`` (``pid``) started: the node's init, slurmd (waits 10 s).
    (``nsenter --net``, not ``ip netns exec``, enters the network namespace: the latter mounts a
    fresh /sys without /sys/fs/cgroup, and slurmd will not start without it.)"""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    for _ in range(200):
        with contextlib.suppress(OSError, ValueError):
            if kids := path.read_text().split():
                return int(kids[0])
        time.sleep(0.05)
    raise RuntimeError(f"unshare ({pid}) started no node: {out.read_text()[-800:]}")


def _teardown_nodes(base: Path, env: dict[str, str], procs: list[subprocess.Popen[bytes]],
                    made: list[str], bridge: str) -> None:
    try:
        _teardown(base, env, procs=[p.pid for p in procs], keep=True)
    finally:
        for ns in made:  # whatever still runs in a node's namespace ends with it
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True,
                                  timeout=30).stdout.split()
            for pid in pids:
                with contextlib.suppress(OSError, ValueError):
                    os.kill(int(pid), 9)
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=10)
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        subprocess.run(["ip", "link", "del", bridge], capture_output=True, timeout=30)
        shutil.rmtree(base, ignore_errors=True)
