"""Files through the grid spool to a Slurm site (issue 26 feature 4, docs/data.md "Slurm
sites"): the spool offers a job's inputs to the adapter, which keeps them in the site's
`workdir` and links them into the job's own directory before sbatch --chdir; once the
job ended its outputs are hashed there and copied back into the spool, where `gridnode
job --output` and `gridnode fetch` give them, byte for byte. A symbolic link among the
outputs is refused and named; a workdir that cannot be used is named in the job's
reason. Skipped, with the reason, where Slurm cannot run (not root, not installed)."""

import hashlib
import json
import os
import pwd
import subprocess

import pytest

import slurmlocal
from conftest import GRIDNODE_BIN, scaled, wait_until
from test_data import run_cli
from test_meta_slurm import slurm  # noqa: F401 - the private Slurm (module fixture)

needs_slurm = pytest.mark.skipif(slurmlocal.unavailable() is not None,
                                 reason=str(slurmlocal.unavailable()))


@pytest.mark.parametrize("line,message", [
    ("a=tcp://127.0.0.1:1 bandwidth_mb_s=fast", "'bandwidth_mb_s=fast' is not speed=S or"),
    ("a=tcp://127.0.0.1:1 speed=2 bandwidth_mb_s=0", "'bandwidth_mb_s=0' is not speed=S or"),
    ("h=slurm://?bandwidth_mb_s=-3", "bandwidth_mb_s must be a number above 0"),
    ("h=slurm://?workdir=scratch", "workdir must be an absolute path"),
])
def test_bandwidth_and_workdir_settings_are_checked(tmp_path, line, message):
    f = tmp_path / "sites"
    f.write_text(line + "\n")
    p = subprocess.run([GRIDNODE_BIN, "meta", "--set", "meta.sites=", "--set",
                        "meta.sites_file=%s" % f, "--set", "security.plain=true",
                        "--set", "meta.state_dir=%s" % (tmp_path / "m"), "--check-config"],
                       capture_output=True, text=True, timeout=scaled(20),
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 1 and message in p.stderr, p.stderr


@pytest.fixture
def site_of(slurm):  # noqa: F811 - the fixture imported above
    """site_of(workdir) -> a meta.sites_file naming the Slurm site with that workdir (a
    file: the URL would not fit meta.sites' 160 bytes)."""
    if "slurmctld" not in slurm.pids:
        slurm.start_ctld()
    slurm.clean()

    def make(tmp, wd, out=None, extra=""):
        f = tmp / "sites"
        f.write_text("hpc=slurm://%s?partition=debug&dir=%s&workdir=%s%s bandwidth_mb_s=500\n"
                     % (slurm.conf, out or slurm.out, wd, extra))
        return {"meta.sites_file": str(f), "meta.estimate_timeout_ms": 2000}

    yield make
    slurm.clean()


def spool_job(m, jid):
    return m.client().ok("JOB_GET", "JOB", job=jid, tasks=True)


def user_dirs(wd):
    """The job directories under a workdir (its store and records are dot names)."""
    return [d for d in os.listdir(wd) if not d.startswith(".")]


def wait_spool(m, jid, timeout=90):
    wait_until(lambda: spool_job(m, jid)["job"]["state"] in ("done", "failed", "killed",
                                                               "cancelled"),
               scaled(timeout), msg="spool job %d ends" % jid)
    return spool_job(m, jid)


@needs_slurm
def test_inputs_reach_the_slurm_job_and_outputs_come_back(slurm, site_of, meta_factory,  # noqa: F811
                                                          gridnode_bin, tmp_path):
    wd = os.path.join(slurm.base, "wd")
    os.mkdir(wd)
    m = meta_factory({}, sets=site_of(tmp_path, wd))
    data = os.urandom(3 * 1024 * 1024 + 12345)  # more than one chunk
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    sub = tmp_path / "conf"
    sub.mkdir()
    (sub / "a.txt").write_bytes(b"alpha\n")
    # the job hashes its inputs, writes a new file of several chunks, and leaves a link
    # out of its directory
    script = ("sha256sum in.bin > in.sum && cat conf/a.txt > a.out && (echo x; cat in.bin) > out.bin && "
              "ln -s /etc/hostname leak.out && test -n \"$GRIDNODE_CHECKPOINT_DIR\" && "
              "test -d \"$GRIDNODE_CHECKPOINT_DIR\" && echo saved > \"$GRIDNODE_CHECKPOINT_DIR/c\"")
    r = run_cli(gridnode_bin, "submit", "-e", m.endpoint, "--shell", "--input", src,
                "--input", sub, "--output", "*.sum", "--output", "*.out", "--output", "out.bin",
                "--checkpoint-s", "60", "--json", script)
    assert r.returncode == 0, r.stderr
    jid = json.loads(r.stdout)["job"]
    job = wait_spool(m, jid)
    assert job["job"]["state"] == "done", job["job"]
    # the job's own directory under the workdir (sbatch --chdir), its checkpoint beside
    dirs = [d for d in os.listdir(wd) if not d.startswith(".")]
    assert len(dirs) == 1, dirs
    assert open(os.path.join(wd, dirs[0], ".gridnode-checkpoint", "c")).read() == "saved\n"
    # the spool's rows name the copied outputs, and the refused link
    row = job["tasks"][0]
    names = sorted(f["name"] for f in row["files"])
    assert names == ["a.out", "in.sum", "out.bin"], row
    assert "leak.out" in row.get("files_note", "") and "symbolic link" in row["files_note"], row
    r = run_cli(gridnode_bin, "job", "-e", m.endpoint, jid, "--output")
    assert r.returncode == 0 and "out.bin" in r.stdout, (r.stdout, r.stderr)
    out = tmp_path / "res"
    r = run_cli(gridnode_bin, "fetch", "-e", m.endpoint, jid, out)
    assert r.returncode == 0 and "3 file(s) fetched" in r.stdout, (r.stdout, r.stderr)
    assert (out / "0" / "out.bin").read_bytes() == b"x\n" + data  # 4 chunks copied back
    assert (out / "0" / "in.sum").read_text().split()[0] == hashlib.sha256(data).hexdigest()
    assert (out / "0" / "a.out").read_bytes() == b"alpha\n"
    assert not (out / "0" / "leak.out").exists()
    assert m.alive()


@needs_slurm
def test_a_workdir_that_cannot_be_used_is_named(slurm, site_of, meta_factory,  # noqa: F811
                                                gridnode_bin, tmp_path):
    wd = os.path.join(slurm.base, "no-such-dir")
    m = meta_factory({}, sets=dict(site_of(tmp_path, wd), **{"meta.max_attempts": 2}))
    f = tmp_path / "in.txt"
    f.write_bytes(b"input\n")
    r = run_cli(gridnode_bin, "submit", "-e", m.endpoint, "--input", f, "--json", "cat in.txt")
    assert r.returncode == 0, r.stderr
    job = wait_spool(m, json.loads(r.stdout)["job"])
    why = job["job"]["reason"]
    assert job["job"]["state"] == "failed" and wd in why and "workdir" in why, job["job"]
    assert not os.path.exists(wd)  # never made by the spool: it must be the shared one
    assert m.alive()


@needs_slurm
def test_kill9_of_the_spool_loses_nothing_at_a_slurm_site(slurm, site_of, meta_factory,  # noqa: F811
                                                          gridnode_bin, tmp_path):
    wd = os.path.join(slurm.base, "wd9")
    os.mkdir(wd)
    m = meta_factory({}, sets=dict(site_of(tmp_path, wd), **{"store.sync": "full"}))
    data = os.urandom(2 * 1024 * 1024 + 7)
    h = hashlib.sha256(data).hexdigest()
    # a copy cut short by an earlier kill -9: a part file the adapter never acknowledged
    os.makedirs(os.path.join(wd, ".gridnode-files", "part"))
    with open(os.path.join(wd, ".gridnode-files", "part", h), "wb") as f:
        f.write(b"\0" * (1024 * 1024))
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    before = {j["id"] for j in slurm.jobs()}
    r = run_cli(gridnode_bin, "submit", "-e", m.endpoint, "--shell", "--input", src,
                "--output", "in.sum", "--json", "sleep 3; sha256sum in.bin > in.sum")
    assert r.returncode == 0, r.stderr
    jid = json.loads(r.stdout)["job"]
    # killed while the job runs at Slurm; the restarted spool finds it, lists its outputs
    wait_until(lambda: spool_job(m, jid)["job"]["state"] == "running", scaled(60),
               msg="the job runs at Slurm")
    m.kill()
    m.restart()
    job = wait_spool(m, jid)
    assert job["job"]["state"] == "done", job["job"]
    out = tmp_path / "res"
    r = run_cli(gridnode_bin, "fetch", "-e", m.endpoint, jid, out)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert (out / "0" / "in.sum").read_text().split()[0] == h
    assert open(os.path.join(wd, ".gridnode-files", h), "rb").read() == data
    made = [j for j in slurm.jobs() if j["id"] not in before]
    assert len(made) == 1, made  # submitted once
    # the default retention (a day) keeps the directory; a removal cut short by kill -9
    # (its outputs gone, the directory not) is finished by the restarted spool, here
    # with keep_s=0
    d, = user_dirs(wd)
    os.unlink(os.path.join(wd, d, "in.sum"))
    sites = tmp_path / "sites"
    sites.write_text(sites.read_text().replace(" bandwidth_mb_s", "&keep_s=0 bandwidth_mb_s"))
    m.kill()
    m.restart()
    wait_until(lambda: not user_dirs(wd), scaled(30), msg="the job's directory is removed")
    r = run_cli(gridnode_bin, "fetch", "-e", m.endpoint, jid, tmp_path / "again")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert (tmp_path / "again" / "0" / "in.sum").read_text().split()[0] == h


@needs_slurm
def test_jobs_run_as_the_sites_user_own_their_directory_not_their_inputs(
        slurm, site_of, meta_factory, gridnode_bin, tmp_path):  # noqa: F811
    # the site's user=nobody: the spool (root) makes the job's directory for it, links the
    # inputs in read-only, and its outputs are hashed under that identity
    wd = os.path.join(slurm.base, "wdn")
    out = os.path.join(slurm.base, "outn")
    os.mkdir(wd)
    os.mkdir(out)
    os.chmod(out, 0o1777)  # slurm-ID.out written by the job's user
    m = meta_factory({}, sets=site_of(tmp_path, wd, out, "&user=nobody"))
    src = tmp_path / "in.txt"
    src.write_bytes(b"input\n")
    script = "id -un > who.out; (echo x >> in.txt) 2>/dev/null && echo rw > ro.out || echo ro > ro.out"
    r = run_cli(gridnode_bin, "submit", "-e", m.endpoint, "--shell", "--input", src,
                "--output", "*.out", "--json", script)
    assert r.returncode == 0, r.stderr
    jid = json.loads(r.stdout)["job"]
    job = wait_spool(m, jid)
    assert job["job"]["state"] == "done", job["job"]
    res = tmp_path / "res"
    r = run_cli(gridnode_bin, "fetch", "-e", m.endpoint, jid, res)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert (res / "0" / "who.out").read_text() == "nobody\n"
    assert (res / "0" / "ro.out").read_text() == "ro\n"  # the input is not the job's to change
    d, = [x for x in os.listdir(wd) if not x.startswith(".")]
    st = os.stat(os.path.join(wd, d))
    assert st.st_uid == pwd.getpwnam("nobody").pw_uid and st.st_mode & 0o777 == 0o700
    assert os.stat(os.path.join(wd, d, "in.txt")).st_uid == 0


@needs_slurm
def test_a_job_directory_goes_after_its_retention_and_nothing_outside(
        slurm, site_of, meta_factory, gridnode_bin, tmp_path):  # noqa: F811
    # keep_s=0: the directory goes once the spool is done with the job (its outputs
    # copied); its links are removed, never followed (a file and a directory outside
    # stay whole); a read-only subdirectory of the job's goes too
    wd = os.path.join(slurm.base, "wdk")
    os.mkdir(wd)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_bytes(b"not the job's\n")
    m = meta_factory({}, sets=site_of(tmp_path, wd, extra="&keep_s=0"))
    src = tmp_path / "in.txt"
    src.write_bytes(b"input bytes\n")
    h = hashlib.sha256(b"input bytes\n").hexdigest()
    script = ("mkdir -p sub/deep && cat in.txt > sub/deep/r.txt && (echo out; cat in.txt) > res.out"
              " && ln -s %s/keep.txt link.out && ln -s %s linkdir && chmod 500 sub"
              % (outside, outside))
    r = run_cli(gridnode_bin, "submit", "-e", m.endpoint, "--shell", "--input", src,
                "--output", "*.out", "--output", "sub/deep/*.txt", "--json", script)
    assert r.returncode == 0, r.stderr
    jid = json.loads(r.stdout)["job"]
    job = wait_spool(m, jid)
    assert job["job"]["state"] == "done", job["job"]
    wait_until(lambda: not user_dirs(wd), scaled(30), msg="the job's directory is removed")
    assert (outside / "keep.txt").read_bytes() == b"not the job's\n"
    assert os.listdir(outside) == ["keep.txt"]
    # the input no job directory links any more: the next input sweep may take it
    assert os.stat(os.path.join(wd, ".gridnode-files", h)).st_nlink == 1
    out = tmp_path / "res"
    r = run_cli(gridnode_bin, "fetch", "-e", m.endpoint, jid, out)
    assert r.returncode == 0 and "2 file(s) fetched" in r.stdout, (r.stdout, r.stderr)
    assert (out / "0" / "res.out").read_bytes() == b"out\ninput bytes\n"
    assert (out / "0" / "sub" / "deep" / "r.txt").read_bytes() == b"input bytes\n"
    assert m.alive()


@needs_slurm
def test_a_parallel_job_with_files_at_a_slurm_site(slurm, site_of, meta_factory,  # noqa: F811
                                                   gridnode_bin, tmp_path):
    # 2 processes: the batch script runs srun, whose ranks share the job's one directory
    # (inputs linked once); its outputs are collected once, as rank 0's (0/NAME)
    wd = os.path.join(slurm.base, "wdp")
    os.mkdir(wd)
    m = meta_factory({}, sets=site_of(tmp_path, wd))
    data = os.urandom(1024 * 1024 + 99)
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    script = ("srun -n 2 sh -c '(echo $SLURM_PROCID; cat in.bin) > r$SLURM_PROCID.out' && "
              "ls r*.out | wc -l > n.txt")
    r = run_cli(gridnode_bin, "submit", "-e", m.endpoint, "-p", "2", "--shell", "--input", src,
                "--output", "r*.out", "--output", "n.txt", "--json", script)
    assert r.returncode == 0, r.stderr
    jid = json.loads(r.stdout)["job"]
    job = wait_spool(m, jid)
    assert job["job"]["state"] == "done", job["job"]
    names = sorted(f["name"] for f in job["tasks"][0]["files"])
    assert names == ["0/n.txt", "0/r0.out", "0/r1.out"], job["tasks"]
    r = run_cli(gridnode_bin, "job", "-e", m.endpoint, jid, "--output")
    assert r.returncode == 0 and "0/r1.out" in r.stdout, (r.stdout, r.stderr)
    out = tmp_path / "res"
    r = run_cli(gridnode_bin, "fetch", "-e", m.endpoint, jid, out)
    assert r.returncode == 0 and "3 file(s) fetched" in r.stdout, (r.stdout, r.stderr)
    for rank in (0, 1):
        assert (out / "0" / ("r%d.out" % rank)).read_bytes() == b"%d\n" % rank + data
    assert (out / "0" / "n.txt").read_text().strip() == "2"  # one directory for both
    # inputs given to one rank only need a directory per rank: refused there, named
    (tmp_path / "p0.txt").write_text("zero\n")
    (tmp_path / "p1.txt").write_text("one\n")
    r = run_cli(gridnode_bin, "submit", "-e", m.endpoint, "-p", "2", "--input",
                str(tmp_path / "p{i}.txt"), "--json", "true")
    assert r.returncode == 0, r.stderr
    job = wait_spool(m, json.loads(r.stdout)["job"])
    assert job["job"]["state"] == "failed" and "batch site" in job["job"]["reason"], job["job"]
    assert m.alive()
