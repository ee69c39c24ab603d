"""A private single-node Slurm on loopback for the system tests (issue 14), built the
way ../shared/tools/slurm-local/up.sh does it: munged, slurmctld and slurmd started in
their own sessions (no systemd), every file (config, munge key and socket, state,
spool, logs) under one directory, TCP ports picked free, daemons stopped by the PIDs
recorded here and nothing else. Needs root (slurmd launches the jobs) and the Debian
packages slurmctld, slurmd, slurm-client and munge (scripts/deps.sh installs them)."""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

BINARIES = ("/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged", "/usr/bin/sbatch",
            "/usr/bin/squeue", "/usr/bin/sinfo", "/usr/bin/scontrol", "/usr/bin/scancel")


def unavailable():
    """Why a private Slurm cannot be started here, or None."""
    if os.geteuid() != 0:
        return "a private Slurm needs root (slurmd runs the jobs); run the tests as root"
    missing = [b for b in BINARIES if not os.access(b, os.X_OK)]
    if missing:
        return ("Slurm is not installed (%s missing): bash scripts/deps.sh installs "
                "slurmctld slurmd slurm-client munge" % ", ".join(missing))
    return None


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class SlurmLocal:
    def __init__(self, cpus=4, features=""):
        # munged wants every directory above its socket world-executable: pytest's
        # tmp_path is 0700, so the cluster gets its own 0755 directory under /tmp
        # (removed by down(), kept with GRIDNODE_SLURM_KEEP=1 to read its logs)
        self.base = tempfile.mkdtemp(prefix="gridnode-slurm-")
        self.cpus = cpus
        self.features = features  # the node's Features= (issue 27), "" none
        self.node = socket.gethostname().split(".")[0]
        self.conf = os.path.join(self.base, "etc", "slurm.conf")
        self.out = os.path.join(self.base, "out")  # where the jobs run and write
        self.munge_sock = os.path.join(self.base, "munge", "munge.socket.2")
        self.pids = {}
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.env.pop("SLURM_CONFIG_DIR", None)

    # -- commands --
    def run(self, *args, timeout=30, check=False):
        r = subprocess.run(list(args), env=self.env, capture_output=True, text=True,
                           timeout=timeout, cwd=self.base)
        if check and r.returncode != 0:
            raise AssertionError("%s failed: %s %s" % (" ".join(args), r.stdout, r.stderr))
        return r

    def sbatch(self, *args):
        r = self.run("sbatch", "--parsable", "-o", "/dev/null", *args, check=True)
        return int(r.stdout.strip().split(";")[0])

    def jobs(self):
        """Every job Slurm knows: dicts id, name, state, resv."""
        r = self.run("squeue", "-h", "-t", "all", "-O", "JobID:|,Name:|,State:|,Reservation:|")
        out = []
        for ln in r.stdout.splitlines():
            f = ln.split("|")
            if len(f) >= 4 and f[0].strip().isdigit():
                out.append(dict(id=int(f[0]), name=f[1], state=f[2], resv=f[3]))
        return out

    def resvs(self):
        r = self.run("scontrol", "-o", "show", "reservation")
        names = []
        for ln in r.stdout.splitlines():
            for w in ln.split():
                if w.startswith("ReservationName="):
                    names.append(w.split("=", 1)[1])
        return names

    def clean(self):
        """Cancels every job and deletes every reservation of this private cluster."""
        self.run("scancel", "--user=root")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not [j for j in self.jobs() if j["state"] in ("PENDING", "RUNNING",
                                                              "COMPLETING", "CONFIGURING")]:
                break
            time.sleep(0.2)
        for n in self.resvs():
            self.run("scontrol", "delete", "ReservationName=" + n)

    # -- daemons --
    def _start(self, name, args):
        log = open(os.path.join(self.base, "log", name + ".out"), "ab")
        p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                             env=self.env, cwd=self.base, start_new_session=True)
        log.close()
        self.pids[name] = p
        return p

    def _wait(self, pred, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred():
                return
            for n, p in self.pids.items():
                if p.poll() is not None:
                    raise RuntimeError("%s exited (%s); see %s/log" % (n, p.returncode, self.base))
            time.sleep(0.2)
        raise RuntimeError("%s not within %d s; see %s/log" % (what, timeout, self.base))

    def start_ctld(self):
        self._start("slurmctld", ["/usr/sbin/slurmctld", "-D", "-f", self.conf])
        self._wait(lambda: "is UP" in self.run("scontrol", "ping").stdout, 30, "slurmctld up")

    def stop(self, name, sig=signal.SIGTERM):
        p = self.pids.pop(name, None)
        if p is None or p.poll() is not None:
            return
        try:
            p.send_signal(sig)
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=15)

    def up(self):
        for d in ("etc", "state", "spool", "log", "run", "out"):
            os.makedirs(os.path.join(self.base, d))
        os.chmod(self.base, 0o755)
        os.makedirs(os.path.dirname(self.munge_sock), mode=0o755)
        os.chmod(os.path.dirname(self.munge_sock), 0o755)  # munged wants a+x, not a+w
        key = os.path.join(self.base, "munge", "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o600)
        self._start("munged", ["/usr/sbin/munged", "--foreground", "--key-file=" + key,
                               "--socket=" + self.munge_sock,
                               "--pid-file=" + os.path.join(self.base, "munge", "munged.pid"),
                               "--seed-file=" + os.path.join(self.base, "munge", "seed"),
                               "--log-file=" + os.path.join(self.base, "log", "munged.log")])
        self._wait(lambda: os.path.exists(self.munge_sock), 15, "munged socket")
        b = self.base
        feat = " Features=" + self.features if self.features else ""
        conf = f"""# written by tests/system/slurmlocal.py: a private single-node Slurm
ClusterName=gntest
SlurmctldHost=localhost
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_sock}
StateSaveLocation={b}/state
SlurmdSpoolDir={b}/spool
SlurmctldPidFile={b}/run/slurmctld.pid
SlurmdPidFile={b}/run/slurmd.pid
SlurmctldLogFile={b}/log/slurmctld.log
SlurmdLogFile={b}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=error
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,bf_interval=1
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=600
NodeName={self.node} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory=1024 State=UNKNOWN{feat}
PartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
"""
        with open(self.conf, "w") as f:
            f.write(conf)
        self.start_ctld()
        self._start("slurmd", ["/usr/sbin/slurmd", "-D", "-f", self.conf, "-N", self.node])
        self._wait(lambda: self.run("sinfo", "-h", "-n", self.node, "-o", "%T").stdout.strip()
                   == "idle", 60, "node idle")

    def down(self):
        try:
            if "slurmctld" in self.pids:
                self.clean()
        except Exception:
            pass
        for n in ("slurmd", "slurmctld", "munged"):
            self.stop(n)
        if os.environ.get("GRIDNODE_SLURM_KEEP") != "1":
            shutil.rmtree(self.base, ignore_errors=True)
