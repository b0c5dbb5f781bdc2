package org.cellar.hbasecompat;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.Delete;
import org.apache.hadoop.hbase.client.Durability;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Increment;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.ResultScanner;
import org.apache.hadoop.hbase.client.Row;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;
import org.apache.hadoop.hbase.util.Bytes;

/**
 * The Java client's side of the `kill -9` test (scripts/hbase-kill.sh): not a JUnit test (the
 * script runs it with `java -cp`), because the server is killed between its two halves.
 *
 * <pre>
 * write  TABLE ROUND THREADS LOG_DIR STOP_FILE MAX_SECONDS
 * verify TABLE LOG_DIR KILLS_FILE
 * </pre>
 *
 * <p>{@code write} creates the table if needed and writes from several threads until STOP_FILE
 * exists: single puts (durability default, SYNC_WAL, FSYNC_WAL, and a few ASYNC_WAL), batches of
 * puts across regions ({@code Table.batch}), deletes of the thread's own acknowledged rows and
 * increments of its own counter. Each thread logs every call to LOG_DIR/round-R-thread-T.log
 * before sending it ({@code TRY id issuedMs kind durability rows}) and when it returns ({@code
 * DONE id finishedMs mask [counter]}, one mask character per row: 1 acknowledged, 0 not). The
 * client keeps its retries, so calls cut by the kill ride over to the restarted server (same
 * port) or fail.
 *
 * <p>{@code verify} reads every round's logs and the kill times (lines {@code round killMs
 * restartedMs}), then checks through the client: every acknowledged put is there with its exact
 * values (a get and the scan), every acknowledged delete stays deleted, each counter is at least
 * its last acknowledged value and at most the number of increments tried, no row appears that was
 * never tried, no value appears that was never written, and in every round calls were cut by the
 * kill (issued before it, failed or answered only by the restarted server) and calls were
 * acknowledged before it. Problems name the row, the round and the durability; exit 1 on any.
 */
public final class KillWorkload {
  static final byte[] FAMILY = Bytes.toBytes("f");
  static final byte[] COL_A = Bytes.toBytes("a");
  static final byte[] COL_B = Bytes.toBytes("b");
  static final byte[] COL_N = Bytes.toBytes("n");
  static final String[] PREFIXES = {"a", "b", "c", "d"};
  static final byte[][] SPLITS = {Bytes.toBytes("b"), Bytes.toBytes("c"), Bytes.toBytes("d")};

  private KillWorkload() {}

  public static void main(String[] args) throws Exception {
    if (args.length == 7 && args[0].equals("write")) {
      write(args[1], Integer.parseInt(args[2]), Integer.parseInt(args[3]), Paths.get(args[4]),
          Paths.get(args[5]), Integer.parseInt(args[6]));
    } else if (args.length == 4 && args[0].equals("verify")) {
      System.exit(verify(args[1], Paths.get(args[2]), Paths.get(args[3])) ? 0 : 1);
    } else {
      System.err.println("usage: write TABLE ROUND THREADS LOG_DIR STOP_FILE MAX_SECONDS"
          + " | verify TABLE LOG_DIR KILLS_FILE");
      System.exit(2);
    }
  }

  /** A row's value in a column: a function of both, 6 B to about 1 KiB. */
  static byte[] value(String row, String column) {
    int h = row.hashCode() & 0x7fffffff;
    return Bytes.toBytes((row + "/" + column + "|").repeat(1 + h % 40));
  }

  static String counterRow(int thread) {
    return "cnt-" + thread;
  }

  // ---- write -------------------------------------------------------------------------------

