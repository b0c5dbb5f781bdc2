package org.cellar.hbasecompat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.CompactionState;
import org.apache.hadoop.hbase.client.Delete;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.RegionInfo;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.ResultScanner;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.SnapshotDescription;
import org.apache.hadoop.hbase.client.SnapshotType;
import org.apache.hadoop.hbase.client.Table;
import org.junit.jupiter.api.Test;

/**
 * HBase's snapshots through the Java Admin: a snapshot taken while a client writes holds every
 * write finished before it began and nothing begun after it returned; listSnapshots and the
 * errors HBase gives (name taken, missing table or snapshot, restore of an enabled table, clone
 * onto an existing table); restore_snapshot brings a table back cell for cell; a clone outlives
 * its source's compaction and deletion and the snapshot's deletion; SKIPFLUSH keeps only what
 * was flushed.
 */
class SnapshotAdminTest extends CompatTest {
  private static final byte[][] SPLITS = {b("r0100"), b("r0200"), b("r0300")};
  /** Rows the writer overwrites, round and round: "r0000".."r0399", over all four regions. */
  private static final int ROWS = 400;
  private static final int WRITES_BEFORE_SNAPSHOT = 2 * ROWS;
  private static final int WRITES_AFTER_SNAPSHOT = 300;
  private static final int MAX_WRITES = 200_000;

  /** One Table.put of the writer: its counter, row, and sequence numbers at start and end. */
  private record Write(int i, String row, long start, long end) {}

  static String key(int i) {
    return String.format("r%04d", i);
  }

  @Test
  void aSnapshotDuringWritesHoldsEveryFinishedWriteAndNothingLater() throws Exception {
    String snap = TempTable.uniqueName("snap_live").getNameAsString();
    TableName clone = TempTable.uniqueName("snap_live_clone");
    try (TempTable t = TempTable.createSplit(connection, admin, "snap_live", SPLITS, "f")) {
      AtomicLong seq = new AtomicLong();
      AtomicLong snapEnd = new AtomicLong();
      AtomicInteger written = new AtomicInteger();
      AtomicInteger writtenAfter = new AtomicInteger();
      AtomicBoolean stop = new AtomicBoolean();
      List<Write> writes = new CopyOnWriteArrayList<>();
      List<Throwable> errors = new CopyOnWriteArrayList<>();
      ExecutorService writer = Executors.newSingleThreadExecutor();
      Future<?> writing = writer.submit(() -> {
        try (Table table = connection.getTable(t.name())) {
          int i = 0;
          while (i < MAX_WRITES && !stop.get()) {
            boolean after = snapEnd.get() != 0;
            // Once the snapshot has returned, every other write goes to a row never written
            // before: the clone must not hold any of them.
            String row = after && i % 2 == 1 ? "late" + i : key(i % ROWS);
            long start = seq.incrementAndGet();
            table.put(new Put(b(row)).addColumn(b("f"), b("v"), b("v" + i)));
            long end = seq.incrementAndGet();
            writes.add(new Write(i, row, start, end));
            i++;
            written.incrementAndGet();
            if (after) {
              writtenAfter.incrementAndGet();
            }
          }
        } catch (Throwable e) {
          errors.add(e);
        }
        return null;
      });
      long snapStart;
      try {
        waitFor(written, WRITES_BEFORE_SNAPSHOT, writing);
        snapStart = seq.incrementAndGet();
        admin.snapshot(snap, t.name());
        snapEnd.set(seq.incrementAndGet());
        waitFor(writtenAfter, WRITES_AFTER_SNAPSHOT, writing);
      } finally {
        stop.set(true);
        writing.get(120, TimeUnit.SECONDS);
        writer.shutdownNow();
      }
      assertEquals(List.of(), errors, "no write failed during the snapshot");

      // Per row, in the writer's order: the last write finished before the snapshot began,
      // and every write the snapshot may hold (that one or a later one begun before it returned).
      Map<String, List<Write>> byRow = new HashMap<>();
      for (Write w : writes) {
        byRow.computeIfAbsent(w.row(), r -> new ArrayList<>()).add(w);
      }
      Map<String, Write> lastBefore = new HashMap<>();
      Map<String, Set<String>> allowed = new HashMap<>();
      for (Map.Entry<String, List<Write>> e : byRow.entrySet()) {
        Write last = null;
        for (Write w : e.getValue()) {
          if (w.end() < snapStart) {
            last = w;
          }
        }
        Set<String> ok = new HashSet<>();
        for (Write w : e.getValue()) {
          if ((last == null || w.i() >= last.i()) && w.start() < snapEnd.get()) {
            ok.add("v" + w.i());
          }
        }
        if (last != null) {
          lastBefore.put(e.getKey(), last);
        }
        allowed.put(e.getKey(), ok);
      }
      assertEquals(ROWS, lastBefore.size(), "every row was written before the snapshot began");
      long during = writes.stream().filter(w -> w.end() > snapStart && w.start() < snapEnd.get()).count();
      System.out.println("snapshot during writes: " + writes.size() + " writes, " + during
          + " of them overlapping the snapshot call, " + writtenAfter.get() + " after it returned");

      admin.cloneSnapshot(snap, clone);
      Map<String, String> got = new TreeMap<>();
      try (Table table = connection.getTable(clone); ResultScanner scanner = table.getScanner(new Scan())) {
        for (Result r : scanner) {
          got.put(s(r.getRow()), s(r.getValue(b("f"), b("v"))));
        }
      }
      for (String row : lastBefore.keySet()) {
        assertTrue(got.containsKey(row), "row " + row + " written before the snapshot is missing");
      }
      for (Map.Entry<String, String> e : got.entrySet()) {
        Set<String> ok = allowed.get(e.getKey());
        assertTrue(ok != null && !ok.isEmpty(),
            "row " + e.getKey() + " is in the clone but no write of it began before the snapshot returned");
        assertTrue(ok.contains(e.getValue()), "row " + e.getKey() + " holds " + e.getValue()
            + "; the snapshot allows only " + ok);
      }
      // The source itself went on: it holds the last write of each row.
      assertEquals(ROWS + writes.stream().filter(w -> w.row().startsWith("late")).count(),
          rows(t.table(), new Scan()).size());
    } finally {
      dropIfExists(clone);
      deleteSnapshotIfExists(snap);
    }
  }

