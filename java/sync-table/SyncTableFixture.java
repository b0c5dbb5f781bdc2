// The table scripts/hbase-sync-table.sh checks HashTable/SyncTable with, written through HBase's
// own client (2.6.4, ZooKeeper registry) the same way to the source and the target:
//
//   setup   --zk KEY --table T [--rows N]
//       creates T (families f: 4 versions, g: 2 versions; split at 30, 6000, 90ff, c8 (hex))
//       and writes N rows (default 3000): binary 6-byte keys, 1-3 qualifiers of 1-3 versions
//       in f, an empty and a binary qualifier of 2 versions in g, explicit timestamps, empty
//       and 100 KiB values; the table is flushed, then deletes of every kind follow (one
//       version, versions up to a timestamp, a family, whole rows). Prints
//       "fixture: N rows, C cells visible".
//   diverge --source-zk KEY --target-zk KEY --table T [--target-table T2]
//       changes the target only: deletes its first row at or after 20 (hex), gives the first
//       cell of its first row at or after a0 another value (same coordinates), adds the row
//       700001 (two cells, no such row on the source). Prints what SyncTable must count:
//       "expected: source-missing-rows=1 target-missing-rows=1 source-missing-cells=2
//       target-missing-cells=K different-cells=1 deleted-row=HEX" (one line).
//   compact --zk KEY --table T --gone-row HEX
//       flushes and major-compacts T, then waits (up to 120 s) until a raw scan of row HEX finds nothing:
//       the delete markers of a deleted row, and the cells they hid, are gone.
//   sizes --zk KEY --table T
//       each region's size as TableInputFormat gives its split (RegionSizeCalculator, from
//       the region server's region loads): "sizes: S1 S2 ..." in bytes, in region order.
//   compare --source-zk KEY --target-zk KEY --table T [--target-table T2]
//       reads every version of every cell of both tables and compares them; prints
//       "compare: N cells equal" (exit 0) or the first differences (exit 1).
//
// Run by scripts/hbase-sync-table.sh: java -cp "LIB/*" SyncTableFixture.java COMMAND ARGS
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.Delete;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.ResultScanner;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;
import org.apache.hadoop.hbase.util.Bytes;

public class SyncTableFixture {
  static final long T0 = 1_700_000_000_000L;
  static final byte[] F = Bytes.toBytes("f");
  static final byte[] G = Bytes.toBytes("g");
  static final byte[] G_BINARY = {0x00, 0x01, (byte) 0xff};
  static final byte[][] SPLITS = {
    {0x30}, {0x60, 0x00}, {(byte) 0x90, (byte) 0xff}, {(byte) 0xc8}
  };
  static final byte[] EXTRA_ROW = {0x70, 0x00, 0x01};

  public static void main(String[] args) throws Exception {
    if (args.length < 1) fail("usage: SyncTableFixture setup|diverge|compact|compare ARGS");
    Map<String, String> opts = new HashMap<>();
    for (int i = 1; i < args.length; i += 2) {
      if (!args[i].startsWith("--") || i + 1 >= args.length) fail("bad argument " + args[i]);
      opts.put(args[i].substring(2), args[i + 1]);
    }
    switch (args[0]) {
      case "setup": setup(req(opts, "zk"), req(opts, "table"),
          Integer.parseInt(opts.getOrDefault("rows", "3000"))); break;
      case "diverge": diverge(req(opts, "source-zk"), req(opts, "target-zk"), req(opts, "table"),
          opts.getOrDefault("target-table", req(opts, "table"))); break;
      case "compact": compact(req(opts, "zk"), req(opts, "table"),
          Bytes.fromHex(req(opts, "gone-row"))); break;
      case "sizes": sizes(req(opts, "zk"), req(opts, "table")); break;
      case "compare": compare(req(opts, "source-zk"), req(opts, "target-zk"), req(opts, "table"),
          opts.getOrDefault("target-table", req(opts, "table"))); break;
      default: fail("unknown command " + args[0]);
    }
    System.exit(0);
  }

  static String req(Map<String, String> opts, String name) {
    String v = opts.get(name);
    if (v == null) fail("--" + name + " is required");
    return v;
  }

  static void fail(String message) {
    System.err.println("SyncTableFixture: " + message);
    System.exit(2);
  }

  static Connection connect(String clusterKey) throws Exception {
    Configuration conf = HBaseConfiguration.createClusterConf(HBaseConfiguration.create(), clusterKey);
    conf.setInt("hbase.client.retries.number", 10);
    conf.setInt("hbase.rpc.timeout", 30_000);
    conf.setInt("hbase.client.operation.timeout", 120_000);
    conf.setInt("zookeeper.recovery.retry", 3);
    return ConnectionFactory.createConnection(conf);
  }