  static void write(String tableName, int round, int threads, Path logs, Path stop, int maxSeconds)
      throws Exception {
    TableName name = TableName.valueOf(tableName);
    Files.createDirectories(logs);
    try (Connection conn = Cluster.connect(); Admin admin = conn.getAdmin()) {
      if (!admin.tableExists(name)) {
        admin.createTable(TableDescriptorBuilder.newBuilder(name)
            .setColumnFamily(ColumnFamilyDescriptorBuilder.of(FAMILY)).build(), SPLITS);
      }
      AtomicLong acked = new AtomicLong();
      long deadline = System.currentTimeMillis() + maxSeconds * 1000L;
      List<Thread> workers = new ArrayList<>();
      List<Throwable> crashed = java.util.Collections.synchronizedList(new ArrayList<>());
      for (int t = 0; t < threads; t++) {
        final int thread = t;
        Thread w = new Thread(() -> {
          Path log = logs.resolve("round-" + round + "-thread-" + thread + ".log");
          try (Table table = conn.getTable(name);
              BufferedWriter out = Files.newBufferedWriter(log, StandardCharsets.UTF_8)) {
            new Writer(table, round, thread, out, acked, stop, deadline).run();
          } catch (Throwable e) {
            crashed.add(e);
          }
        }, "writer-" + t);
        w.start();
        workers.add(w);
      }
      for (Thread w : workers) {
        w.join(Math.max(1, deadline - System.currentTimeMillis()) + 120_000);
        if (w.isAlive()) {
          throw new IllegalStateException(w.getName() + " did not stop within its bound");
        }
      }
      for (Throwable e : crashed) {
        e.printStackTrace();
      }
      System.out.println("kill-workload round " + round + ": " + acked.get()
          + " calls acknowledged" + (crashed.isEmpty() ? "" : ", " + crashed.size() + " writers crashed"));
      if (!crashed.isEmpty()) {
        System.exit(1);
      }
    }
  }

  /** One thread's calls; it owns its rows and its counter. */
  static final class Writer {
    private final Table table;
    private final int round;
    private final int thread;
    private final BufferedWriter out;
    private final AtomicLong acked;
    private final Path stop;
    private final long deadline;
    private final Random rng;
    private final List<String> deletable = new ArrayList<>();
    private long nextRow;
    private long nextId;

    Writer(Table table, int round, int thread, BufferedWriter out, AtomicLong acked, Path stop,
        long deadline) {
      this.table = table;
      this.round = round;
      this.thread = thread;
      this.out = out;
      this.acked = acked;
      this.stop = stop;
      this.deadline = deadline;
      this.rng = new Random(round * 1_000_003L + thread);
    }

    String freshRow() {
      return PREFIXES[rng.nextInt(PREFIXES.length)] + "j" + thread + "-" + String.format("%02d-%07d", round, nextRow++);
    }

    Durability durable() {
      return new Durability[] {Durability.USE_DEFAULT, Durability.SYNC_WAL, Durability.FSYNC_WAL}[rng.nextInt(3)];
    }

    Put put(String row, Durability d) {
      Put p = new Put(Bytes.toBytes(row));
      p.addColumn(FAMILY, COL_A, value(row, "a"));
      p.addColumn(FAMILY, COL_B, value(row, "b"));
      p.setDurability(d);
      return p;
    }

    void run() throws IOException {
      for (int calls = 0; calls < 1_000_000; calls++) {
        if (System.currentTimeMillis() >= deadline || Files.exists(stop)) {
          return;
        }
        int pick = rng.nextInt(100);
        long id = nextId++;
        if (pick < 40) {
          Durability d = rng.nextInt(100) < 8 ? Durability.ASYNC_WAL : durable();
          String row = freshRow();
          tried(id, "PUT", d.name(), row);
          boolean ok = call(id, () -> table.put(put(row, d)));
          done(id, ok ? "1" : "0", "");
          if (ok && d != Durability.ASYNC_WAL) {
            deletable.add(row);
          }
        } else if (pick < 65) {
          int n = 2 + rng.nextInt(7);
          List<Row> actions = new ArrayList<>();
          List<String> rows = new ArrayList<>();
          List<String> durs = new ArrayList<>();
          for (int i = 0; i < n; i++) {
            Durability d = durable();
            String row = freshRow();
            rows.add(row);
            durs.add(d.name());
            actions.add(put(row, d));
          }
          tried(id, "BATCH", String.join(",", durs), String.join(",", rows));
          Object[] results = new Object[n];
          call(id, () -> table.batch(actions, results));
          StringBuilder mask = new StringBuilder();
          for (int i = 0; i < n; i++) {
            boolean ok = results[i] instanceof Result;
            mask.append(ok ? '1' : '0');
            if (ok) {
              deletable.add(rows.get(i));
            }
          }
          done(id, mask.toString(), "");
        } else if (pick < 80 && !deletable.isEmpty()) {
          String row = deletable.remove(rng.nextInt(deletable.size()));
          Durability d = durable();
          tried(id, "DELETE", d.name(), row);
          Delete del = new Delete(Bytes.toBytes(row));
          del.setDurability(d);
          boolean ok = call(id, () -> table.delete(del));
          done(id, ok ? "1" : "0", "");
        } else {
          String row = counterRow(thread);
          tried(id, "INCREMENT", Durability.USE_DEFAULT.name(), row);
          long[] value = new long[1];
          boolean ok = call(id, () -> {
            Result r = table.increment(new Increment(Bytes.toBytes(row)).addColumn(FAMILY, COL_N, 1));
            value[0] = Bytes.toLong(r.getValue(FAMILY, COL_N));
          });
          done(id, ok ? "1" : "0", ok ? " " + value[0] : "");
        }
      }
    }

