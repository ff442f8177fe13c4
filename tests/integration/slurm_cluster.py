"""A private, throwaway single-node Slurm cluster on 127.0.0.1 for the tests: slurmctld + slurmd
from Debian's slurm-wlm with a slurm.conf of its own in a temporary directory (random ports,
auth/none, proctrack/linuxproc, task/none: nothing systemd or cgroups would give; no accounting,
a jobcomp/filetxt file), reached by setting ``SLURM_CONF``. ``cluster()`` starts it, waits for
the node to be idle and tears it down (scancel, wait, scontrol shutdown, then the daemons by
pid)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SBIN = "/usr/sbin:/sbin"


@dataclass(frozen=True)
class Cluster:
    conf: Path
    dir: Path
    node: str
    env: dict[str, str]
    started_s: float
    """Seconds from starting slurmctld to the node being idle."""

    def sh(self, *argv: str, check: bool = True) -> str:
        res = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=60)
        if check and res.returncode != 0:
            raise RuntimeError(f"{argv}: rc {res.returncode}: {res.stderr.strip()}")
        return res.stdout


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
SlurmUser=root
SlurmdUser=root
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/none
CredType=cred/none
StateSaveLocation={base}/state
SlurmdSpoolDir={base}/spool
SlurmctldPidFile={base}/slurmctld.pid
SlurmdPidFile={base}/slurmd.pid
SlurmctldLogFile={base}/log/slurmctld.log
SlurmdLogFile={base}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={base}/log/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
MinJobAge=3600
{"GresTypes=gpu" if gpu else ""}
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


def _teardown(base: Path, env: dict[str, str]) -> None:
    def quiet(*argv: str) -> str:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            return subprocess.run(argv, env=env, capture_output=True, text=True,
                                  timeout=30).stdout
        return ""

    pids = [p for p in (_pid(base / "slurmctld.pid"), _pid(base / "slurmd.pid")) if p]
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
