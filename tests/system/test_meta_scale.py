"""System tests of the spool's cost at scale (issue 28; docs/perf.md "Scale").

* Many spooled jobs cost the spool a small constant each: a job held each site's start
  estimate (64 of them, 512 bytes) and a 256-byte reason inline whether it was placing
  or not, 1.4-1.6 KiB a job; the estimates now exist only while a placement is under way
  and the reason is as long as its text.
* A site that let META_EST_LATE (3) estimates in a row time out is not waited for (every
  placement waited meta.estimate_timeout_ms for it: 256 placements a timeout at most),
  and is waited for again once it answers one in time.
* meta.sites_file names more sites than meta.sites (160 bytes: about 5) can.
* The poll of placed jobs (JOB_GET every second) goes out in windows of at most 256 in
  flight per site: a round of every placed job at once overflowed the spool's queue
  toward the site (1,000 messages), and the lost requests marked the site down.

The stand-in site here speaks the site interface (docs/wire.md 6.12) as the spool uses
it, on a real socket; it holds every JOB_GET for a moment before answering, so the
JOB_GETs the spool has in flight at once are counted. Every wait is bounded with
scaled(); nothing here is timed."""

import json
import socket
import subprocess
import threading
import time

import msgpack
import pytest
import zmq

from conftest import ASAN, GRIDNODE_BIN, TYPES, curve_server, scaled, wait_until
from test_bounded import settled_rss

T = dict(TYPES, OK=2, JOB=35, CANCEL=36, ESTIMATE=84, STARTS=85, RESV=89, RESV_LIST=90,
         RESVS=91, RESV_RELEASE=92, RESERVE=93, SITE_INFO=94, SITE=95)
POLL_WINDOW = 256     # META_POLL_WINDOW (roles/meta/live/meta_int.h)
HOLD_S = 0.3          # the stand-in site answers a JOB_GET this long after it came


def now_ms():
    return int(time.time() * 1000)