    interface Action {
      void run() throws Exception;
    }

    boolean call(long id, Action a) throws IOException {
      try {
        a.run();
        acked.incrementAndGet();
        return true;
      } catch (Exception e) {
        String msg = String.valueOf(e.getMessage()).replace('\n', ' ');
        out.write("ERR " + id + " " + e.getClass().getSimpleName() + ": "
            + msg.substring(0, Math.min(300, msg.length())) + "\n");
        return false;
      }
    }

    /** Logged and flushed before the call is sent, so no row the server may hold is unlogged. */
    void tried(long id, String kind, String durability, String rows) throws IOException {
      out.write("TRY " + id + " " + System.currentTimeMillis() + " " + kind + " " + durability + " " + rows + "\n");
      out.flush();
    }

    void done(long id, String mask, String extra) throws IOException {
      out.write("DONE " + id + " " + System.currentTimeMillis() + " " + mask + extra + "\n");
      out.flush();
    }
  }

  // ---- verify ------------------------------------------------------------------------------

  /** One logged call. */
  static final class Call {
    int round;
    int thread;
    long id;
    long issued;
    long finished = -1;
    String kind;
    String[] durabilities;
    String[] rows;
    String mask;
    long counter = -1;

    boolean rowAcked(int i) {
      return mask != null && i < mask.length() && mask.charAt(i) == '1';
    }

    boolean allAcked() {
      return mask != null && mask.indexOf('0') < 0;
    }

    String where(int i) {
      String d = durabilities.length == 1 ? durabilities[0] : durabilities[i];
      return "round " + round + " thread " + thread + " call " + id + ": " + d + " " + kind
          + (rowAcked(i) ? " acknowledged" : " not acknowledged");
    }
  }

  static List<Call> readLogs(Path logs) throws IOException {
    List<Call> calls = new ArrayList<>();
    List<Path> files;
    try (Stream<Path> s = Files.list(logs)) {
      files = s.filter(p -> p.getFileName().toString().matches("round-\\d+-thread-\\d+\\.log"))
          .sorted(java.util.Comparator.comparingInt((Path p) -> logNumber(p, 1))
              .thenComparingInt(p -> logNumber(p, 3)))
          .toList();
    }
    for (Path f : files) {
      int round = logNumber(f, 1);
      int thread = logNumber(f, 3);
      Map<Long, Call> byId = new HashMap<>();
      for (String line : Files.readAllLines(f, StandardCharsets.UTF_8)) {
        String[] w = line.split(" ");
        if (w[0].equals("TRY") && w.length == 6) {
          Call c = new Call();
          c.round = round;
          c.thread = thread;
          c.id = Long.parseLong(w[1]);
          c.issued = Long.parseLong(w[2]);
          c.kind = w[3];
          c.durabilities = w[4].split(",");
          c.rows = w[5].split(",");
          byId.put(c.id, c);
          calls.add(c);
        } else if (w[0].equals("DONE") && w.length >= 4) {
          Call c = byId.get(Long.parseLong(w[1]));
          if (c == null) {
            throw new IllegalStateException(f + ": DONE without TRY: " + line);
          }
          c.finished = Long.parseLong(w[2]);
          c.mask = w[3];
          if (w.length == 5) {
            c.counter = Long.parseLong(w[4]);
          }
        }
      }
    }
    return calls;
  }

  /** The round (part 1) or thread (part 3) of a log file named round-R-thread-T.log. */
  static int logNumber(Path p, int part) {
    return Integer.parseInt(p.getFileName().toString().split("[-.]")[part]);
  }

  /** What a data row must look like. */
  enum Expect { PRESENT, ABSENT, EITHER }

