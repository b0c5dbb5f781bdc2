// The HBase side of scripts/bench-move-in.sh, with HBase 2.6.4's own client and nothing else:
//   java -cp "$(scripts/hbase/fetch.sh)/*" MoveInBench.java COMMAND ADDR ...
// ADDR is a server answering HBase's client (hbase.client.bootstrap.servers, no ZooKeeper).
//
//   load ADDR TABLE ROWS COLUMNS VALUE_SIZE SPLITS SNAPSHOT
//       Creates TABLE (family f, one version, no compression or encoding: HBase's defaults)
//       pre-split at SPLITS (comma-separated row keys), writes ROWS rows of COLUMNS cells of
//       VALUE_SIZE random bytes each through a BufferedMutator (row keys: 16 hex digits of a
//       64-bit mix of the row number, so every region gets its share), flushes, major-compacts
//       (waiting until no compaction runs: one store file per region, as a table that has
//       lived a while has), and takes snapshot SNAPSHOT. Prints "loaded ROWS rows, CELLS cells,
//       RAW bytes of values in MS ms" and "snapshot SNAPSHOT of TABLE taken".
//
// Deterministic: the same ROWS/COLUMNS/VALUE_SIZE give the same cells.
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.BufferedMutator;
import org.apache.hadoop.hbase.client.BufferedMutatorParams;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.CompactionState;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.Durability;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;
import org.apache.hadoop.hbase.util.Bytes;

public class MoveInBench {
  static final byte[] F = Bytes.toBytes("f");

  public static void main(String[] args) throws Exception {
    if (args.length < 3) {
      System.err.println("usage: MoveInBench load ADDR TABLE ROWS COLUMNS VALUE_SIZE SPLITS SNAPSHOT");
      System.exit(2);
    }
    Configuration conf = HBaseConfiguration.create();
    conf.set("hbase.client.registry.impl", "org.apache.hadoop.hbase.client.RpcConnectionRegistry");
    conf.set("hbase.client.bootstrap.servers", args[1]);
    conf.setInt("hbase.client.retries.number", 10);
    TableName table = TableName.valueOf(args[2]);
    try (Connection c = ConnectionFactory.createConnection(conf); Admin admin = c.getAdmin()) {
      switch (args[0]) {
        case "load":
          if (args.length != 8) {
            System.err.println("load needs ADDR TABLE ROWS COLUMNS VALUE_SIZE SPLITS SNAPSHOT");
            System.exit(2);
          }
          create(admin, table, args[6]);
          load(c, admin, table, Long.parseLong(args[3]), Integer.parseInt(args[4]),
              Integer.parseInt(args[5]));
          admin.snapshot(args[7], table);
          System.out.println("snapshot " + args[7] + " of " + table + " taken");
          break;
        default:
          System.err.println("unknown command " + args[0]);
          System.exit(2);
      }
    }
  }

  static void create(Admin admin, TableName table, String splits) throws Exception {
    List<byte[]> keys = new ArrayList<>();
    for (String s : splits.split(",")) {
      if (!s.isEmpty()) {
        keys.add(Bytes.toBytes(s));
      }
    }
    admin.createTable(TableDescriptorBuilder.newBuilder(table)
        .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(F).setMaxVersions(1).build())
        .build(), keys.toArray(new byte[0][]));
  }

  /** SplitMix64's finalizer: a bijection, so distinct rows get distinct keys. */
  static long mix(long z) {
    z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
    z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
    return z ^ (z >>> 31);
  }

  static void load(Connection c, Admin admin, TableName table, long rows, int columns, int valueSize)
      throws Exception {
    long t0 = System.nanoTime();
    byte[][] qualifiers = new byte[columns][];
    for (int q = 0; q < columns; q++) {
      qualifiers[q] = Bytes.toBytes("field" + q);
    }
    Random random = new Random(42);
    BufferedMutatorParams params = new BufferedMutatorParams(table).writeBufferSize(8L << 20);
    try (BufferedMutator m = c.getBufferedMutator(params)) {
      for (long i = 0; i < rows; i++) {
        Put put = new Put(Bytes.toBytes(String.format("%016x", mix(i))));
        // The load is flushed below; its WAL would only slow the load.
        put.setDurability(Durability.SKIP_WAL);
        for (int q = 0; q < columns; q++) {
          byte[] value = new byte[valueSize];
          random.nextBytes(value);
          put.addColumn(F, qualifiers[q], value);
        }
        m.mutate(put);
      }
    }
    long loadMs = (System.nanoTime() - t0) / 1_000_000;
    admin.flush(table);
    long requested = System.currentTimeMillis();
    admin.majorCompact(table);
    // The request returns before the compaction starts: wait until every region's last major
    // compaction is newer than the request (or 20 s have passed) and none runs, at most 15 minutes.
    long deadline = requested + 15 * 60_000L;
    while (System.currentTimeMillis() < deadline) {
      boolean running = admin.getCompactionState(table) != CompactionState.NONE;
      boolean done = admin.getLastMajorCompactionTimestamp(table) >= requested;
      if (!running && (done || System.currentTimeMillis() > requested + 20_000L)) {
        break;
      }
      Thread.sleep(250);
    }
    if (admin.getCompactionState(table) != CompactionState.NONE) {
      throw new IllegalStateException("the major compaction of " + table + " still runs after 15 minutes");
    }
    System.out.println("loaded " + rows + " rows, " + rows * columns + " cells, "
        + rows * columns * (long) valueSize + " bytes of values in " + loadMs + " ms");
  }
}
