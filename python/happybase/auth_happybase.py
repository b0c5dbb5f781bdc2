"""Unmodified happybase against a gateway whose server checks permissions.

Run by scripts/thrift-compat.sh after the main suite: `cellar standalone` with
security.authorization on and thrift.user = "thrifty" (no grants at first), CELLAR_THRIFT the
gateway, CELLAR_NATIVE the native port, CELLAR_DATA the data directory (for audit.log),
CELLAR_BIN the cellar binary. Not named test_*.py: it needs that server, not the main one.
"""

import json
import os
import subprocess
import unittest

import happybase
import Hbase_thrift  # loaded by happybase from its Hbase.thrift

HOST, PORT = os.environ["CELLAR_THRIFT"].rsplit(":", 1)
NATIVE = os.environ["CELLAR_NATIVE"]
DATA = os.environ["CELLAR_DATA"]
CELLAR = os.environ["CELLAR_BIN"]


def shell(script):
    """`cellar shell` as the superuser 'admin' (its word is taken on loopback)."""
    subprocess.run(
        [CELLAR, "shell", "--connect", NATIVE, "--user", "admin", "-e", script],
        check=True, timeout=120, stdout=subprocess.DEVNULL,
    )


def text(e):
    m = e.message
    return m.decode("utf-8", "replace") if isinstance(m, bytes) else m


class ThriftUserGrants(unittest.TestCase):
    def test_thrift_user_reads_only_with_a_grant_and_is_audited_by_name(self):
        shell("create 'hb_secret', 'f'\nput 'hb_secret', 'r', 'f:q', 'v'")
        conn = happybase.Connection(HOST, int(PORT), timeout=30000)
        try:
            t = conn.table("hb_secret")
            with self.assertRaises(Hbase_thrift.IOError) as refused:
                t.row(b"r")
            self.assertIn("AccessDeniedException", text(refused.exception))
            self.assertIn("'thrifty'", text(refused.exception))
            with open(os.path.join(DATA, "audit.log")) as f:
                lines = [json.loads(l) for l in f if l.strip()]
            denied = [l for l in lines if l["event"] == "denied"
                      and l["object"] == "table=hb_secret"]
            self.assertTrue(denied, lines)
            for l in denied:
                self.assertEqual(l["user"], "thrifty", l)
            shell("grant 'thrifty', 'R', 'hb_secret'")
            self.assertEqual(t.row(b"r"), {b"f:q": b"v"})
            # Reading is all thrifty got.
            with self.assertRaises(Hbase_thrift.IOError):
                t.put(b"r2", {b"f:q": b"x"})
        finally:
            conn.close()


if __name__ == "__main__":
    unittest.main()
