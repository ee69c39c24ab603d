"""The spool's outbox and a lost site (issue 24 items 3 and 1-2 of what was left).

Orders to a site (a user's CANCEL, RESV_RELEASE, the withdrawal of a lost site's copy)
are stored before the user's OK and sent until the site acknowledges them, across a
kill -9 of the spool and a site that is down meanwhile. A site silent for
meta.site_down_s never gets its jobs run elsewhere while it could still run them: a
copy that had not started is withdrawn once the site answers again (OK: placed again,
STATE: it stays), a running one waits for it. A submission whose answer is lost (the
site ran it, the spool saw no answer) is resent with its key and never placed twice.

The sites are the fake batch sites of test_meta_moves.py, so a site is down, refuses or
loses an answer exactly when the test says."""

import time

from conftest import scaled, wait_until
from test_meta_moves import T, sites  # noqa: F401 (the fixture)

# an unanswered site request marks the site down after this (5 s by default): shorter
# here, so the cases that wait for it take less time (scaled for the ASan build)
REQ = {"meta.request_timeout_ms": int(scaled(1500))}


def known(m):
    return all(s["known"] for s in m.rpc(T["SITE_INFO"])["sites"])


def site_up(m, name):
    return [s for s in m.rpc(T["SITE_INFO"])["sites"] if s["name"] == name][0]["up"]


def job(m, jid):
    return m.rpc(T["JOB_GET"], job=jid)["job"]


def placed(m, jid, at):
    j = job(m, jid)
    return j["gstate"] == "placed" and j["site"] == at


def test_a_cancel_reaches_a_site_that_was_down_across_a_kill9_of_the_spool(
        meta_factory, sites):
    a = sites("a", 300)
    m = meta_factory({"a": a.endpoint}, sets=REQ)
    wait_until(lambda: known(m), scaled(20), msg="site known")
    jid = m.rpc(T["PSUBMIT"], argv=["true"], procs=1, limit_s=60)["job"]
    wait_until(lambda: placed(m, jid, "a"), scaled(20), msg="placed at a")
    sjob, resv = job(m, jid)["site_job"], job(m, jid)["resv"]
    a.down = True
    wait_until(lambda: not site_up(m, "a"), scaled(30), msg="the spool sees a down")
    m.client().ok(T["CANCEL"], job=jid)
    j = job(m, jid)
    assert j["gstate"] == "cancelled" and j["orders"] == 2, j  # the cancel and the release
    m.restart()  # kill -9: the orders were stored before the OK
    assert job(m, jid)["orders"] == 2
    sites_row = m.rpc(T["SITE_INFO"])["sites"][0]
    assert sites_row["orders"] == 2, sites_row
    a.fail_cancels = 1  # the first CANCEL after the site is back fails for the moment
    a.down = False
    wait_until(lambda: a.jobs[sjob] == "cancelled", scaled(60), msg="the cancel arrives")
    wait_until(lambda: job(m, jid)["orders"] == 0, scaled(30), msg="acknowledged")
    assert a.count(T["CANCEL"], job=sjob) >= 2  # STORAGE, then again
    assert a.count(T["CANCEL"], job=sjob, unstarted=True) == 0
    assert a.count(T["RESV_RELEASE"], name=resv) >= 1
    assert m.rpc(T["SITE_INFO"])["sites"][0]["orders"] == 0


def test_a_cancel_whose_answer_is_lost_is_sent_again_and_settled(meta_factory, sites):
    a = sites("a", 300)
    m = meta_factory({"a": a.endpoint}, sets=REQ)
    wait_until(lambda: known(m), scaled(20), msg="site known")
    jid = m.rpc(T["PSUBMIT"], argv=["true"], procs=1, limit_s=60)["job"]
    wait_until(lambda: placed(m, jid, "a"), scaled(20), msg="placed at a")
    sjob = job(m, jid)["site_job"]
    a.lose_cancels = 1  # done at the site, the answer lost: the site is down to the spool
    m.client().ok(T["CANCEL"], job=jid)
    # sent again once the site answers again: STATE ("already cancelled") settles it
    wait_until(lambda: job(m, jid)["orders"] == 0, scaled(60), msg="settled")
    assert a.count(T["CANCEL"], job=sjob) >= 2
    assert job(m, jid)["gstate"] == "cancelled"