  static boolean verify(String tableName, Path logs, Path kills) throws Exception {
    List<Call> calls = readLogs(logs);
    List<String> problems = new ArrayList<>();
    // Per round: when SIGKILL was sent, when the killed server was reaped, and when the
    // restarted one was seen listening (epoch ms).
    Map<Integer, long[]> killAt = new TreeMap<>();
    for (String line : Files.readAllLines(kills, StandardCharsets.UTF_8)) {
      String[] w = line.trim().split("\\s+");
      if (w.length == 4) {
        killAt.put(Integer.parseInt(w[0]),
            new long[] {Long.parseLong(w[1]), Long.parseLong(w[2]), Long.parseLong(w[3])});
      }
    }
    // Calls are replayed in each thread's order (rows and counters are owned by one thread, and
    // files are read round by round).
    Map<String, Expect> expect = new HashMap<>();
    Map<String, String> history = new HashMap<>();
    Map<String, Long> counterLastAcked = new HashMap<>();
    Map<String, Long> counterTried = new HashMap<>();
    // Per round: calls, acknowledged before the kill, in flight at the kill (issued before it,
    // answered after it or never), of those answered after the killed server was reaped (so by
    // the restarted one, through the client's retries), failed.
    Map<Integer, int[]> perRound = new TreeMap<>();
    for (Call c : calls) {
      int[] stats = perRound.computeIfAbsent(c.round, r -> new int[5]);
      stats[0]++;
      if (!c.allAcked()) {
        stats[4]++;
      }
      long[] k = killAt.get(c.round);
      if (k != null) {
        if (c.allAcked() && c.finished < k[0]) {
          stats[1]++;
        }
        if (c.issued < k[0] && (c.finished < 0 || c.finished > k[0])) {
          stats[2]++;
          if (c.allAcked() && c.finished > k[1]) {
            stats[3]++;
          }
        }
      }
      for (int i = 0; i < c.rows.length; i++) {
        String row = c.rows[i];
        String note = c.where(i);
        if (!c.kind.equals("INCREMENT")) {
          history.merge(row, note, (a, b) -> a + "; " + b);
        }
        switch (c.kind) {
          case "PUT", "BATCH" -> {
            boolean async = c.durabilities[c.durabilities.length == 1 ? 0 : i].equals("ASYNC_WAL");
            expect.put(row, async || !c.rowAcked(i) ? Expect.EITHER : Expect.PRESENT);
          }
          case "DELETE" -> expect.put(row, c.rowAcked(i) ? Expect.ABSENT : Expect.EITHER);
          case "INCREMENT" -> {
            counterTried.merge(row, 1L, Long::sum);
            if (c.rowAcked(i)) {
              Long last = counterLastAcked.get(row);
              if (last != null && c.counter <= last) {
                problems.add("counter " + row + ": " + note + " answered " + c.counter
                    + " after an acknowledged " + last);
              }
              counterLastAcked.put(row, c.counter);
            }
          }
          default -> problems.add("unknown call kind " + c.kind);
        }
      }
    }
    PrintStream o = System.out;
    for (Map.Entry<Integer, long[]> e : killAt.entrySet()) {
      int[] s = perRound.getOrDefault(e.getKey(), new int[5]);
      long[] k = e.getValue();
      o.println("kill-workload round " + e.getKey() + ": " + s[0] + " calls, " + s[1]
          + " acknowledged before the kill, " + s[2] + " in flight at it (" + s[3]
          + " of them answered after the killed server was reaped), " + s[4] + " failed; server"
          + " reaped " + (k[1] - k[0]) + " ms and seen listening again " + (k[2] - k[0])
          + " ms after the SIGKILL");
      if (s[1] == 0) {
        problems.add("round " + e.getKey() + ": no call was acknowledged before the kill");
      }
      if (s[2] == 0) {
        problems.add("round " + e.getKey() + ": no call was in flight at the kill");
      }
    }

    TableName name = TableName.valueOf(tableName);
    int scanned = 0;
    int lostAsync = 0;
    try (Connection conn = Cluster.connect(); Table table = conn.getTable(name)) {
      Map<String, Result> seen = new HashMap<>();
      try (ResultScanner scanner = table.getScanner(new Scan().setCaching(1000))) {
        for (Result r : scanner) {
          String row = Bytes.toString(r.getRow());
          if (seen.put(row, r) != null) {
            problems.add("the scan returned row " + row + " twice");
          }
          if (++scanned > 10_000_000) {
            throw new IllegalStateException("the scan does not end");
          }
        }
      }
      for (Map.Entry<String, Result> e : seen.entrySet()) {
        String row = e.getKey();
        Result r = e.getValue();
        if (counterTried.containsKey(row)) {
          long last = counterLastAcked.getOrDefault(row, 0L);
          long tried = counterTried.get(row);
          checkCounter(row, r, last, tried,
              tried + " increments by 1 tried, the last acknowledged answered " + last, problems);
          continue;
        }
        Expect x = expect.get(row);
        if (x == null) {
          problems.add("phantom row " + row + ": never tried by any writer; holds " + describe(r));
          continue;
        }
        if (x == Expect.ABSENT) {
          problems.add("row " + row + " is back after its acknowledged delete (" + history.get(row) + ")");
        }
        if (!whole(row, r)) {
          problems.add("row " + row + " holds " + describe(r) + " instead of its two written values ("
              + history.get(row) + ")");
        }
      }
      List<String> mustRead = new ArrayList<>();
      for (Map.Entry<String, Expect> e : expect.entrySet()) {
        String row = e.getKey();
        if (e.getValue() == Expect.PRESENT) {
          mustRead.add(row);
          if (!seen.containsKey(row)) {
            problems.add("row " + row + " is lost: the scan does not return it (" + history.get(row) + ")");
          }
        } else if (e.getValue() == Expect.EITHER && !seen.containsKey(row)
            && history.get(row).contains("ASYNC_WAL")) {
          lostAsync++;
        }
      }
      for (Map.Entry<String, Long> e : counterLastAcked.entrySet()) {
        if (!seen.containsKey(e.getKey())) {
          problems.add("counter " + e.getKey() + " is lost; last acknowledged " + e.getValue());
        }
      }
      // Point reads of every acknowledged row, through Table.get(List).
      for (int from = 0; from < mustRead.size(); from += 500) {
        List<String> chunk = mustRead.subList(from, Math.min(mustRead.size(), from + 500));
        List<Get> gets = new ArrayList<>();
        for (String row : chunk) {
          gets.add(new Get(Bytes.toBytes(row)));
        }
        Result[] got = table.get(gets);
        for (int i = 0; i < chunk.size(); i++) {
          if (!whole(chunk.get(i), got[i])) {
            problems.add("get of acknowledged row " + chunk.get(i) + " returned " + describe(got[i])
                + " (" + history.get(chunk.get(i)) + ")");
          }
        }
      }
      o.println("kill-workload verify: " + calls.size() + " calls in " + killAt.size() + " rounds, "
          + scanned + " rows scanned, " + mustRead.size() + " acknowledged rows read back, "
          + counterLastAcked.size() + " counters, " + lostAsync + " ASYNC_WAL rows lost");
    }
    for (int i = 0; i < problems.size() && i < 50; i++) {
      o.println("PROBLEM " + problems.get(i));
    }
    if (!problems.isEmpty()) {
      o.println("kill-workload verify: " + problems.size() + " problems");
    }
    return problems.isEmpty();
  }

