"""Unmodified happybase (PyPI) against Cellar's Thrift gateway, or against Apache HBase's own.

Run by scripts/thrift-compat.sh, which installs happybase in a virtualenv, starts
`cellar standalone --thrift-listen 127.0.0.1:0` and sets CELLAR_THRIFT=host:port.
Every data test runs on each transport (buffered, framed) and protocol (binary, compact).

`scripts/thrift-compat.sh --against-hbase` runs the same tests against Apache HBase 2.6's
Thrift server: THRIFT_TARGET=hbase, and one server per transport and protocol (HBase's serves
one of each), named by THRIFT_<TRANSPORT>_<PROTOCOL>=host:port (THRIFT_FRAMED_COMPACT, ...).
Where the two differ on purpose (docs/thrift.md), a test asserts each system's answer, keyed
by HBASE.
"""

import os
import struct
import threading
import time
import unittest
import uuid

import happybase
import Hbase_thrift  # loaded by happybase from its Hbase.thrift
from thriftpy2.thrift import TApplicationException

HOST, PORT = os.environ.get("CELLAR_THRIFT", "127.0.0.1:9090").rsplit(":", 1)
PORT = int(PORT)
# True when the server is Apache HBase's Thrift server, not Cellar's gateway.
HBASE = os.environ.get("THRIFT_TARGET", "cellar") == "hbase"


def address(transport, protocol):
    """The server of one transport and protocol (Cellar's serves all four on one port)."""
    a = os.environ.get("THRIFT_%s_%s" % (transport.upper(), protocol.upper()))
    if not a:
        return HOST, PORT
    h, p = a.rsplit(":", 1)
    return h, int(p)


def connect(transport="buffered", protocol="binary", **kw):
    host, port = address(transport, protocol)
    return happybase.Connection(
        host, port, timeout=30000, transport=transport, protocol=protocol, **kw
    )


def text(e):
    """An exception's message (happybase reads strings as bytes)."""
    m = e.message
    return m.decode("utf-8", "replace") if isinstance(m, bytes) else m


def first_line(e):
    """An exception message's first line: HBase follows it with a Java stack trace."""
    return text(e).split("\n", 1)[0]


# A family's descriptor as HBase's Thrift server reports it when nothing was set: the IDL's
# defaults, and blockCacheEnabled false (HBase does not report it).
DEFAULT_FAMILY = {
    "max_versions": 3,
    "compression": b"NONE",
    "in_memory": False,
    "bloom_filter_type": b"NONE",
    "bloom_filter_vector_size": 0,
    "bloom_filter_nb_hashes": 0,
    "block_cache_enabled": False,
    "time_to_live": 2147483647,
}


def unique(prefix):
    return "%s_%s" % (prefix, uuid.uuid4().hex[:8])