  @Test
  void listingAndTheErrorsHBaseGives() throws Exception {
    String snap = TempTable.uniqueName("snap_err").getNameAsString();
    try (TempTable t = TempTable.create(connection, admin, "snap_err", "f");
        TempTable other = TempTable.create(connection, admin, "snap_err_other", "f")) {
      t.table().put(new Put(b("a")).addColumn(b("f"), b("q"), b("1")));
      admin.snapshot(snap, t.name());

      SnapshotDescription listed = findSnapshot(snap);
      assertTrue(listed != null, "listSnapshots shows " + snap + ": " + admin.listSnapshots());
      assertEquals(t.name(), listed.getTableName());
      assertEquals(t.name().getNameAsString(), listed.getTableNameAsString());
      assertEquals(SnapshotType.FLUSH, listed.getType(), "a plain snapshot flushes");
      assertTrue(listed.getCreationTime() > 0, "creation time " + listed.getCreationTime());

      TableName missing = TempTable.uniqueName("snap_missing");
      String other1 = TempTable.uniqueName("snap_err_missing").getNameAsString();
      IOException e = assertThrows(IOException.class, () -> admin.snapshot(other1, missing));
      assertChain(e, "SnapshotCreationException", missing.getNameAsString());
      assertTrue(findSnapshot(other1) == null, "a failed snapshot is not listed");

      e = assertThrows(IOException.class, () -> admin.snapshot(snap, other.name()));
      assertChain(e, "SnapshotExistsException", snap);
      e = assertThrows(IOException.class, () -> admin.snapshot(snap, t.name()));
      assertChain(e, "SnapshotExistsException", snap);
      assertEquals(t.name(), findSnapshot(snap).getTableName(), "the first snapshot is untouched");

      e = assertThrows(IOException.class, () -> admin.cloneSnapshot(snap, other.name()));
      assertChain(e, "TableExistsException", other.name().getNameAsString());
      assertEquals(List.of(), rows(other.table(), new Scan()), "the existing table is untouched");

      String absent = TempTable.uniqueName("snap_absent").getNameAsString();
      TableName never = TempTable.uniqueName("snap_never");
      try {
        e = assertThrows(IOException.class, () -> admin.cloneSnapshot(absent, never));
        assertChain(e, "SnapshotDoesNotExistException", absent);
        assertFalse(admin.tableExists(never), "a failed clone creates no table");
      } finally {
        dropIfExists(never);
      }

      e = assertThrows(IOException.class, () -> admin.restoreSnapshot(snap));
      assertChain(e, "TableNotDisabledException", t.name().getNameAsString());
      assertTrue(admin.isTableEnabled(t.name()));
      assertEquals(List.of("a"), rows(t.table(), new Scan()));

      e = assertThrows(IOException.class, () -> admin.restoreSnapshot(absent));
      assertChain(e, "RestoreSnapshotException", absent);

      e = assertThrows(IOException.class, () -> admin.deleteSnapshot(absent));
      assertChain(e, "SnapshotDoesNotExistException", absent);

      admin.deleteSnapshot(snap);
      assertTrue(findSnapshot(snap) == null, "a deleted snapshot is not listed");
    } finally {
      deleteSnapshotIfExists(snap);
    }
  }

