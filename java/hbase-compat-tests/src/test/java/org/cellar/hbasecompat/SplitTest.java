package org.cellar.hbasecompat;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.hadoop.hbase.HConstants;
import org.apache.hadoop.hbase.HRegionLocation;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.BufferedMutator;
import org.apache.hadoop.hbase.client.BufferedMutatorParams;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.RegionInfo;
import org.apache.hadoop.hbase.client.RegionLocator;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.ResultScanner;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.util.Bytes;
import org.junit.jupiter.api.Test;

/**
 * A region splits while clients keep writing, and no row is lost or duplicated. Against Cellar
 * (run with a small split size) the split must happen on its own; with -Dcellar.autosplit=false
 * (a real HBase, whose split size is far larger) the test asks for it with Admin.split.
 */
class SplitTest extends CompatTest {
  private static final int VALUE_BYTES = 1024;
  private static final int MAX_ROWS = 30_000;
  private static final int ROWS_AFTER_SPLIT = 1_000;
  private static final int ROWS_BEFORE_ASKED_SPLIT = 1_500;
  private static final long SPLIT_DEADLINE_MS = 90_000;

  /** Row keys spread over the key space (bit-reversed counter), so both halves keep growing. */
  static String key(int i) {
    return String.format("k%08x", Integer.reverse(i));
  }

  static byte[] value(int i) {
    byte[] v = new byte[VALUE_BYTES];
    byte[] tag = Bytes.toBytes(key(i));
    for (int j = 0; j < v.length; j++) {
      v[j] = tag[j % tag.length];
    }
    return v;
  }

  /** The table's live regions (split parents excluded), sorted by start key. */
  static List<RegionInfo> liveRegions(TableName name) throws Exception {
    List<RegionInfo> out = new ArrayList<>();
    try (RegionLocator locator = connection.getRegionLocator(name)) {
      for (HRegionLocation loc : locator.getAllRegionLocations()) {
        RegionInfo r = loc.getRegion();
        if (!r.isSplitParent() && !r.isOffline()) {
          out.add(r);
        }
      }
    }
    out.sort((x, y) -> Bytes.compareTo(x.getStartKey(), y.getStartKey()));
    return out;
  }

  @Test
  void regionSplitsDuringWritesAndEveryRowSurvives() throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "split_auto", "f")) {
      AtomicInteger written = new AtomicInteger();
      AtomicBoolean stop = new AtomicBoolean();
      List<Throwable> writeErrors = new CopyOnWriteArrayList<>();
      ExecutorService writer = Executors.newSingleThreadExecutor();
      Future<?> writing = writer.submit(() -> {
        BufferedMutatorParams params = new BufferedMutatorParams(t.name())
            .writeBufferSize(64 * 1024)
            .listener((e, m) -> {
              for (int i = 0; i < e.getNumExceptions(); i++) {
                writeErrors.add(e.getCause(i));
              }
            });
        try (BufferedMutator mutator = connection.getBufferedMutator(params)) {
          int sent = 0;
          while (sent < MAX_ROWS && !stop.get()) {
            mutator.mutate(new Put(b(key(sent))).addColumn(b("f"), b("v"), value(sent)));
            sent++;
            if (sent % 100 == 0) {
              mutator.flush();
              written.set(sent);
            }
          }
          mutator.flush();
          written.set(sent);
        }
        return null;
      });

      int regions = 1;
      int writtenAtSplit = -1;
      boolean asked = false;
      long deadline = System.currentTimeMillis() + SPLIT_DEADLINE_MS;
      try {
        while (System.currentTimeMillis() < deadline && !writing.isDone()) {
          if (!Cluster.autoSplit() && !asked && written.get() >= ROWS_BEFORE_ASKED_SPLIT) {
            admin.split(t.name(), b("k80000000"));
            asked = true;
          }
          regions = liveRegions(t.name()).size();
          if (regions >= 2 && writtenAtSplit < 0) {
            writtenAtSplit = written.get();
          }
          if (writtenAtSplit >= 0 && written.get() >= writtenAtSplit + ROWS_AFTER_SPLIT) {
            break;
          }
          Thread.sleep(200);
        }
      } finally {
        stop.set(true);
        writing.get(120, TimeUnit.SECONDS);
        writer.shutdownNow();
      }
      assertEquals(List.of(), writeErrors, "no write failed during the split");
      assertTrue(writtenAtSplit >= 0,
          "the table split into 2+ regions within " + SPLIT_DEADLINE_MS / 1000 + " s while "
              + written.get() + " rows of 1 KiB were written (regions seen: " + regions + ")");
      assertTrue(written.get() >= writtenAtSplit + ROWS_AFTER_SPLIT || written.get() == MAX_ROWS,
          "writes continued after the split");

      // The regions tile the key space: first starts empty, each ends where the next starts.
      List<RegionInfo> live = liveRegions(t.name());
      assertTrue(live.size() >= 2);
      assertArrayEquals(HConstants.EMPTY_START_ROW, live.get(0).getStartKey());
      for (int i = 0; i + 1 < live.size(); i++) {
        assertArrayEquals(live.get(i).getEndKey(), live.get(i + 1).getStartKey(), "regions " + i + "/" + (i + 1));
      }
      assertArrayEquals(HConstants.EMPTY_END_ROW, live.get(live.size() - 1).getEndKey());

      verifyAllRows(t.table(), written.get());
    }
  }

  private static void verifyAllRows(Table table, int count) throws Exception {
    List<Get> gets = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      gets.add(new Get(b(key(i))));
      if (gets.size() == 500 || i == count - 1) {
        Result[] got = table.get(gets);
        for (int j = 0; j < got.length; j++) {
          int index = i - got.length + 1 + j;
          assertArrayEquals(value(index), got[j].getValue(b("f"), b("v")), "row " + key(index));
        }
        gets.clear();
      }
    }

    // A full scan sees each row exactly once, in key order, and nothing else.
    int seen = 0;
    byte[] previous = null;
    try (ResultScanner scanner = table.getScanner(new Scan().setCaching(200))) {
      for (Result r : scanner) {
        if (previous != null) {
          assertTrue(Bytes.compareTo(previous, r.getRow()) < 0,
              "scan order: " + Bytes.toString(previous) + " then " + Bytes.toString(r.getRow()));
        }
        previous = r.getRow();
        int index = Integer.reverse((int) Long.parseLong(Bytes.toString(r.getRow()).substring(1), 16));
        assertTrue(index >= 0 && index < count, "unexpected row " + Bytes.toString(r.getRow()));
        assertArrayEquals(value(index), r.getValue(b("f"), b("v")));
        seen++;
      }
    }
    assertEquals(count, seen, "rows in a full scan (strictly increasing keys, so none twice)");
  }
}