def test_a_lost_sites_jobs_never_run_elsewhere_while_it_could_run_them(meta_factory, sites):
    """Three jobs placed at site a, which goes silent past meta.site_down_s: none is
    submitted elsewhere, across a kill -9 of the spool. Job 3 is requeued meanwhile (the
    operator's way out): placed at b at once, its copy's cancel waits for a. When a is
    back, job 1's copy (never started) is withdrawn and the job placed at b; job 2's copy
    started while a was silent: the withdrawal is refused and it stays."""
    a, b = sites("a", 300), sites("b", 900)
    m = meta_factory({"a": a.endpoint, "b": b.endpoint},
                     sets=dict(REQ, **{"meta.site_down_s": 1, "meta.reeval_s": 0}))
    wait_until(lambda: known(m), scaled(20), msg="sites known")
    jids = [m.rpc(T["PSUBMIT"], argv=["true"], procs=1, limit_s=60)["job"] for _ in range(3)]
    wait_until(lambda: all(placed(m, j, "a") for j in jids), scaled(20), msg="placed at a")
    s1, s2, s3 = [job(m, j)["site_job"] for j in jids]
    a.down = True
    wait_until(lambda: all("withdrawn once the site answers" in job(m, j)["reason"]
                           for j in jids), scaled(40), msg="the site is lost")
    a.jobs[s2] = "running"  # it started while the spool could not see it
    m.client().ok(T["JOB_CTL"], job=jids[2], op="requeue")
    wait_until(lambda: placed(m, jids[2], "b"), scaled(30), msg="job 3 requeued to b")
    m.restart()  # the withdrawals and the cancel are orders of the outbox: kept
    time.sleep(2)
    assert b.count(T["PSUBMIT"]) == 1  # never elsewhere while a could still run them
    assert [job(m, j)["site"] for j in jids[:2]] == ["a", "a"]
    # 1, 2: the withdrawal; 3: the withdrawal, the cancel, the release of its reservation
    assert [job(m, j)["orders"] for j in jids] == [1, 1, 3]
    a.start_in_s = 3000  # back, but b is better now
    a.down = False
    wait_until(lambda: placed(m, jids[0], "b"), scaled(60), msg="job 1 withdrawn, then at b")
    wait_until(lambda: job(m, jids[1])["gstate"] == "running", scaled(30), msg="job 2 runs at a")
    wait_until(lambda: a.jobs[s3] == "cancelled", scaled(30), msg="job 3's old copy cancelled")
    wait_until(lambda: all(job(m, j)["orders"] == 0 for j in jids), scaled(30), msg="acked")
    assert a.jobs[s1] == "cancelled" and a.jobs[s2] == "running"
    assert a.count(T["CANCEL"], job=s1, unstarted=True) >= 1
    assert a.count(T["CANCEL"], job=s1, unstarted=None) == 0
    assert a.count(T["CANCEL"], job=s2, unstarted=None) == 0
    time.sleep(1)
    assert job(m, jids[1])["site"] == "a"
    assert b.count(T["PSUBMIT"]) == 2 and a.count(T["PSUBMIT"]) == 3


def test_a_submission_whose_answer_is_lost_is_not_placed_twice(meta_factory, sites):
    """3(c) of the issue: the site took the SUBMIT and ran it, the spool saw no answer
    (the site went silent past meta.site_down_s); the job is never submitted anywhere
    else, the resend with the same key gets the same site job back."""
    a, b = sites("a", 300), sites("b", 900)
    m = meta_factory({"a": a.endpoint, "b": b.endpoint},
                     sets=dict(REQ, **{"meta.site_down_s": 1, "meta.reeval_s": 0}))
    wait_until(lambda: known(m), scaled(20), msg="sites known")
    a.swallow_submits = 1
    jid = m.rpc(T["PSUBMIT"], argv=["true"], procs=1, limit_s=60)["job"]
    wait_until(lambda: a.count(T["PSUBMIT"]) >= 1, scaled(20), msg="submitted at a")
    a.down = True  # and the site is cut off before anything else gets through
    sjob = max(a.jobs)
    a.jobs[sjob] = "running"  # it runs there
    wait_until(lambda: "sent again when the site answers" in job(m, jid)["reason"], scaled(40),
               msg="the site is lost")
    m.restart()
    time.sleep(2)
    assert b.count(T["PSUBMIT"]) == 0
    a.down = False
    wait_until(lambda: job(m, jid)["gstate"] == "running" and job(m, jid)["site_job"] == sjob,
               scaled(60), msg="the same copy, followed at a")
    keys = {mm.get("key") for t, mm in a.log if t == T["PSUBMIT"]}
    assert len(keys) == 1, keys  # every resend carried the one key
    assert len(a.jobs) == 1 and b.count(T["PSUBMIT"]) == 0