class Modes:
    """One transport and protocol; subclasses below pick them."""

    transport = "buffered"
    protocol = "binary"

    def setUp(self):
        self.conn = connect(transport=self.transport, protocol=self.protocol)
        self.name = unique("hb_%s_%s" % (self.transport, self.protocol))
        self.conn.create_table(
            self.name,
            {"cf": dict(max_versions=5), "cg": dict()},
        )
        self.table = self.conn.table(self.name)

    def tearDown(self):
        try:
            self.conn.delete_table(self.name, disable=True)
        finally:
            self.conn.close()

    # ---- tables ----

    def test_table_admin(self):
        name = unique("admin")
        self.conn.create_table(
            name,
            {
                "a": dict(max_versions=7, in_memory=True, bloom_filter_type="ROW", time_to_live=3600),
                "b:": dict(),
            },
        )
        try:
            self.assertIn(name.encode(), self.conn.tables())
            fam = self.conn.table(name).families()
            self.assertEqual(set(fam), {b"a", b"b"})
            self.assertEqual(fam[b"a"]["max_versions"], 7)
            self.assertTrue(fam[b"a"]["in_memory"])
            self.assertEqual(fam[b"a"]["bloom_filter_type"], b"ROW")
            self.assertEqual(fam[b"a"]["time_to_live"], 3600)
            self.assertEqual(fam[b"b"], dict(DEFAULT_FAMILY, name=b"b:"))  # the IDL's defaults
            self.assertEqual(
                fam[b"a"],
                dict(DEFAULT_FAMILY, name=b"a:", max_versions=7, in_memory=True,
                     bloom_filter_type=b"ROW", time_to_live=3600),
            )
            self.assertTrue(self.conn.is_table_enabled(name))
            self.conn.disable_table(name)
            self.assertFalse(self.conn.is_table_enabled(name))
            with self.assertRaises(Hbase_thrift.IOError) as cm:
                self.conn.disable_table(name)
            self.assertEqual(
                first_line(cm.exception),
                "org.apache.hadoop.hbase.TableNotEnabledException: "
                "org.apache.hadoop.hbase.TableNotEnabledException: " + name,
            )
            self.conn.enable_table(name)
            self.assertTrue(self.conn.is_table_enabled(name))
            with self.assertRaises(Hbase_thrift.IOError) as cm:
                self.conn.enable_table(name)
            self.assertEqual(
                first_line(cm.exception),
                "org.apache.hadoop.hbase.TableNotDisabledException: tableName=%s, state=ENABLED" % name,
            )
            with self.assertRaises(Hbase_thrift.AlreadyExists) as cm:
                self.conn.create_table(name, {"a": dict()})
            self.assertEqual(text(cm.exception), "table name already in use")
            regions = self.conn.table(name).regions()
            self.assertEqual(len(regions), 1)
            self.assertEqual(regions[0]["start_key"], b"")
            self.assertEqual(regions[0]["end_key"], b"")
            self.assertTrue(regions[0]["name"].startswith(name.encode() + b","))
            self.assertGreater(regions[0]["port"], 0)
            self.conn.compact_table(name)
            self.conn.compact_table(name, major=True)
        finally:
            self.conn.delete_table(name, disable=True)
        self.assertNotIn(name.encode(), self.conn.tables())

    def test_create_table_errors(self):
        c = self.conn.client
        cd = Hbase_thrift.ColumnDescriptor
        cases = [
            (cd(name=b"cf:", maxVersions=0),
             "java.lang.IllegalArgumentException: Maximum versions must be positive"),
            (cd(name=b"cf:", compression=b"NOPE"),
             "java.lang.IllegalArgumentException: Unsupported compression algorithm name: nope"),
            (cd(name=b"cf:", bloomFilterType=b"NOPE"),
             "java.lang.IllegalArgumentException: No enum constant "
             "org.apache.hadoop.hbase.regionserver.BloomType.NOPE"),
        ]
        for desc, message in cases:
            with self.assertRaises(Hbase_thrift.IllegalArgument) as cm:
                c.createTable(unique("bad").encode(), [desc])
            self.assertEqual(first_line(cm.exception), message)
        # An illegal table name escapes HBase's handler: Thrift's internal error.
        with self.assertRaises(TApplicationException) as cm:
            self.conn.create_table("bad name!", {"cf": dict()})
        self.assertEqual(cm.exception.type, TApplicationException.INTERNAL_ERROR)
        self.assertTrue(text(cm.exception).startswith("Internal error processing createTable"))
        # GZ is one of HBase's codecs, not one of Cellar's (docs/thrift.md).
        name = unique("gz")
        if HBASE:
            self.conn.create_table(name, {"cf": dict(compression="GZ")})
            self.assertEqual(self.conn.table(name).families()[b"cf"]["compression"], b"GZ")
            self.conn.delete_table(name, disable=True)
        else:
            with self.assertRaises(Hbase_thrift.IllegalArgument) as cm:
                self.conn.create_table(name, {"cf": dict(compression="GZ")})
            self.assertIn("GZ", text(cm.exception))

    def test_delete_of_an_enabled_table_is_refused_as_hbase_does(self):
        name = unique("enabled")
        self.conn.create_table(name, {"a": dict()})
        with self.assertRaises(Hbase_thrift.IOError) as cm:
            self.conn.delete_table(name)  # disable=False
        self.assertEqual(
            first_line(cm.exception),
            "org.apache.hadoop.hbase.TableNotDisabledException: "
            "org.apache.hadoop.hbase.TableNotDisabledException: Not DISABLED; tableName=%s, "
            "state=ENABLED" % name,
        )
        self.conn.delete_table(name, disable=True)
        with self.assertRaises(Hbase_thrift.IOError) as cm:
            self.conn.delete_table(name, disable=False)
        self.assertEqual(first_line(cm.exception), "java.io.IOException: table does not exist")
        with self.assertRaises(Hbase_thrift.IOError) as cm:
            self.conn.delete_table(name, disable=True)  # isTableEnabled fails first
        self.assertEqual(
            first_line(cm.exception), "org.apache.hadoop.hbase.TableNotFoundException: " + name
        )
        with self.assertRaises(Hbase_thrift.IOError) as cm:
            self.conn.disable_table(name)
        self.assertEqual(
            first_line(cm.exception),
            "org.apache.hadoop.hbase.TableNotFoundException: "
            "org.apache.hadoop.hbase.TableNotFoundException: " + name,
        )
        with self.assertRaises(Hbase_thrift.IOError) as cm:
            self.conn.enable_table(name)
        self.assertEqual(
            first_line(cm.exception), "org.apache.hadoop.hbase.TableNotFoundException: " + name
        )

    # ---- reads and writes ----

    def test_put_row_rows(self):
        t = self.table
        t.put(b"r1", {b"cf:a": b"1", b"cf:b": b"2", b"cg:x": b"3"})
        t.put(b"r2", {b"cf:a": b"4"})
        self.assertEqual(t.row(b"r1"), {b"cf:a": b"1", b"cf:b": b"2", b"cg:x": b"3"})
        self.assertEqual(t.row(b"r1", columns=[b"cf"]), {b"cf:a": b"1", b"cf:b": b"2"})
        self.assertEqual(t.row(b"r1", columns=[b"cf:b", b"cg"]), {b"cf:b": b"2", b"cg:x": b"3"})
        self.assertEqual(t.row(b"missing"), {})
        rows = t.rows([b"r2", b"missing", b"r1"], columns=[b"cf:a"])
        self.assertEqual(rows, [(b"r2", {b"cf:a": b"4"}), (b"r1", {b"cf:a": b"1"})])
        row = t.row(b"r1", columns=[b"cf:a"], include_timestamp=True)
        value, ts = row[b"cf:a"]
        self.assertEqual(value, b"1")
        self.assertLess(abs(ts / 1000.0 - time.time()), 600)

    def test_timestamps_and_versions(self):
        t = self.table
        for ts in (10, 20, 30):
            t.put(b"v", {b"cf:c": b"at%d" % ts}, timestamp=ts)
        self.assertEqual(t.cells(b"v", b"cf:c"), [b"at30", b"at20", b"at10"])
        self.assertEqual(t.cells(b"v", b"cf:c", versions=1), [b"at30"])
        self.assertEqual(t.cells(b"v", b"cf:c", versions=2), [b"at30", b"at20"])
        self.assertEqual(
            t.cells(b"v", b"cf:c", versions=5, include_timestamp=True),
            [(b"at30", 30), (b"at20", 20), (b"at10", 10)],
        )
        # HBase's Thrift reads at a timestamp see versions before it: [0, ts).
        self.assertEqual(t.cells(b"v", b"cf:c", versions=5, timestamp=30), [b"at20", b"at10"])
        self.assertEqual(t.row(b"v", timestamp=30), {b"cf:c": b"at20"})
        self.assertEqual(t.row(b"v", timestamp=10), {})
        self.assertEqual(t.rows([b"v"], timestamp=21), [(b"v", {b"cf:c": b"at20"})])
        # A delete at a timestamp removes every version at or before it.
        t.delete(b"v", columns=[b"cf:c"], timestamp=20)
        self.assertEqual(
            t.cells(b"v", b"cf:c", versions=5, include_timestamp=True), [(b"at30", 30)]
        )

    def test_delete(self):
        t = self.table
        t.put(b"d", {b"cf:a": b"1", b"cf:b": b"2", b"cg:x": b"3"})
        t.put(b"d", {b"cf:a": b"1b"})
        t.delete(b"d", columns=[b"cf:a"])  # every version
        self.assertEqual(t.cells(b"d", b"cf:a", versions=5), [])
        t.delete(b"d", columns=[b"cg"])  # a whole family
        self.assertEqual(t.row(b"d"), {b"cf:b": b"2"})
        t.delete(b"d")  # the whole row
        self.assertEqual(t.row(b"d"), {})
        # A put in the same millisecond as the row's delete marker would be masked by it, in
        # HBase as here.
        time.sleep(0.01)
        t.put(b"d", {b"cf:a": b"back"})
        self.assertEqual(t.row(b"d"), {b"cf:a": b"back"})
        t.put(b"w", {b"cf:a": b"1"}, wal=False)
        self.assertEqual(t.row(b"w"), {b"cf:a": b"1"})

    def test_scan(self):
        t = self.table
        for i in range(30):
            t.put(b"s%02d" % i, {b"cf:n": b"%d" % i, b"cg:m": b"x" * (i % 3)})
        keys = lambda it: [k for k, _ in it]
        self.assertEqual(len(list(t.scan())), 30)
        self.assertEqual(keys(t.scan(row_start=b"s10", row_stop=b"s13")), [b"s10", b"s11", b"s12"])
        self.assertEqual(keys(t.scan(row_prefix=b"s2")), [b"s%02d" % i for i in range(20, 30)])
        self.assertEqual(keys(t.scan(limit=4)), [b"s00", b"s01", b"s02", b"s03"])
        self.assertEqual(len(list(t.scan(batch_size=7))), 30)
        only = list(t.scan(row_prefix=b"s0", columns=[b"cf:n"]))
        self.assertTrue(all(set(r) == {b"cf:n"} for _, r in only))
        rev = keys(t.scan(row_start=b"s05", reverse=True, limit=3))
        self.assertEqual(rev, [b"s05", b"s04", b"s03"])
        srt = list(t.scan(row_start=b"s01", limit=1, sorted_columns=True))
        self.assertEqual(list(srt[0][1].keys()), [b"cf:n", b"cg:m"])
        ts_rows = list(t.scan(row_prefix=b"s00", include_timestamp=True))
        self.assertEqual(ts_rows[0][1][b"cf:n"][0], b"0")
        # A wide row split by scan_batching (HBase's setBatch) arrives in parts.
        t.put(b"wide", {b"cf:c%02d" % i: b"v" for i in range(10)})
        parts = list(t.scan(row_start=b"wide", row_stop=b"wide\x00", scan_batching=4))
        self.assertEqual([len(r) for _, r in parts], [4, 4, 2])
        self.assertEqual({k for k, _ in parts}, {b"wide"})
        # Reads at a timestamp.
        t.put(b"old", {b"cf:n": b"old"}, timestamp=5)
        self.assertEqual(keys(t.scan(timestamp=6)), [b"old"])

    def test_scan_filters(self):
        t = self.table
        for i in range(20):
            t.put(b"f%02d" % i, {b"cf:n": b"%02d" % i, b"cf:tag": b"even" if i % 2 == 0 else b"odd"})
        keys = lambda f: [k for k, _ in t.scan(filter=f)]
        self.assertEqual(keys("PrefixFilter('f1')"), [b"f%02d" % i for i in range(10, 20)])
        self.assertEqual(
            keys("SingleColumnValueFilter('cf', 'n', =, 'binary:07')"), [b"f07"]
        )
        self.assertEqual(
            keys("SingleColumnValueFilter('cf', 'tag', =, 'binary:odd') AND PrefixFilter('f0')"),
            [b"f01", b"f03", b"f05", b"f07", b"f09"],
        )
        self.assertEqual(
            keys("RowFilter(=, 'binary:f03') OR RowFilter(=, 'binary:f17')"), [b"f03", b"f17"]
        )
        rows = list(t.scan(row_prefix=b"f0", filter="QualifierFilter(=, 'binary:tag')"))
        self.assertTrue(rows and all(set(r) == {b"cf:tag"} for _, r in rows))
        self.assertEqual(len(list(t.scan(filter="PageFilter(3)"))), 3)
        keyonly = list(t.scan(row_prefix=b"f05", filter="KeyOnlyFilter()"))
        self.assertEqual(keyonly[0][1][b"cf:n"], b"")
        self.assertEqual(keys("ValueFilter(=, 'substring:dd') AND PrefixFilter('f1')"),
                         [b"f11", b"f13", b"f15", b"f17", b"f19"])

    def test_batch(self):
        t = self.table
        with t.batch() as b:
            for i in range(50):
                b.put(b"b%02d" % i, {b"cf:x": b"%d" % i})
            b.delete(b"b07")
        self.assertEqual(len(list(t.scan(row_prefix=b"b"))), 49)
        # batch_size sends as it goes.
        b = t.batch(batch_size=10)
        for i in range(25):
            b.put(b"c%02d" % i, {b"cf:x": b"1"})
        self.assertGreaterEqual(len(list(t.scan(row_prefix=b"c"))), 20)
        b.send()
        self.assertEqual(len(list(t.scan(row_prefix=b"c"))), 25)
        # A transaction sends nothing when the block raises.
        with self.assertRaises(ValueError):
            with t.batch(transaction=True) as b:
                b.put(b"txn", {b"cf:x": b"1"})
                raise ValueError("abort")
        self.assertEqual(t.row(b"txn"), {})
        with t.batch(transaction=True) as b:
            b.put(b"txn", {b"cf:x": b"1"})
        self.assertEqual(t.row(b"txn"), {b"cf:x": b"1"})
        # A batch at a timestamp (mutateRowsTs).
        with t.batch(timestamp=1234) as b:
            b.put(b"tsb", {b"cf:x": b"1"})
        self.assertEqual(t.row(b"tsb", include_timestamp=True), {b"cf:x": (b"1", 1234)})

    def test_counters(self):
        t = self.table
        self.assertEqual(t.counter_get(b"cnt", b"cf:c"), 0)
        self.assertEqual(t.counter_inc(b"cnt", b"cf:c"), 1)
        self.assertEqual(t.counter_inc(b"cnt", b"cf:c", 10), 11)
        self.assertEqual(t.counter_dec(b"cnt", b"cf:c", 3), 8)
        t.counter_set(b"cnt", b"cf:c", 100)
        self.assertEqual(t.counter_get(b"cnt", b"cf:c"), 100)
        self.assertEqual(t.row(b"cnt")[b"cf:c"], struct.pack(">q", 100))

    def test_calls_happybase_does_not_wrap(self):
        c = self.conn.client
        name = self.name.encode()
        self.table.put(b"raw", {b"cf:a": b"x"})
        # append returns the new values.
        cells = c.append(Hbase_thrift.TAppend(table=name, row=b"raw", columns=[b"cf:a"], values=[b"yz"]))
        self.assertEqual([x.value for x in cells], [b"xyz"])
        # checkAndPut: applied only when the value matches; no value means "absent".
        put = Hbase_thrift.Mutation(column=b"cf:b", value=b"set")
        self.assertFalse(c.checkAndPut(name, b"raw", b"cf:a", b"nope", put, {}))
        self.assertTrue(c.checkAndPut(name, b"raw", b"cf:a", b"xyz", put, {}))
        self.assertFalse(c.checkAndPut(name, b"raw", b"cf:b", None, put, {}))
        self.assertTrue(c.checkAndPut(name, b"raw", b"cf:zz", None, Hbase_thrift.Mutation(column=b"cf:zz", value=b"1"), {}))
        self.assertEqual(self.table.row(b"raw")[b"cf:b"], b"set")
        # mutateRow with a delete and a put of the same row.
        c.mutateRow(name, b"raw", [
            Hbase_thrift.Mutation(isDelete=True, column=b"cf:a"),
            Hbase_thrift.Mutation(column=b"cg:new", value=b"n"),
        ], {})
        row = self.table.row(b"raw")
        self.assertNotIn(b"cf:a", row)
        self.assertEqual(row[b"cg:new"], b"n")
        # get / getVer / getRow variants.
        self.assertEqual([x.value for x in c.get(name, b"raw", b"cg:new", {})], [b"n"])
        self.assertEqual(c.get(name, b"nope", b"cg:new", {}), [])
        # increment and incrementRows.
        c.increment(Hbase_thrift.TIncrement(table=name, row=b"inc", column=b"cf:i", ammount=5))
        c.incrementRows([Hbase_thrift.TIncrement(table=name, row=b"inc", column=b"cf:i", ammount=2)] * 3)
        self.assertEqual(self.table.counter_get(b"inc", b"cf:i"), 11)
        # deleteAllRowTs removes what is at or before the timestamp.
        self.table.put(b"old", {b"cf:a": b"1"}, timestamp=100)
        self.table.put(b"old", {b"cf:b": b"2"}, timestamp=300)
        c.deleteAllRowTs(name, b"old", 200, {})
        self.assertEqual(self.table.row(b"old"), {b"cf:b": b"2"})
        # Scanners: prefix scans, an exhausted scanner, an unknown id.
        sid = c.scannerOpenWithPrefix(name, b"ol", [], {})
        self.assertEqual([r.row for r in c.scannerGetList(sid, 10)], [b"old"])
        self.assertEqual(c.scannerGetList(sid, 10), [])
        self.assertEqual(c.scannerGet(sid), [])
        c.scannerClose(sid)
        with self.assertRaises(Hbase_thrift.IllegalArgument) as cm:
            c.scannerGetList(sid, 1)
        self.assertIn("scanner ID is invalid", text(cm.exception))

    # ---- errors ----

    def test_errors(self):
        missing_name = unique("missing")
        missing = self.conn.table(missing_name)
        not_found = "org.apache.hadoop.hbase.TableNotFoundException: " + missing_name
        with self.assertRaises(Hbase_thrift.IOError) as cm:
            missing.row(b"r")
        self.assertEqual(first_line(cm.exception), not_found)
        # A batch of writes fails as HBase's client reports a batch: one failure per row.
        with self.assertRaises(Hbase_thrift.IOError) as cm:
            missing.put(b"r", {b"cf:a": b"1"})
        self.assertEqual(
            first_line(cm.exception),
            "org.apache.hadoop.hbase.client.RetriesExhaustedWithDetailsException: Failed 1 "
            "action: %s: 1 time, servers with issues: null" % missing_name,
        )
        with self.assertRaises(Hbase_thrift.IOError) as cm:
            with missing.batch() as b:
                b.put(b"r1", {b"cf:a": b"1"})
                b.put(b"r2", {b"cf:a": b"1"})
                b.delete(b"r3")
        self.assertEqual(
            first_line(cm.exception),
            "org.apache.hadoop.hbase.client.RetriesExhaustedWithDetailsException: Failed 2 "
            "actions: %s: 2 times, servers with issues: null" % missing_name,
        )
        with self.assertRaises(Hbase_thrift.IOError) as cm:
            list(missing.scan())
        self.assertEqual(first_line(cm.exception), not_found)
        self.assertEqual(missing.regions(), [])
        # HBase's scannerOpen only builds the scanner: the first scannerGet finds the table
        # missing.
        sid = self.conn.client.scannerOpen(missing_name.encode(), b"", [], {})
        self.assertIsInstance(sid, int)
        with self.assertRaises(Hbase_thrift.IOError) as cm:
            self.conn.client.scannerGetList(sid, 1)
        self.assertEqual(first_line(cm.exception), not_found)
        # Unknown families: HBase wraps a put's in RetriesExhaustedWithDetailsException.
        with self.assertRaises(Hbase_thrift.IOError) as cm:
            self.table.put(b"r", {b"nosuch:a": b"1"})
        self.assertTrue(
            text(cm.exception).startswith(
                "org.apache.hadoop.hbase.client.RetriesExhaustedWithDetailsException: Failed 1 "
                "action: org.apache.hadoop.hbase.regionserver.NoSuchColumnFamilyException: "
            ),
            text(cm.exception),
        )
        self.assertIn("nosuch", text(cm.exception))
        # A counter that is not 8 bytes.
        self.table.put(b"str", {b"cf:s": b"abc"})
        with self.assertRaises(Hbase_thrift.IOError) as cm:
            self.table.counter_inc(b"str", b"cf:s")
        self.assertEqual(
            first_line(cm.exception),
            "org.apache.hadoop.hbase.DoNotRetryIOException: "
            "org.apache.hadoop.hbase.DoNotRetryIOException: Field is not a long, it's 3 bytes wide",
        )
        with self.assertRaises(Hbase_thrift.IOError) as cm:
            self.table.row(b"r", columns=[b"nosuch:a"])
        self.assertTrue(
            text(cm.exception).startswith(
                "org.apache.hadoop.hbase.regionserver.NoSuchColumnFamilyException: "
            )
        )
        self.assertIn("nosuch", text(cm.exception))
        # A malformed filter escapes HBase's handler as Thrift's internal error; Cellar's
        # message adds the reason (HBase logs it).
        for bad in ("PrefixFilter('a'", "NoSuchFilter('a')"):
            with self.assertRaises(TApplicationException) as cm:
                list(self.table.scan(filter=bad))
            self.assertEqual(cm.exception.type, TApplicationException.INTERNAL_ERROR)
            self.assertTrue(
                text(cm.exception).startswith("Internal error processing scannerOpenWithScan")
            )
            if not HBASE:
                self.assertIn("filter", text(cm.exception))
        if not HBASE:
            self.assertIn("NoSuchFilter", text(cm.exception))
        # happybase checks versions itself; the server's own check, through the raw call:
        with self.assertRaises(Hbase_thrift.IOError) as cm:
            self.conn.client.getVer(self.name.encode(), b"r", b"cf:a", 0, {})
        self.assertEqual(first_line(cm.exception), "java.io.IOException: versions must be positive")
        # The connection still serves after every error.
        self.table.put(b"ok", {b"cf:a": b"1"})
        self.assertEqual(self.table.row(b"ok"), {b"cf:a": b"1"})

    def internal_error(self, method, call):
        """`call` fails as HBase's handler does with an exception it does not declare."""
        with self.assertRaises(TApplicationException) as cm:
            call()
        self.assertEqual(cm.exception.type, TApplicationException.INTERNAL_ERROR)
        self.assertTrue(
            text(cm.exception).startswith("Internal error processing " + method),
            text(cm.exception),
        )

    def test_bad_arguments(self):
        c, name, M = self.conn.client, self.name.encode(), Hbase_thrift.Mutation
        # A put of a family without a qualifier: mutateRows (happybase's put) fails with
        # Thrift's internal error; HBase's mutateRow drops the put silently, which Cellar
        # refuses with IllegalArgument (docs/thrift.md).
        self.internal_error("mutateRows", lambda: self.table.put(b"r", {b"cf": b"no qualifier"}))
        if HBASE:
            c.mutateRow(name, b"nq", [M(column=b"cf", value=b"v")], {})
        else:
            with self.assertRaises(Hbase_thrift.IllegalArgument) as cm:
                c.mutateRow(name, b"nq", [M(column=b"cf", value=b"v")], {})
            self.assertIn("family:qualifier", text(cm.exception))
        self.assertEqual(self.table.row(b"nq"), {})
        with self.assertRaises(Hbase_thrift.IllegalArgument) as cm:
            c.mutateRow(name, b"nq", [M(column=b":a", value=b"v")], {})
        self.assertEqual(first_line(cm.exception), "java.lang.IllegalArgumentException: Family cannot be null")
        # Negative timestamps.
        with self.assertRaises(Hbase_thrift.IllegalArgument) as cm:
            c.mutateRowTs(name, b"nt", [M(column=b"cf:a", value=b"v")], -1, {})
        self.assertEqual(
            first_line(cm.exception), "java.lang.IllegalArgumentException: Timestamp cannot be negative. ts=-1"
        )
        batch = [Hbase_thrift.BatchMutation(row=b"nt", mutations=[M(column=b"cf:a", value=b"v")])]
        self.internal_error("mutateRowsTs", lambda: c.mutateRowsTs(name, batch, -1, {}))
        self.internal_error("getRowTs", lambda: c.getRowTs(name, b"nt", -5, {}))
        self.internal_error("getVerTs", lambda: c.getVerTs(name, b"nt", b"cf:a", -1, 1, {}))
        self.internal_error("deleteAllTs", lambda: c.deleteAllTs(name, b"nt", b"cf:a", -1, {}))
        self.internal_error(
            "scannerOpenWithScan",
            lambda: c.scannerOpenWithScan(name, Hbase_thrift.TScan(timestamp=-3), {}),
        )
        # An append whose columns and values differ in number.
        ap = Hbase_thrift.TAppend(table=name, row=b"ap", columns=[b"cf:a", b"cf:b"], values=[b"1"])
        self.internal_error("append", lambda: c.append(ap))
        # A negative row count.
        sid = c.scannerOpen(name, b"", [], {})
        self.internal_error("scannerGetList", lambda: c.scannerGetList(sid, -1))
        # checkAndPut's mutation is always a put: HBase ignores isDelete and puts an empty
        # value, which Cellar refuses (docs/thrift.md).
        self.table.put(b"cp", {b"cf:a": b"x"})
        delete = M(isDelete=True, column=b"cf:z")
        if HBASE:
            self.assertTrue(c.checkAndPut(name, b"cp", b"cf:a", b"x", delete, {}))
            self.assertEqual(self.table.row(b"cp"), {b"cf:a": b"x", b"cf:z": b""})
        else:
            with self.assertRaises(Hbase_thrift.IllegalArgument) as cm:
                c.checkAndPut(name, b"cp", b"cf:a", b"x", delete, {})
            self.assertIn("delete", text(cm.exception))
            self.assertEqual(self.table.row(b"cp"), {b"cf:a": b"x"})
        # The connection still serves after every error.
        self.table.put(b"ok", {b"cf:a": b"1"})
        self.assertEqual(self.table.row(b"ok"), {b"cf:a": b"1"})