  @Test
  void restoreBringsBackEveryCellAsItWasAtTheSnapshot() throws Exception {
    String snap = TempTable.uniqueName("snap_restore").getNameAsString();
    try (TempTable t = TempTable.createSplit(connection, admin, "snap_restore",
        new byte[][] {b("r15")}, "f", "g")) {
      List<Put> puts = new ArrayList<>();
      for (int i = 0; i < 30; i++) {
        puts.add(new Put(b(String.format("r%02d", i))).addColumn(b("f"), b("a"), b("a" + i))
            .addColumn(b("f"), b("b"), b("b" + i)).addColumn(b("g"), b("c"), b("c" + i)));
      }
      t.table().put(puts.subList(0, 20));
      admin.flush(t.name());
      // Some in store files, some only in memory when the snapshot is taken.
      t.table().put(puts.subList(20, 30));
      t.table().put(new Put(b("r03")).addColumn(b("f"), b("a"), b("a3-second")));
      List<String> atSnapshot = dump(t.name());
      assertEquals(90, atSnapshot.size());
      admin.snapshot(snap, t.name());

      for (int i = 0; i < 10; i++) {
        t.table().put(new Put(b(String.format("r%02d", i))).addColumn(b("f"), b("a"), b("new" + i)));
      }
      for (int i = 30; i < 40; i++) {
        t.table().put(new Put(b(String.format("r%02d", i))).addColumn(b("f"), b("a"), b("a" + i)));
      }
      for (int i = 10; i < 15; i++) {
        t.table().delete(new Delete(b(String.format("r%02d", i))));
      }
      for (int i = 15; i < 20; i++) {
        t.table().delete(new Delete(b(String.format("r%02d", i))).addFamily(b("g")));
      }
      admin.flush(t.name());
      // The regions change too: the snapshot's second region splits.
      admin.split(t.name(), b("r25"));
      waitForStarts(t.name(), List.of("", "r15", "r25"));
      t.table().delete(new Delete(b("r25")).addColumns(b("f"), b("b")));
      assertNotEquals(atSnapshot, dump(t.name()), "the table changed after the snapshot");

      admin.disableTable(t.name());
      admin.restoreSnapshot(snap);
      assertTrue(admin.isTableDisabled(t.name()), "a restored table stays disabled");
      admin.enableTable(t.name());
      assertEquals(atSnapshot, dump(t.name()), "every cell as it was at the snapshot");
      assertEquals(List.of("", "r15"), starts(t.name()), "the snapshot's regions");

      // The restored table takes writes, and the snapshot is still there.
      t.table().put(new Put(b("r50")).addColumn(b("f"), b("a"), b("after")));
      assertEquals("after", s(t.table().get(new Get(b("r50")))
          .getValue(b("f"), b("a"))));
      assertTrue(findSnapshot(snap) != null, "restore keeps the snapshot");
    } finally {
      deleteSnapshotIfExists(snap);
    }
  }