def test_a_real_sites_array_cancel_survives_both_sides_restarting(
        cluster_factory, client_factory, batch_factory, meta_factory):
    """The same against a real batch role (the case the sweep did not cover: an array
    holds no reservation): the site is killed, the user cancels at the spool, the spool
    is killed -9, the site comes back on its state: the array is cancelled there."""
    cl = cluster_factory({"store.sync": "none", "tasks.heartbeat_s": 1})
    client_factory(cl, 1, sets={"client.slots": 2})
    b = batch_factory([cl])
    wait_until(lambda: any(n["active"] for n in b.rpc(37)["nodes"]), scaled(20),
               msg="batch sees the host")
    m = meta_factory({"a": b}, sets=REQ)
    wait_until(lambda: known(m), scaled(20), msg="site known")
    jid = m.rpc(T["SUBMIT"], argv=["sleep", "60"], ntasks=2, limit_s=90)["job"]
    wait_until(lambda: job(m, jid)["gstate"] == "running", scaled(30), msg="running")
    sjob = job(m, jid)["site_job"]
    b.kill()
    wait_until(lambda: not site_up(m, "a"), scaled(30), msg="the spool sees the site down")
    m.client().ok(T["CANCEL"], job=jid)
    assert job(m, jid)["orders"] == 1
    m.restart()
    b.restart()
    wait_until(lambda: b.rpc(T["JOB_GET"], job=sjob)["job"]["state"] == "cancelled",
               scaled(40), msg="the array cancelled at its site")
    wait_until(lambda: job(m, jid)["orders"] == 0, scaled(30), msg="acknowledged")
    assert job(m, jid)["gstate"] == "cancelled"
    # a second cancel at the site is STATE (already cancelled): idempotent
    b.client().err(T["CANCEL"], "STATE", job=sjob)


def test_a_cancel_while_the_submission_is_unanswered_reaches_the_copy(meta_factory, sites):
    """A job cancelled while its submission's answer is still awaited, and the spool
    killed -9 before it comes: the cancel is stored as an order for the copy that
    submission may have made; after the restart the spool submits again with the same key
    and `hold` (the site gives back the copy it made) and cancels that copy."""
    a = sites("a", 300)
    m = meta_factory({"a": a.endpoint}, sets=REQ)
    wait_until(lambda: known(m), scaled(20), msg="site known")
    a.swallow_submits = 1
    jid = m.rpc(T["PSUBMIT"], argv=["true"], procs=1, limit_s=60)["job"]
    wait_until(lambda: a.count(T["PSUBMIT"]) >= 1, scaled(20), msg="submitted at a")
    sjob = max(a.jobs)
    m.client().ok(T["CANCEL"], job=jid)
    assert job(m, jid)["orders"] >= 1
    m.restart()
    wait_until(lambda: a.jobs[sjob] == "cancelled", scaled(60), msg="the copy cancelled")
    wait_until(lambda: job(m, jid)["orders"] == 0, scaled(30), msg="acknowledged")
    held = [mm for t, mm in a.log if t == T["PSUBMIT"] and mm.get("hold")]
    assert held and held[0]["key"] == a.log[[t for t, _ in a.log].index(T["PSUBMIT"])][1]["key"]
    assert len(a.jobs) == 1  # the resend made nothing new


def test_requeue_at_the_spool_waits_for_the_copys_cancel(meta_factory, sites):
    """`gridnode requeue -e SPOOL JOB` (JOB_CTL requeue): the job starts again from
    scratch, but is placed again only once its site acknowledged the cancel of its copy
    (here after two STORAGE answers); a cancelled job is STATE, hold is the site's."""
    a, b = sites("a", 300), sites("b", 900)
    m = meta_factory({"a": a.endpoint, "b": b.endpoint}, sets=dict(REQ, **{"meta.reeval_s": 0}))
    wait_until(lambda: known(m), scaled(20), msg="sites known")
    jid = m.rpc(T["PSUBMIT"], argv=["true"], procs=1, limit_s=60)["job"]
    wait_until(lambda: placed(m, jid, "a"), scaled(20), msg="placed at a")
    sjob = job(m, jid)["site_job"]
    a.jobs[sjob] = "running"
    wait_until(lambda: job(m, jid)["gstate"] == "running", scaled(20), msg="running at a")
    a.fail_cancels = 2
    b.start_in_s = 0
    m.client().ok(T["JOB_CTL"], job=jid, op="requeue")
    assert "requeueing" in job(m, jid)["reason"]
    wait_until(lambda: placed(m, jid, "b"), scaled(60), msg="placed again, at b")
    assert a.jobs[sjob] == "cancelled" and a.count(T["CANCEL"], job=sjob) >= 3
    ok = [mm["_at"] for t, mm in a.log if t == T["CANCEL"] and mm["job"] == sjob]
    sub = [mm["_at"] for t, mm in b.log if t == T["PSUBMIT"]]
    assert len(sub) == 1 and ok[-1] < sub[0]  # b's submission only after a's cancel took
    j = job(m, jid)
    assert j["requeues"] == 1 and j["started"] == 0, j
    keys = {mm["key"] for t, mm in a.log + b.log if t == T["PSUBMIT"]}
    assert len(keys) == 2, keys  # a new attempt, a new key
    m.client().ok(T["CANCEL"], job=jid)
    m.client().err(T["JOB_CTL"], "STATE", job=jid, op="requeue")
    m.client().err(T["JOB_CTL"], "STATE", job=jid, op="hold")
