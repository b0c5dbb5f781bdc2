package org.cellar.hbasecompat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.hbase.CompareOperator;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.ResultScanner;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.filter.RegexStringComparator;
import org.apache.hadoop.hbase.filter.RowFilter;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Scans over one shared table, pre-split at r030 and r060, rows r000..r099, each with a:x, a:y
 * and b:z; row r050 also has five columns c:c0..c:c4 (for batching). Read-only tests.
 */
class ScanTest extends CompatTest {
  private static TempTable shared;
  private static Table table;
  private static final List<String> ALL = keys("r", 0, 100, 3);

  @BeforeAll
  static void load() throws Exception {
    shared = TempTable.createSplit(connection, admin, "scan", new byte[][] {b("r030"), b("r060")}, "a", "b", "c");
    table = shared.table();
    List<Put> puts = new ArrayList<>();
    for (String row : ALL) {
      puts.add(new Put(b(row)).addColumn(b("a"), b("x"), b("x-" + row)).addColumn(b("a"), b("y"), b("y-" + row))
          .addColumn(b("b"), b("z"), b("z-" + row)));
    }
    Put wide = new Put(b("r050"));
    for (int i = 0; i < 5; i++) {
      wide.addColumn(b("c"), b("c" + i), b("c" + i));
    }
    puts.add(wide);
    table.put(puts);
  }

  @AfterAll
  static void drop() throws Exception {
    if (shared != null) {
      shared.close();
    }
  }

  @Test
  void fullScanReturnsEveryRowInOrderAcrossRegions() throws Exception {
    assertEquals(ALL, rows(table, new Scan()));
  }

  @Test
  void smallCachingPagesThroughAllRegions() throws Exception {
    assertEquals(ALL, rows(table, new Scan().setCaching(2)));
    assertEquals(ALL, rows(table, new Scan().setCaching(1).addFamily(b("b"))));
  }

  @Test
  void startRowIsInclusiveStopRowExclusiveUnlessAskedOtherwise() throws Exception {
    assertEquals(keys("r", 25, 35, 3), rows(table, new Scan().withStartRow(b("r025")).withStopRow(b("r035"))));
    assertEquals(keys("r", 25, 36, 3),
        rows(table, new Scan().withStartRow(b("r025")).withStopRow(b("r035"), true)));
    assertEquals(keys("r", 26, 35, 3),
        rows(table, new Scan().withStartRow(b("r025"), false).withStopRow(b("r035"))));
    assertEquals(keys("r", 95, 100, 3), rows(table, new Scan().withStartRow(b("r095"))));
    assertEquals(keys("r", 0, 3, 3), rows(table, new Scan().withStopRow(b("r003"))));
    assertEquals(List.of(), rows(table, new Scan().withStartRow(b("s"))));
    assertEquals(List.of(), rows(table, new Scan().withStartRow(b("r040")).withStopRow(b("r040"))));
  }

  @Test
  void rowPrefixFilterSelectsThePrefixOnly() throws Exception {
    assertEquals(keys("r", 50, 60, 3), rows(table, new Scan().setRowPrefixFilter(b("r05"))));
    assertEquals(keys("r", 30, 31, 3), rows(table, new Scan().setRowPrefixFilter(b("r030"))));
    assertEquals(List.of(), rows(table, new Scan().setRowPrefixFilter(b("q"))));
  }

  @Test
  void limitStopsAfterThatManyRows() throws Exception {
    assertEquals(keys("r", 0, 7, 3), rows(table, new Scan().setLimit(7)));
    assertEquals(keys("r", 28, 33, 3), rows(table, new Scan().withStartRow(b("r028")).setLimit(5).setCaching(2)),
        "limit across a region boundary");
  }

  @Test
  void batchSplitsWideRowsIntoSeveralResults() throws Exception {
    List<Result> parts = results(table, new Scan().withStartRow(b("r050")).withStopRow(b("r050"), true)
        .addFamily(b("c")).setBatch(2));
    assertEquals(3, parts.size(), "5 columns in batches of 2");
    assertEquals(List.of("c:c0=c0", "c:c1=c1"), cells(parts.get(0)));
    assertEquals(List.of("c:c2=c2", "c:c3=c3"), cells(parts.get(1)));
    assertEquals(List.of("c:c4=c4"), cells(parts.get(2)));
    for (Result r : parts) {
      assertEquals("r050", s(r.getRow()));
    }
  }

