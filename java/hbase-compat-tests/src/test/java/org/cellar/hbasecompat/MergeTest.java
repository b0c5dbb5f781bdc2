package org.cellar.hbasecompat;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.hadoop.hbase.HConstants;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.RegionInfo;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.junit.jupiter.api.Test;

/**
 * Admin.mergeRegionsAsync (the shell's merge_region): adjacent regions merge while a client keeps
 * writing, named by encoded name and by full region name; no row is lost, repeated or out of
 * order; regions that do not touch are refused and nothing changes.
 */
class MergeTest extends CompatTest {
  private static final byte[][] SPLITS = {b("g"), b("n"), b("t")};
  private static final int MAX_ROWS = 20_000;
  private static final int ROWS_BEFORE_MERGE = 500;
  private static final int ROWS_AFTER_MERGE = 500;

  /** Row keys spread over every region: a letter, then the counter. */
  static String key(int i) {
    return String.format("%c%06d", (char) ('a' + i % 26), i);
  }

  @Test
  void adjacentRegionsMergeWhileAClientWritesAndEveryRowSurvives() throws Exception {
    try (TempTable t = TempTable.createSplit(connection, admin, "merge_live", SPLITS, "f")) {
      AtomicInteger written = new AtomicInteger();
      AtomicBoolean stop = new AtomicBoolean();
      List<Throwable> errors = new CopyOnWriteArrayList<>();
      ExecutorService writer = Executors.newSingleThreadExecutor();
      Future<?> writing = writer.submit(() -> {
        try (Table table = connection.getTable(t.name())) {
          int i = 0;
          while (i < MAX_ROWS && !stop.get()) {
            table.put(new Put(b(key(i))).addColumn(b("f"), b("v"), b("v" + i)));
            written.set(++i);
          }
        } catch (Throwable e) {
          errors.add(e);
        }
        return null;
      });
      try {
        waitFor(written, ROWS_BEFORE_MERGE, writing);
        List<RegionInfo> live = SplitTest.liveRegions(t.name());
        assertEquals(4, live.size(), "the table starts with four regions");
        // One pair by encoded name, the other by full region name.
        admin.mergeRegionsAsync(new byte[][] {
            live.get(0).getEncodedNameAsBytes(), live.get(1).getEncodedNameAsBytes()}, false)
            .get(120, TimeUnit.SECONDS);
        admin.mergeRegionsAsync(new byte[][] {
            live.get(2).getRegionName(), live.get(3).getRegionName()}, false)
            .get(120, TimeUnit.SECONDS);
        int atMerge = written.get();
        waitFor(written, atMerge + ROWS_AFTER_MERGE, writing);
      } finally {
        stop.set(true);
        writing.get(120, TimeUnit.SECONDS);
        writer.shutdownNow();
      }
      assertEquals(List.of(), errors, "no write failed during the merges");

      List<RegionInfo> live = waitForRegions(t, 2);
      assertArrayEquals(HConstants.EMPTY_START_ROW, live.get(0).getStartKey());
      assertArrayEquals(b("n"), live.get(0).getEndKey());
      assertArrayEquals(b("n"), live.get(1).getStartKey());
      assertArrayEquals(HConstants.EMPTY_END_ROW, live.get(1).getEndKey());

      int count = written.get();
      List<String> want = new ArrayList<>();
      List<Get> gets = new ArrayList<>();
      for (int i = 0; i < count; i++) {
        want.add(key(i));
        gets.add(new Get(b(key(i))));
      }
      Result[] got = t.table().get(gets);
      for (int i = 0; i < count; i++) {
        assertEquals("v" + i, s(got[i].getValue(b("f"), b("v"))), "row " + key(i));
      }
      want.sort(String::compareTo);
      assertEquals(want, rows(t.table(), new Scan()), "a scan returns each row once, in order");
    }
  }

  @Test
  void regionsThatDoNotTouchAreRefused() throws Exception {
    try (TempTable t = TempTable.createSplit(connection, admin, "merge_gap", SPLITS, "f")) {
      t.table().put(new Put(b("h1")).addColumn(b("f"), b("v"), b("x")));
      List<RegionInfo> live = SplitTest.liveRegions(t.name());
      assertEquals(4, live.size());
      try {
        admin.mergeRegionsAsync(new byte[][] {
            live.get(0).getEncodedNameAsBytes(), live.get(2).getEncodedNameAsBytes()}, false)
            .get(120, TimeUnit.SECONDS);
        fail("a merge of regions with a region between them succeeded");
      } catch (ExecutionException | java.io.IOException e) {
        String chain = describe(e);
        assertTrue(chain.contains("MergeRegionException") && chain.contains("adjacent"), chain);
      }
      assertEquals(4, SplitTest.liveRegions(t.name()).size(), "nothing changed");
      assertEquals(List.of("h1"), rows(t.table(), new Scan()));
    }
  }

  private static void waitFor(AtomicInteger written, int rows, Future<?> writing) throws Exception {
    long deadline = System.currentTimeMillis() + 120_000;
    while (written.get() < rows && !writing.isDone()) {
      assertTrue(System.currentTimeMillis() < deadline, "only " + written.get() + " rows written");
      Thread.sleep(20);
    }
  }

  /** The table's regions once there are `n` (a merge's parents may linger a moment). */
  private static List<RegionInfo> waitForRegions(TempTable t, int n) throws Exception {
    long deadline = System.currentTimeMillis() + 60_000;
    List<RegionInfo> live = SplitTest.liveRegions(t.name());
    while (live.size() != n && System.currentTimeMillis() < deadline) {
      Thread.sleep(200);
      live = SplitTest.liveRegions(t.name());
    }
    assertNotNull(live);
    assertEquals(n, live.size(), "regions: " + live);
    return live;
  }

  private static String describe(Throwable e) {
    StringBuilder out = new StringBuilder();
    for (Throwable c = e; c != null; c = c.getCause()) {
      out.append(c.getClass().getName()).append(": ").append(c.getMessage()).append(" | ");
    }
    return out.toString();
  }
}
