import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLongArray;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.util.Bytes;

/**
 * Replication lag as a user sees it, measured the same way for every sink
 * (scripts/bench-replication.sh): every 250 ms a probe row {@code probe-N} is written to the
 * source's {@code usertable}, and one thread per sink reads each probe in turn until it is
 * there; the lag of a probe is the time from its write's acknowledgement to its first read on
 * that sink. Run as {@code java -cp "$HBASE_LIB/*" ReplicationProbe.java SOURCE SECONDS
 * STOP_FILE NAME=ADDR [NAME=ADDR...]} (addresses: HBase bootstrap servers); it writes probes
 * for SECONDS at most, or until STOP_FILE exists; prints one line per sink:
 * {@code probe NAME: N probes, lag p50 X ms, p99 Y ms, max Z ms, M never arrived}.
 */
public class ReplicationProbe {
  static final TableName TABLE = TableName.valueOf("usertable");
  static final byte[] FAMILY = Bytes.toBytes("family");
  static final byte[] QUALIFIER = Bytes.toBytes("probe");
  static final int MAX_PROBES = 100_000;

  static Connection connect(String addr) throws Exception {
    Configuration conf = HBaseConfiguration.create();
    conf.set("hbase.client.registry.impl", "org.apache.hadoop.hbase.client.RpcConnectionRegistry");
    conf.set("hbase.client.bootstrap.servers", addr);
    conf.setInt("hbase.client.retries.number", 5);
    return ConnectionFactory.createConnection(conf);
  }

  static byte[] row(int n) {
    return Bytes.toBytes(String.format("probe-%06d", n));
  }

  public static void main(String[] args) throws Exception {
    String source = args[0];
    long seconds = Long.parseLong(args[1]);
    java.io.File stop = new java.io.File(args[2]);
    List<String[]> sinks = new ArrayList<>();
    for (int i = 3; i < args.length; i++) {
      sinks.add(args[i].split("=", 2));
    }
    AtomicLongArray written = new AtomicLongArray(MAX_PROBES);
    AtomicInteger count = new AtomicInteger();
    long[][] lag = new long[sinks.size()][MAX_PROBES];
    int[] seen = new int[sinks.size()];
    List<Thread> readers = new ArrayList<>();
    long deadline = System.currentTimeMillis() + seconds * 1000;
    java.util.concurrent.atomic.AtomicBoolean writing = new java.util.concurrent.atomic.AtomicBoolean(true);
    // Readers give up on a probe 60 s after the last one was written.
    java.util.concurrent.atomic.AtomicLong stoppedAt = new java.util.concurrent.atomic.AtomicLong(Long.MAX_VALUE - 60_000);
    for (int s = 0; s < sinks.size(); s++) {
      final int sink = s;
      Thread t = new Thread(() -> {
        try (Connection c = connect(sinks.get(sink)[1]); Table table = c.getTable(TABLE)) {
          for (int n = 0; ; n++) {
            while (n >= count.get()) {
              if (!writing.get()) {
                return;
              }
              Thread.sleep(5);
            }
            while (!table.exists(new Get(row(n)).addColumn(FAMILY, QUALIFIER))) {
              if (System.currentTimeMillis() > stoppedAt.get() + 60_000) {
                return;
              }
              Thread.sleep(5);
            }
            lag[sink][n] = System.currentTimeMillis() - written.get(n);
            seen[sink] = n + 1;
          }
        } catch (Exception e) {
          System.err.println("probe reader " + sinks.get(sink)[0] + ": " + e);
        }
      });
      t.start();
      readers.add(t);
    }
    try (Connection c = connect(source); Table table = c.getTable(TABLE)) {
      for (int n = 0; n < MAX_PROBES && System.currentTimeMillis() < deadline && !stop.exists(); n++) {
        table.put(new Put(row(n)).addColumn(FAMILY, QUALIFIER, Bytes.toBytes(System.currentTimeMillis())));
        written.set(n, System.currentTimeMillis());
        count.incrementAndGet();
        Thread.sleep(250);
      }
    }
    stoppedAt.set(System.currentTimeMillis());
    writing.set(false);
    for (Thread t : readers) {
      t.join();
    }
    for (int s = 0; s < sinks.size(); s++) {
      long[] l = Arrays.copyOf(lag[s], seen[s]);
      Arrays.sort(l);
      String stats = l.length == 0 ? "no probe arrived"
          : String.format("lag p50 %d ms, p99 %d ms, max %d ms", l[(l.length - 1) / 2],
              l[Math.max(0, (int) Math.ceil(l.length * 0.99) - 1)], l[l.length - 1]);
      System.out.println("probe " + sinks.get(s)[0] + ": " + count.get() + " probes, " + stats
          + ", " + (count.get() - seen[s]) + " never arrived");
    }
  }
}