class StandInSite(threading.Thread):
    """A ROUTER on loopback answering as a batch site of 64 free cores; counts the
    JOB_GETs received and not yet answered (most: their largest number)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.sock = curve_server(zmq.Context.instance().socket(zmq.ROUTER))
        for o in (zmq.LINGER, zmq.SNDHWM, zmq.RCVHWM):
            self.sock.setsockopt(o, 0)
        self.endpoint = "tcp://127.0.0.1:%d" % self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.stop, self.held, self.most, self.jobs, self.polled = False, [], 0, 0, set()
        self.mute_estimates = False   # true: ESTIMATEs are never answered
        self.estimates, self.submits = [], {}   # arrival times; spool job -> arrival

    def reply(self, frames, t, id_, **f):
        self.sock.send_multipart(frames[:-1] + [msgpack.packb(dict(v=1, t=t, id=id_, **f))])

    def handle(self, frames):
        m = msgpack.unpackb(frames[-1], raw=False)
        t, id_, n = m["t"], m["id"], now_ms()
        if t == T["SITE_INFO"]:
            self.reply(frames, T["SITE"], id_, site=dict(
                clusters=1, hosts=1, hosts_up=1, cores=64, cores_up=64, cores_free=64,
                largest_procs=64, queued=0, running=0, reservations=0, cycles=0, now=n,
                features=[]))
        elif t == T["ESTIMATE"]:
            self.estimates.append(time.monotonic())
            if not self.mute_estimates:
                self.reply(frames, T["STARTS"], id_, earliest=n, now=n,
                           starts=[{"from": n, "to": -1}])
        elif t == T["RESERVE"]:
            st = m.get("start", n)
            self.reply(frames, T["RESV"], id_, resv=dict(name=m.get("name", ""), start=st,
                                                         end=st + 1000 * m["duration_s"]))
        elif t == T["SUBMIT"]:
            job = int(m.get("key", "x:0").rsplit(":", 1)[1].split(".")[0])  # meta:INC:JOB.N
            self.submits.setdefault(job, time.monotonic())
            self.jobs += 1
            self.reply(frames, T["SUBMITTED"], id_, job=self.jobs, state="queued", cluster="c")
        elif t == T["JOB_GET"]:
            self.held.append((time.monotonic() + HOLD_S, frames, id_, m["job"]))
            self.most = max(self.most, len(self.held))
        elif t == T["RESV_LIST"]:
            self.reply(frames, T["RESVS"], id_, now=n, resvs=[])
        elif t in (T["RESV_RELEASE"], T["CANCEL"]):
            self.reply(frames, T["OK"], id_)
        else:
            self.reply(frames, T["ERROR"], id_, code=3, msg="not here")

    def run(self):
        while not self.stop:
            now = time.monotonic()
            while self.held and self.held[0][0] <= now:
                _, frames, id_, job = self.held.pop(0)
                n = now_ms()
                self.polled.add(job)
                self.reply(frames, T["JOB"], id_, job=dict(job=job, state="running", started=n,
                                                           ntasks=1, issued=1, running=1),
                           tasks=[dict(idx=0, state="running", started=n)])
            if self.sock.poll(10):
                for _ in range(256):
                    try:
                        self.handle(self.sock.recv_multipart(zmq.NOBLOCK))
                    except zmq.Again:
                        break

    def close(self):
        self.stop = True
        self.join(5)
        self.sock.close(0)


def test_poll_of_many_placed_jobs_goes_in_windows(meta_factory):
    site = StandInSite()
    site.start()
    try:
        # the stand-in is a Python thread: on a loaded machine it may take seconds to
        # answer a window; what is tested is the window, so its answers get time
        m = meta_factory({"s": site.endpoint}, sets={"meta.log_level": "info",
                                                     "meta.request_timeout_ms": 30000})
        rpc = m.client()
        wait_until(lambda: all(s["up"] for s in rpc.ok(T["SITE_INFO"])["sites"]), scaled(20),
                   msg="the spool seeing its site")
        n = 3 * POLL_WINDOW
        ids = rpc.submit_pipelined(n, {"argv": ["true"], "ntasks": 1, "limit_s": 60})
        # every job placed, then polled (the site says running: the spool follows it)
        wait_until(lambda: rpc.ok(T["JOB_LIST"], count=n, state="queued")["jobs"] == [],
                   scaled(60), msg="every job started as the site's polls report")
        assert len(site.polled) >= n, len(site.polled)
        print("JOB_GETs in flight at once: at most %d" % site.most)
        assert 0 < site.most <= POLL_WINDOW, site.most
        sites = rpc.ok(T["SITE_INFO"])["sites"]
        assert sites[0]["up"], sites
        assert "does not answer" not in m.log(), "the site was taken as down"
        assert sorted(ids) == list(range(min(ids), min(ids) + n))
    finally:
        site.close()


@pytest.mark.skipif(ASAN, reason="ASan's redzones and quarantine multiply every allocation")
def test_many_spooled_jobs_cost_little(meta_factory):
    # a site nothing answers at: every job stays spooled (queued) at the spool
    m = meta_factory({"s": closed_endpoint()}, sets={"meta.log_level": "warn", "stats.interval_s": 86400})
    rpc = m.client()
    rpc.ok(T["JOB_LIST"], count=1)
    before = settled_rss(m.proc.pid)
    jobs = 30_000
    ids = rpc.submit_pipelined(jobs, {"argv": ["true"], "ntasks": 1, "limit_s": 600})
    assert len(set(ids)) == jobs
    grew = (settled_rss(m.proc.pid) - before) * 1024.0 / jobs
    print("spool: %.0f bytes of VmRSS a spooled job" % grew)
    assert grew < 1300, "%.0f bytes a job (1,400-1,600 before issue 28)" % grew
    r = rpc.ok(T["JOB_GET"], job=max(ids))
    assert r["job"]["gstate"] == "queued", r


def closed_endpoint():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    ep = "tcp://127.0.0.1:%d" % s.getsockname()[1]
    s.close()
    return ep


def test_sites_file_names_more_sites_than_the_key_holds(meta_factory, workdir):
    # 40 sites: about 1,100 bytes, where meta.sites holds 160 (about 5 sites)
    f = workdir / "sites"
    lines = ["# the grid's sites", ""] + ["site%02d=%s%s" % (k, closed_endpoint(),
                                                         " speed=2.5" if k == 7 else "")
                                         for k in range(40)]
    f.write_text("\n".join(lines) + "\n")
    m = meta_factory({"first": closed_endpoint()}, sets={"meta.sites_file": str(f)})
    sites = m.client().ok(T["SITE_INFO"])["sites"]
    assert [s["name"] for s in sites] == ["first"] + ["site%02d" % k for k in range(40)]
    assert [s["speed"] for s in sites if s["name"] == "site07"] == [2.5]
    assert all(s["speed"] == 1 for s in sites if s["name"] != "site07")


@pytest.mark.parametrize("text,message", [
    ("a=tcp://127.0.0.1:1 speed=fast\n", "sites:1: 'speed=fast' is not speed=S"),
    ("# ok\na=nowhere\n", "sites:2: 'nowhere' is not an endpoint"),
    ("a=tcp://127.0.0.1:1\na=tcp://127.0.0.1:2\n", "names site 'a' twice"),
    ("".join("s%d=tcp://127.0.0.1:%d\n" % (k, k + 1) for k in range(65)), "more than 64 sites"),
])
def test_sites_file_errors_name_the_line(workdir, text, message):
    f = workdir / "sites"
    f.write_text(text)
    p = subprocess.run([GRIDNODE_BIN, "meta", "--set", "meta.sites=", "--set",
                        "meta.sites_file=%s" % f, "--set", "security.plain=true",
                        "--set", "meta.state_dir=%s" % (workdir / "m"), "--check-config"],
                       capture_output=True, text=True, timeout=scaled(20),
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 1 and "configuration error" in p.stderr, (p.stdout, p.stderr)
    assert message in p.stderr, p.stderr
    p = subprocess.run([GRIDNODE_BIN, "meta", "--set", "meta.sites_file=/nonexistent/sites",
                        "--set", "security.plain=true", "--check-config"],
                       capture_output=True, text=True, timeout=scaled(20),
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 1 and "cannot read '/nonexistent/sites'" in p.stderr, p.stderr


def test_a_site_that_lets_estimates_time_out_is_not_waited_for(meta_factory):
    fast, slow = StandInSite(), StandInSite()
    slow.mute_estimates = True
    timeout_s = scaled(4)
    for x in (fast, slow):
        x.start()
    try:
        m = meta_factory({"fast": fast.endpoint, "slow": slow.endpoint},
                         sets={"meta.log_level": "info",
                               "meta.estimate_timeout_ms": int(timeout_s * 1000)})
        rpc = m.client()
        wait_until(lambda: all(s["up"] for s in rpc.ok(T["SITE_INFO"])["sites"]), scaled(20),
                   msg="the spool seeing its sites")
        # three placements that ask different things: three ESTIMATEs the slow site lets
        # time out (the jobs go to the fast site after the timeout)
        first = [rpc.ok(T["SUBMIT"], argv=["true"], ntasks=1, limit_s=60 * (k + 1))["job"]
                 for k in range(3)]
        wait_until(lambda: all(j in fast.submits for j in first), scaled(30) + 3 * timeout_s,
                   msg="the first jobs placed at the fast site")
        wait_until(lambda: "placements no longer wait for it" in m.log(), scaled(20),
                   msg="the slow site found out")
        asked = len(slow.estimates)
        job = rpc.ok(T["SUBMIT"], argv=["true"], ntasks=1, limit_s=600)["job"]
        wait_until(lambda: job in fast.submits, scaled(20), msg="the next job placed")
        assert len(slow.estimates) > asked, "the slow site is asked still"
        # placed before its estimate at the slow site could time out: not waited for
        waited = fast.submits[job] - slow.estimates[asked]
        assert waited < timeout_s, "%.2f s: the placement waited for the slow site" % waited
        # an estimate answered in time: waited for again
        slow.mute_estimates = False
        again = rpc.ok(T["SUBMIT"], argv=["true"], ntasks=1, limit_s=900)["job"]
        wait_until(lambda: again in fast.submits or again in slow.submits, scaled(20),
                   msg="one more job placed")
        wait_until(lambda: "answers estimates in time again" in m.log(), scaled(20),
                   msg="the site waited for again")
    finally:
        fast.close()
        slow.close()


def test_stats_lists_a_bounded_number_of_jobs(meta_factory):
    m = meta_factory({"s": closed_endpoint()}, sets={"meta.log_level": "warn",
                                                     "stats.interval_s": 1})
    jobs = 5_100    # more than stats.json lists (5,000)
    m.client().submit_pipelined(jobs, {"argv": ["true"], "ntasks": 1, "limit_s": 600})
    path = m.state_dir / "stats.json"

    def counted():
        try:
            st = json.loads(path.read_text())
        except (OSError, ValueError):
            return None   # not written yet, or being replaced
        return st if st["summary"]["jobs"]["queued"] == jobs else None
    wait_until(counted, scaled(60), msg="stats.json counting every job")
    listed = [j["job"] for j in counted()["jobs"]]
    assert len(listed) == 5000, len(listed)
    assert listed == sorted(listed)


def test_flex_reservations_of_a_burst_match_one_at_a_time(cluster_factory, client_factory,
                                                          batch_factory):
    # A site settles a `flex` RESERVE whose start is taken at the plan's next start. In a
    # burst (one turn) it tries the last flex start first instead of an estimate (issue
    # 28); the starts must be those that one request a turn gets.
    cl = cluster_factory({"store.sync": "none"}, name="cl")
    client_factory(cl, 1, sets={"client.slots": 4, "client.sandbox": False})
    starts = {}
    for mode in ("one at a time", "burst"):
        b = batch_factory([cl], name="b_" + mode.replace(" ", "_"))
        rpc = b.client()
        wait_until(lambda: any(n["active"] for n in rpc.ok(T["NODE_LIST"])["nodes"]),
                   scaled(20), msg="the batch role seeing the client")
        want = now_ms() + 3_600_000
        body = {"user": "meta", "procs": 1, "start": want, "duration_s": 60, "flex": True}
        got = []
        if mode == "burst":
            ids = []
            for k in range(12):
                m, data = rpc.message(T["RESERVE"], dict(body, name="f%d" % k))
                rpc.sock.send(data)
                ids.append(m["id"])
            replies = {}
            while len(replies) < len(ids):
                r = rpc.decode(rpc.recv_raw(scaled(30))[-1])
                replies[r["id"]] = r
            got = [replies[i]["resv"]["start"] for i in ids]
        else:
            for k in range(12):
                got.append(rpc.ok(T["RESERVE"], **dict(body, name="f%d" % k))["resv"]["start"])
        starts[mode] = [s - want for s in got]
    print("flex starts (ms after the one asked):", starts)
    seq = starts["one at a time"]
    assert seq[:4] == [0] * 4 and len(set(seq)) == 3 and seq == sorted(seq), seq
    assert all(seq.count(v) == 4 for v in seq), seq   # 4 cores: 4 a window
    assert starts["burst"] == seq, starts