  static void checkCounter(String row, Result r, long lastAcked, long tried, String history,
      List<String> problems) {
    byte[] v = r.getValue(FAMILY, COL_N);
    if (r.size() != 1 || v == null || v.length != 8) {
      problems.add("counter " + row + " holds " + describe(r) + " (" + history + ")");
      return;
    }
    long n = Bytes.toLong(v);
    if (n < lastAcked) {
      problems.add("counter " + row + " reads " + n + ", below its last acknowledged value "
          + lastAcked + " (" + history + ")");
    }
    if (n > tried) {
      problems.add("counter " + row + " reads " + n + " after only " + tried
          + " increments by 1 were tried: an increment was applied twice (" + history + ")");
    }
  }

  static boolean whole(String row, Result r) {
    return r.size() == 2
        && Bytes.equals(r.getValue(FAMILY, COL_A), value(row, "a"))
        && Bytes.equals(r.getValue(FAMILY, COL_B), value(row, "b"));
  }

  static String describe(Result r) {
    if (r == null || r.isEmpty()) {
      return "no cells";
    }
    StringBuilder s = new StringBuilder();
    for (Cell c : r.rawCells()) {
      byte[] v = CellUtil.cloneValue(c);
      s.append('[').append(Bytes.toString(CellUtil.cloneFamily(c))).append(':')
          .append(Bytes.toString(CellUtil.cloneQualifier(c))).append(" = ").append(v.length)
          .append(" bytes ").append(Bytes.toStringBinary(v, 0, Math.min(24, v.length))).append("] ");
    }
    return s.toString();
  }
}