  // Row i's key: 4 bytes of a multiplicative hash (every byte value, 00 and ff included, occurs)
  // and i itself in 2 bytes, so keys are distinct and spread over all regions.
  static byte[] key(int i) {
    int h = i * 0x9E3779B1;
    h ^= h >>> 15;
    return new byte[] {(byte) (h >>> 24), (byte) (h >>> 16), (byte) (h >>> 8), (byte) h,
        (byte) (i >>> 8), (byte) i};
  }

  static byte[] fq(int q) {
    return Bytes.toBytes("q" + q);
  }

  static long fts(int i, int v) {
    return T0 + i * 10L + v;
  }

  static byte[] fvalue(int i, int q, int v) {
    if (i % 500 == 7 && q == 0 && v == 0) {
      byte[] big = new byte[100 * 1024];
      for (int k = 0; k < big.length; k++) big[k] = (byte) (k * 31 + i);
      return big;
    }
    return Bytes.add(Bytes.toBytes("v" + i + "-" + q + "-" + v), new byte[] {0x00, (byte) 0xff, (byte) i});
  }

  static void setup(String zk, String tableName, int rows) throws Exception {
    if (rows < 1 || rows > 65535) fail("--rows must be 1..65535");
    TableName t = TableName.valueOf(tableName);
    try (Connection c = connect(zk); Admin admin = c.getAdmin()) {
      admin.createTable(TableDescriptorBuilder.newBuilder(t)
          .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(F).setMaxVersions(4).build())
          .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(G).setMaxVersions(2).build())
          .build(), SPLITS);
      try (Table table = c.getTable(t)) {
        List<Put> puts = new ArrayList<>();
        for (int i = 0; i < rows; i++) {
          Put p = new Put(key(i));
          for (int q = 0; q <= i % 3; q++) {
            for (int v = 0; v <= (i / 3) % 3; v++) p.addColumn(F, fq(q), fts(i, v), fvalue(i, q, v));
          }
          for (int v = 0; v < 2; v++) {
            byte[] value = i % 7 == 0 ? new byte[0] : Bytes.toBytes((long) i * 1000 + v);
            p.addColumn(G, new byte[0], T0 + v, value);
            p.addColumn(G, G_BINARY, T0 + 5 + v, Bytes.toBytes("g" + i + "." + v));
          }
          puts.add(p);
          if (puts.size() == 500) { table.put(puts); puts.clear(); }
        }
        table.put(puts);
        admin.flush(t);
        List<Delete> deletes = new ArrayList<>();
        for (int i = 0; i < rows; i++) {
          int newest = (i / 3) % 3;
          if (i % 101 == 0) { deletes.add(new Delete(key(i))); continue; }
          Delete d = new Delete(key(i));
          if (i % 17 == 0) d.addColumn(F, fq(0), fts(i, newest));
          if (i % 43 == 0) d.addColumns(F, fq(i % 3), fts(i, 0));
          if (i % 29 == 0) d.addFamily(G);
          if (!d.isEmpty()) deletes.add(d);
        }
        table.delete(deletes);
      }
      System.out.println("fixture: " + rows + " rows, " + countCells(c, t) + " cells visible");
    }
  }

  static long countCells(Connection c, TableName t) throws Exception {
    long n = 0;
    try (Table table = c.getTable(t);
         ResultScanner s = table.getScanner(new Scan().readAllVersions())) {
      for (Result r : s) n += r.size();
    }
    return n;
  }

  static Result firstRowFrom(Table table, byte[] start) throws Exception {
    try (ResultScanner s = table.getScanner(new Scan().withStartRow(start).readAllVersions().setLimit(1))) {
      Result r = s.next();
      if (r == null) fail("no row at or after " + Bytes.toHex(start));
      return r;
    }
  }

  static void diverge(String sourceZk, String targetZk, String sourceTable, String targetTable)
      throws Exception {
    try (Connection src = connect(sourceZk); Connection dst = connect(targetZk);
         Table source = src.getTable(TableName.valueOf(sourceTable));
         Table target = dst.getTable(TableName.valueOf(targetTable))) {
      // What SyncTable must find is counted on the source, the reference.
      Result gone = firstRowFrom(source, new byte[] {0x20});
      Result changed = firstRowFrom(source, new byte[] {(byte) 0xa0});
      Cell cell = changed.rawCells()[0];
      target.delete(new Delete(gone.getRow()));
      target.put(new Put(changed.getRow()).addColumn(CellUtil.cloneFamily(cell),
          CellUtil.cloneQualifier(cell), cell.getTimestamp(), Bytes.toBytes("changed on the target")));
      target.put(new Put(EXTRA_ROW).addColumn(F, fq(0), T0, Bytes.toBytes("extra"))
          .addColumn(G, new byte[0], T0, Bytes.toBytes("extra too")));
      System.out.println("expected: source-missing-rows=1 target-missing-rows=1"
          + " source-missing-cells=2 target-missing-cells=" + gone.size()
          + " different-cells=1 deleted-row=" + Bytes.toHex(gone.getRow()));
    }
  }

  static void compact(String zk, String tableName, byte[] goneRow) throws Exception {
    TableName t = TableName.valueOf(tableName);
    try (Connection c = connect(zk); Admin admin = c.getAdmin(); Table table = c.getTable(t)) {
      // A compaction takes store files only: the markers still in the memstore are flushed first.
      admin.flush(t);
      admin.majorCompact(t);
      long deadline = System.currentTimeMillis() + 120_000;
      while (true) {
        int raw = 0;
        try (ResultScanner s = table.getScanner(new Scan().withStartRow(goneRow)
            .withStopRow(goneRow, true).setRaw(true).readAllVersions())) {
          for (Result r : s) raw += r.size();
        }
        if (raw == 0) break;
        if (System.currentTimeMillis() > deadline) {
          fail("after major compaction a raw scan of row " + Bytes.toHex(goneRow) + " still finds "
              + raw + " cells (delete markers and the cells they hide) after 120 s");
        }
        Thread.sleep(500);
      }
      System.out.println("compact: " + tableName + " major-compacted, row " + Bytes.toHex(goneRow) + " purged");
    }
  }

  static void sizes(String zk, String tableName) throws Exception {
    TableName t = TableName.valueOf(tableName);
    StringBuilder out = new StringBuilder("sizes:");
    try (Connection c = connect(zk); Admin admin = c.getAdmin();
         org.apache.hadoop.hbase.client.RegionLocator locator = c.getRegionLocator(t)) {
      org.apache.hadoop.hbase.mapreduce.RegionSizeCalculator calc =
          new org.apache.hadoop.hbase.mapreduce.RegionSizeCalculator(locator, admin);
      for (org.apache.hadoop.hbase.HRegionLocation l : locator.getAllRegionLocations()) {
        out.append(' ').append(calc.getRegionSize(l.getRegion().getRegionName()));
      }
    }
    System.out.println(out);
  }

  static void compare(String sourceZk, String targetZk, String sourceTable, String targetTable)
      throws Exception {
    long cells = 0;
    int differences = 0;
    try (Connection src = connect(sourceZk); Connection dst = connect(targetZk);
         Table source = src.getTable(TableName.valueOf(sourceTable));
         Table target = dst.getTable(TableName.valueOf(targetTable));
         ResultScanner a = source.getScanner(new Scan().readAllVersions());
         ResultScanner b = target.getScanner(new Scan().readAllVersions())) {
      Iterator<Cell> ia = cells(a), ib = cells(b);
      Cell ca = ia.hasNext() ? ia.next() : null, cb = ib.hasNext() ? ib.next() : null;
      while (ca != null || cb != null) {
        boolean same = ca != null && cb != null && CellUtil.equals(ca, cb) && CellUtil.matchingValue(ca, cb);
        if (same) {
          cells++;
          ca = ia.hasNext() ? ia.next() : null;
          cb = ib.hasNext() ? ib.next() : null;
          continue;
        }
        if (++differences <= 10) System.err.println("compare: source " + ca + " / target " + cb);
        int cmp = ca == null ? 1 : cb == null ? -1
            : org.apache.hadoop.hbase.CellComparator.getInstance().compare(ca, cb);
        if (cmp <= 0) ca = ia.hasNext() ? ia.next() : null;
        if (cmp >= 0) cb = ib.hasNext() ? ib.next() : null;
      }
    }
    if (differences > 0) {
      System.out.println("compare: " + differences + " differences, " + cells + " cells equal");
      System.exit(1);
    }
    System.out.println("compare: " + cells + " cells equal");
  }

  static Iterator<Cell> cells(ResultScanner scanner) {
    Iterator<Result> results = scanner.iterator();
    return new Iterator<Cell>() {
      Iterator<Cell> current = java.util.Collections.emptyIterator();
      public boolean hasNext() {
        while (!current.hasNext() && results.hasNext()) current = Arrays.asList(results.next().rawCells()).iterator();
        return current.hasNext();
      }
      public Cell next() {
        hasNext();
        return current.next();
      }
    };
  }
}