class BufferedBinary(Modes, unittest.TestCase):
    transport, protocol = "buffered", "binary"


class BufferedCompact(Modes, unittest.TestCase):
    transport, protocol = "buffered", "compact"


class FramedBinary(Modes, unittest.TestCase):
    transport, protocol = "framed", "binary"


class FramedCompact(Modes, unittest.TestCase):
    transport, protocol = "framed", "compact"


class Compat090(unittest.TestCase):
    """happybase's compat='0.90' path: the scannerOpen* calls instead of scannerOpenWithScan."""

    def test_scanner_open_variants(self):
        conn = connect(compat="0.90")
        name = unique("compat")
        conn.create_table(name, {"cf": dict()})
        try:
            t = conn.table(name)
            for i in range(10):
                t.put(b"k%d" % i, {b"cf:a": b"%d" % i}, timestamp=100 + i)
            self.assertEqual(len(list(t.scan())), 10)
            self.assertEqual([k for k, _ in t.scan(row_start=b"k3", row_stop=b"k5")], [b"k3", b"k4"])
            self.assertEqual([k for k, _ in t.scan(timestamp=103)], [b"k0", b"k1", b"k2"])
            self.assertEqual(
                [k for k, _ in t.scan(row_start=b"k1", row_stop=b"k9", timestamp=103)], [b"k1", b"k2"]
            )
            self.assertEqual([k for k, _ in t.scan(row_prefix=b"k7")], [b"k7"])
        finally:
            conn.delete_table(name, disable=True)
            conn.close()