  @Test
  void aCloneOutlivesItsSourceAndItsSnapshot() throws Exception {
    String snap = TempTable.uniqueName("snap_keep").getNameAsString();
    TableName clone = TempTable.uniqueName("snap_keep_clone");
    try {
      List<String> atSnapshot;
      try (TempTable t = TempTable.createSplit(connection, admin, "snap_keep",
          new byte[][] {b("m")}, "f")) {
        for (int round = 0; round < 3; round++) {
          List<Put> puts = new ArrayList<>();
          for (int i = 0; i < 200; i++) {
            puts.add(new Put(b(String.format("%c%04d", (char) ('a' + i % 26), i)))
                .addColumn(b("f"), b("q" + round), b("v" + round + "." + i)));
          }
          t.table().put(puts);
          if (round < 2) {
            admin.flush(t.name()); // several store files, and the last round only in memory
          }
        }
        atSnapshot = dump(t.name());
        assertEquals(600, atSnapshot.size());
        admin.snapshot(snap, t.name());

        // The source moves on: overwrites, deletes, then one file per region and drop.
        for (int i = 0; i < 200; i += 3) {
          t.table().put(new Put(b(String.format("%c%04d", (char) ('a' + i % 26), i)))
              .addColumn(b("f"), b("q0"), b("changed")));
        }
        t.table().delete(new Delete(b("a0000")));
        admin.flush(t.name());
        admin.majorCompact(t.name());
        waitForCompaction(t.name());
        admin.flush(t.name());
        admin.disableTable(t.name());
        admin.deleteTable(t.name());
        assertFalse(admin.tableExists(t.name()));
      }

      admin.cloneSnapshot(snap, clone);
      assertTrue(admin.isTableEnabled(clone), "a clone is enabled");
      assertEquals(List.of("", "m"), starts(clone), "the clone has the snapshot's regions");
      assertEquals(atSnapshot, dump(clone), "the clone holds every cell of the snapshot");

      admin.deleteSnapshot(snap);
      assertTrue(findSnapshot(snap) == null);
      assertEquals(atSnapshot, dump(clone), "the clone reads every cell without its snapshot");

      // Its own compaction rewrites its files; nothing is lost.
      admin.flush(clone);
      admin.majorCompact(clone);
      waitForCompaction(clone);
      assertEquals(atSnapshot, dump(clone), "and after its own major compaction");
    } finally {
      dropIfExists(clone);
      deleteSnapshotIfExists(snap);
    }
  }

  @Test
  void aSkipFlushSnapshotHoldsOnlyWhatWasFlushed() throws Exception {
    String snap = TempTable.uniqueName("snap_skip").getNameAsString();
    TableName clone = TempTable.uniqueName("snap_skip_clone");
    try (TempTable t = TempTable.createSplit(connection, admin, "snap_skip",
        new byte[][] {b("m")}, "f")) {
      List<String> flushed = new ArrayList<>();
      List<Put> puts = new ArrayList<>();
      for (String p : new String[] {"a", "p"}) {
        for (int i = 0; i < 20; i++) {
          puts.add(new Put(b(p + "flushed" + i)).addColumn(b("f"), b("q"), b("old" + i)));
          flushed.add(p + "flushed" + i);
        }
      }
      t.table().put(puts);
      admin.flush(t.name());
      // Not flushed: new rows, and newer values of flushed rows.
      puts.clear();
      for (String p : new String[] {"b", "q"}) {
        for (int i = 0; i < 20; i++) {
          puts.add(new Put(b(p + "memory" + i)).addColumn(b("f"), b("q"), b("m" + i)));
        }
      }
      for (int i = 0; i < 20; i += 2) {
        puts.add(new Put(b("aflushed" + i)).addColumn(b("f"), b("q"), b("newer" + i)));
      }
      t.table().put(puts);
      List<String> source = dump(t.name());

      admin.snapshot(snap, t.name(), SnapshotType.SKIPFLUSH);
      SnapshotDescription listed = findSnapshot(snap);
      assertTrue(listed != null, "listed");
      assertEquals(SnapshotType.SKIPFLUSH, listed.getType(), "listed with the type it was taken with");

      admin.cloneSnapshot(snap, clone);
      flushed.sort(String::compareTo);
      // HBase 2.6: a SKIPFLUSH snapshot names the store files only; what is in memory is not in it.
      try (Table table = connection.getTable(clone)) {
        assertEquals(flushed, rows(table, new Scan()),
            "the clone holds the flushed rows and none only in memory");
        for (int i = 0; i < 20; i++) {
          assertEquals("old" + i,
              s(table.get(new Get(b("aflushed" + i)))
                  .getValue(b("f"), b("q"))), "the flushed value of aflushed" + i);
        }
      }
      assertEquals(source, dump(t.name()), "the source keeps everything");
    } finally {
      dropIfExists(clone);
      deleteSnapshotIfExists(snap);
    }
  }

