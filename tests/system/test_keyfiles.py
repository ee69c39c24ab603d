"""test_keyfiles.py - key settings name key files (docs/security.md "Key files", issue 23
item 6): a key file whose path is 40 z85 characters is read as a file by a role and a
tool; a literal key is accepted only as "z85:KEY" in the server key; a bare key, or a
literal secret key, is refused with a message that says what to write instead."""
import os
import subprocess

from conftest import SUITE_KEYS, TYPES, scaled, write_keypair

Z40 = "abcdefghijABCDEFGHIJ0123456789klmnop"  # 36 z85 characters; + ".key"/".pub" = 40


def tool(gridnode_bin, cwd, *args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([gridnode_bin] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=scaled(30), stdin=subprocess.DEVNULL, env=e,
                          cwd=str(cwd))


def test_a_40_character_key_path_is_a_file(cluster_factory, gridnode_bin, workdir):
    # the suite's key pair under names whose paths are 40 z85 characters, relative to cwd
    d = workdir / "k"
    d.mkdir()
    (d / (Z40 + ".pub")).write_text("# gridnode CURVE public key of 'grid'\n%s\n"
                                    % SUITE_KEYS["public"])
    fd = os.open(str(d / (Z40 + ".key")), os.O_WRONLY | os.O_CREAT, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("# gridnode CURVE secret key of 'grid'\n%s\n" % SUITE_KEYS["secret"])
    assert len(Z40 + ".key") == 40
    cl = cluster_factory()
    r = tool(gridnode_bin, d, "nodes", "-e", cl.endpoint,
             env={"GRIDNODE_KEY": Z40 + ".key", "GRIDNODE_SERVER_KEY": Z40 + ".pub"})
    assert r.returncode == 0, r.stderr
    # the literal server key form works as well
    r = tool(gridnode_bin, d, "nodes", "-e", cl.endpoint,
             env={"GRIDNODE_KEY": Z40 + ".key",
                  "GRIDNODE_SERVER_KEY": "z85:" + SUITE_KEYS["public"]})
    assert r.returncode == 0, r.stderr
    assert cl.rpc(TYPES["NODE_LIST"])["t"] == TYPES["NODES"]


def test_literal_keys_only_where_documented(cluster_factory, gridnode_bin, workdir):
    cl = cluster_factory()
    pub, sec = write_keypair(workdir, "carol")
    # a bare key (no prefix) where a file is meant: refused, never used as the key
    r = tool(gridnode_bin, workdir, "jobs", "-e", cl.endpoint,
             env={"GRIDNODE_SERVER_KEY": SUITE_KEYS["public"]})
    assert r.returncode == 1 and "must end in .pub" in r.stderr, r.stderr
    # a literal secret key: refused with the reason
    r = tool(gridnode_bin, workdir, "jobs", "-e", cl.endpoint,
             env={"GRIDNODE_KEY": "z85:" + sec})
    assert r.returncode == 1 and "read from a file only" in r.stderr, r.stderr
    # the secret key file given as the server key: named as the mistake it is
    r = tool(gridnode_bin, workdir, "jobs", "-e", cl.endpoint,
             env={"GRIDNODE_SERVER_KEY": str(workdir / "carol.key")})
    assert r.returncode == 1 and "name the .pub file" in r.stderr, r.stderr
    # a role refuses a literal secret key and a literal authorized-keys value at start
    r = tool(gridnode_bin, workdir, "cluster", "--set", "cluster.state_dir=%s" % (workdir / "s"),
             "--set", "cluster.listen=tcp://127.0.0.1:*",
             "--set", "security.secret_key=z85:" + sec)
    assert r.returncode == 1 and "security.secret_key" in r.stderr, r.stderr
    assert "read from a file only" in r.stderr, r.stderr
    r = tool(gridnode_bin, workdir, "cluster", "--set", "cluster.state_dir=%s" % (workdir / "s2"),
             "--set", "cluster.listen=tcp://127.0.0.1:*",
             "--set", "security.authorized_keys=z85:" + pub)
    assert r.returncode == 1 and "security.authorized_keys" in r.stderr, r.stderr
    assert cl.alive()
