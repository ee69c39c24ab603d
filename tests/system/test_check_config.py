"""--check-config runs every check start-up runs (issue #15 item 1): each bad setting
below is refused by --check-config AND by the role starting with it, with the same
message naming the key; the shipped configurations pass both ways."""
import subprocess

import pytest

from conftest import GRIDNODE_BIN, REPO, scaled

BAD = [
    ("cluster", "cluster.log_level=loud", "cluster.log_level must be error, warn, info or debug"),
    ("cluster", "tasks.k_wait_dead=2", "tasks.k_wait_dead (2) must be greater than tasks.k_wait"),
    ("cluster", "queues.default=5", "queues.default (5) must be below queues.count (3)"),
    ("cluster", "queues.hosts=/nonexistent/hosts.ini",
     "cannot read the hosts file '/nonexistent/hosts.ini': No such file or directory"),
    ("cluster", "queues.rc=/nonexistent/rc", "queues.rc: cannot read '/nonexistent/rc'"),
    ("cluster", "cluster.listen=localhost:7300", "cluster.listen = 'localhost:7300' is not an endpoint"),
    ("cluster", "cluster.listen=tcp://127.0.0.1:http", "the port must be a number"),
    ("client", "client.log_level=chatty", "client.log_level must be error, warn, info or debug"),
    ("client", "client.server=127.0.0.1:7300", "client.server = '127.0.0.1:7300' is not an endpoint"),
    ("client", "rpc.backoff_max_s=0.5", "rpc.backoff_max_s (0.5) must be at least rpc.backoff_min_s"),
    ("batch", "batch.listen=7400", "batch.listen = '7400' is not an endpoint"),
    ("batch", "batch.clusters=", "batch.clusters is empty"),
    ("batch", "batch.clusters=a=tcp://127.0.0.1", "batch.clusters = 'tcp://127.0.0.1' is not an endpoint"),
    ("meta", "meta.log_level=verbose", "meta.log_level must be error, warn, info or debug"),
    ("meta", "meta.listen=nowhere", "meta.listen = 'nowhere' is not an endpoint"),
    ("meta", "meta.policy=best", "meta.policy must be estimate"),
    ("meta", "meta.sites=", "meta.sites is empty"),
]


def run(role, *args, timeout=20):
    cmd = [GRIDNODE_BIN, role, "-c", str(REPO / "configs" / ("%s.ini" % role))] + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=scaled(timeout),
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("role,setting,message", BAD, ids=["%s:%s" % (b[0], b[1]) for b in BAD])
def test_bad_setting_refused_by_check_and_by_start(role, setting, message, tmp_path):
    state = "%s.state_dir=%s" % (role, tmp_path / "state")
    p = run(role, "--set", setting, "--set", state, "--check-config")
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "configuration error" in p.stderr and message in p.stderr, p.stderr
    # Starting with the same configuration fails the same way, before doing anything.
    p = run(role, "--set", setting, "--set", state)
    assert p.returncode != 0
    assert message in p.stderr, p.stderr


@pytest.mark.parametrize("role", ["cluster", "client", "batch", "meta"])
def test_shipped_config_passes(role, tmp_path):
    p = run(role, "--set", "%s.state_dir=%s" % (role, tmp_path), "--check-config")
    assert p.returncode == 0, p.stderr
    assert "state_dir = %s" % tmp_path in p.stdout