  /** Every cell of a table as "row/family:qualifier/timestamp=value", in scan order. */
  private static List<String> dump(TableName name) throws IOException {
    List<String> out = new ArrayList<>();
    try (Table table = connection.getTable(name); ResultScanner scanner = table.getScanner(new Scan())) {
      for (Result r : scanner) {
        for (Cell c : r.rawCells()) {
          out.add(s(CellUtil.cloneRow(c)) + "/" + s(CellUtil.cloneFamily(c)) + ":"
              + s(CellUtil.cloneQualifier(c)) + "/" + c.getTimestamp() + "=" + s(CellUtil.cloneValue(c)));
        }
      }
    }
    return out;
  }

  /** Start keys of the table's live regions, in order. */
  private static List<String> starts(TableName name) throws Exception {
    List<String> out = new ArrayList<>();
    for (RegionInfo r : SplitTest.liveRegions(name)) {
      out.add(s(r.getStartKey()));
    }
    return out;
  }

  private static void waitForStarts(TableName name, List<String> want) throws Exception {
    long deadline = System.currentTimeMillis() + 120_000;
    while (!starts(name).equals(want)) {
      assertTrue(System.currentTimeMillis() < deadline, "regions of " + name + ": " + starts(name));
      Thread.sleep(200);
    }
  }

  private static SnapshotDescription findSnapshot(String name) throws IOException {
    for (SnapshotDescription d : admin.listSnapshots()) {
      if (d.getName().equals(name)) {
        return d;
      }
    }
    return null;
  }

  /** HBase's majorCompact only queues the compaction: wait until no region compacts. */
  private static void waitForCompaction(TableName name) throws Exception {
    Thread.sleep(1_000);
    long deadline = System.currentTimeMillis() + 120_000;
    while (admin.getCompactionState(name) != CompactionState.NONE) {
      assertTrue(System.currentTimeMillis() < deadline, "the compaction of " + name + " did not end");
      Thread.sleep(200);
    }
  }

  private static void waitFor(AtomicInteger count, int n, Future<?> writing) throws Exception {
    long deadline = System.currentTimeMillis() + 120_000;
    while (count.get() < n && !writing.isDone()) {
      assertTrue(System.currentTimeMillis() < deadline, "only " + count.get() + " writes");
      Thread.sleep(10);
    }
  }

  /** The exception's chain has a class named `simpleName` and mentions `what` somewhere. */
  private static void assertChain(Throwable e, String simpleName, String what) {
    String chain = describe(e);
    assertTrue(chain.contains("." + simpleName + ":") || chain.contains("." + simpleName + " "),
        "expected " + simpleName + " in: " + chain);
    assertTrue(chain.contains(what), "expected '" + what + "' in: " + chain);
  }

  private static String describe(Throwable e) {
    StringBuilder out = new StringBuilder();
    for (Throwable c = e; c != null; c = c.getCause()) {
      out.append(c.getClass().getName()).append(": ").append(c.getMessage()).append(" | ");
    }
    return out.toString();
  }

  private static void dropIfExists(TableName name) {
    try {
      if (admin.tableExists(name)) {
        if (admin.isTableEnabled(name)) {
          admin.disableTable(name);
        }
        admin.deleteTable(name);
      }
    } catch (IOException e) {
      System.err.println("could not drop " + name + ": " + e);
    }
  }

  private static void deleteSnapshotIfExists(String name) {
    try {
      if (findSnapshot(name) != null) {
        admin.deleteSnapshot(name);
      }
    } catch (IOException e) {
      System.err.println("could not delete snapshot " + name + ": " + e);
    }
  }
}