  @Test
  void reversedScanWalksBackwards() throws Exception {
    List<String> backwards = new ArrayList<>(ALL);
    Collections.reverse(backwards);
    assertEquals(backwards, rows(table, new Scan().setReversed(true)));
    List<String> expected = new ArrayList<>(keys("r", 41, 51, 3));
    Collections.reverse(expected);
    assertEquals(expected,
        rows(table, new Scan().setReversed(true).withStartRow(b("r050")).withStopRow(b("r040"))),
        "reversed: start inclusive, stop exclusive, start > stop");
    List<String> tail = new ArrayList<>(keys("r", 57, 64, 3));
    Collections.reverse(tail);
    assertEquals(tail, rows(table, new Scan().setReversed(true).withStartRow(b("r063")).setLimit(7).setCaching(2)),
        "reversed across the r060 boundary");
  }

  @Test
  void familiesAndColumnsRestrictTheCells() throws Exception {
    Scan fam = new Scan().addFamily(b("b")).withStartRow(b("r010")).withStopRow(b("r012"));
    List<Result> byFamily = results(table, fam);
    assertEquals(2, byFamily.size());
    assertEquals(List.of("b:z=z-r010"), cells(byFamily.get(0)));

    Scan col = new Scan().addColumn(b("a"), b("y")).addColumn(b("b"), b("z"))
        .withStartRow(b("r010")).withStopRow(b("r011"));
    assertEquals(List.of("a:y=y-r010", "b:z=z-r010"), cells(results(table, col).get(0)));

    // Rows with nothing in the asked family are not returned at all.
    assertEquals(List.of("r050"), rows(table, new Scan().addFamily(b("c"))));
  }

  @Test
  void scannerNextWithCountAndEmptyTable() throws Exception {
    try (ResultScanner scanner = table.getScanner(new Scan().setCaching(3))) {
      Result[] first = scanner.next(4);
      assertEquals(4, first.length);
      assertEquals("r003", s(first[3].getRow()));
      assertEquals("r004", s(scanner.next().getRow()));
    }
    try (TempTable empty = TempTable.create(connection, admin, "scan_empty", "f")) {
      try (ResultScanner scanner = empty.table().getScanner(new Scan())) {
        assertTrue(scanner.next() == null);
      }
    }
  }

  /** A scan's metrics, server-side counts summed over its calls, once every row is read. */
  private static Map<String, Long> metrics(Table in, Scan scan) throws Exception {
    scan.setScanMetricsEnabled(true);
    try (ResultScanner scanner = in.getScanner(scan)) {
      int n = 0;
      for (Result r : scanner) {
        n++;
      }
      Map<String, Long> m = scanner.getScanMetrics().getMetricsMap();
      System.out.println("scan metrics (" + n + " rows): " + m);
      return m;
    }
  }

  @Test
  void scanMetricsCountTheRowsScannedAndFilteredOnTheServer() throws Exception {
    Map<String, Long> all = metrics(table, new Scan());
    assertEquals(100L, all.get("ROWS_SCANNED"));
    assertEquals(0L, all.get("ROWS_FILTERED"));
    // One row in ten passes: the other 90 are scanned and filtered.
    Map<String, Long> tenth = metrics(table, new Scan()
        .setFilter(new RowFilter(CompareOperator.EQUAL, new RegexStringComparator("r0.5"))));
    assertEquals(100L, tenth.get("ROWS_SCANNED"));
    assertEquals(90L, tenth.get("ROWS_FILTERED"));
    // A deleted row (not yet compacted away) is read and filtered; two rows a call, the
    // counts summed over the calls.
    try (TempTable t = TempTable.create(connection, admin, "scan_metrics", "f")) {
      for (int i = 0; i < 6; i++) {
        t.table().put(new Put(b("d" + i)).addColumn(b("f"), b("q"), b("v")));
      }
      t.table().delete(new org.apache.hadoop.hbase.client.Delete(b("d5")));
      Map<String, Long> m = metrics(t.table(), new Scan().setCaching(2));
      assertEquals(6L, m.get("ROWS_SCANNED"));
      assertEquals(1L, m.get("ROWS_FILTERED"));
    }
  }
}