class Pool(unittest.TestCase):
    """A connection pool under several Python threads: every write read back, counters exact."""

    def test_pool_under_threads(self):
        host, port = address("buffered", "binary")
        pool = happybase.ConnectionPool(size=4, host=host, port=port, timeout=30000)
        name = unique("pool")
        with pool.connection() as c:
            c.create_table(name, {"cf": dict()})
        errors = []
        threads_n, per_thread = 8, 150

        def work(n):
            try:
                for i in range(per_thread):
                    with pool.connection() as c:
                        t = c.table(name)
                        key = b"t%d-%04d" % (n, i)
                        t.put(key, {b"cf:v": key})
                        if t.row(key) != {b"cf:v": key}:
                            errors.append("thread %d lost %r" % (n, key))
                        t.counter_inc(b"shared", b"cf:count")
            except Exception as e:  # reported below
                errors.append("thread %d: %r" % (n, e))

        threads = [threading.Thread(target=work, args=(n,)) for n in range(threads_n)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=300)
        self.assertFalse(any(th.is_alive() for th in threads), "a thread did not finish")
        self.assertEqual(errors, [])
        with pool.connection() as c:
            t = c.table(name)
            self.assertEqual(len(list(t.scan(row_prefix=b"t"))), threads_n * per_thread)
            self.assertEqual(t.counter_get(b"shared", b"cf:count"), threads_n * per_thread)
            c.delete_table(name, disable=True)


if __name__ == "__main__":
    unittest.main()
