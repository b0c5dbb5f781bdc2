package org.cellar.hbasecompat;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.hbase.CompareOperator;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.ResultScanner;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.filter.BinaryComparator;
import org.apache.hadoop.hbase.filter.BinaryPrefixComparator;
import org.apache.hadoop.hbase.filter.ColumnCountGetFilter;
import org.apache.hadoop.hbase.filter.ColumnPaginationFilter;
import org.apache.hadoop.hbase.filter.ColumnPrefixFilter;
import org.apache.hadoop.hbase.filter.ColumnRangeFilter;
import org.apache.hadoop.hbase.filter.FamilyFilter;
import org.apache.hadoop.hbase.filter.Filter;
import org.apache.hadoop.hbase.filter.FilterList;
import org.apache.hadoop.hbase.filter.FirstKeyOnlyFilter;
import org.apache.hadoop.hbase.filter.FuzzyRowFilter;
import org.apache.hadoop.hbase.filter.KeyOnlyFilter;
import org.apache.hadoop.hbase.filter.MultiRowRangeFilter;
import org.apache.hadoop.hbase.filter.MultiRowRangeFilter.RowRange;
import org.apache.hadoop.hbase.filter.PageFilter;
import org.apache.hadoop.hbase.filter.PrefixFilter;
import org.apache.hadoop.hbase.filter.QualifierFilter;
import org.apache.hadoop.hbase.filter.RegexStringComparator;
import org.apache.hadoop.hbase.filter.RowFilter;
import org.apache.hadoop.hbase.filter.SingleColumnValueFilter;
import org.apache.hadoop.hbase.filter.SkipFilter;
import org.apache.hadoop.hbase.filter.SubstringComparator;
import org.apache.hadoop.hbase.filter.ValueFilter;
import org.apache.hadoop.hbase.filter.WhileMatchFilter;
import org.apache.hadoop.hbase.util.Bytes;
import org.apache.hadoop.hbase.util.Pair;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Server-side filters over one shared single-region table: rows row00..row19 with
 * f:col_a="a{i}", f:col_b="b{i}", f:col_c="c{i}", f:name="name{i}", f:score="%03d" of i, and
 * g:extra="g{i}"; plus row "zz" with f:name="no-score" only. Read-only tests.
 */
class FilterTest extends CompatTest {
  private static TempTable shared;
  private static Table table;

  @BeforeAll
  static void load() throws Exception {
    shared = TempTable.create(connection, admin, "filter", "f", "g");
    table = shared.table();
    List<Put> puts = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      puts.add(new Put(b(String.format("row%02d", i)))
          .addColumn(b("f"), b("col_a"), b("a" + i)).addColumn(b("f"), b("col_b"), b("b" + i))
          .addColumn(b("f"), b("col_c"), b("c" + i)).addColumn(b("f"), b("name"), b("name" + i))
          .addColumn(b("f"), b("score"), b(String.format("%03d", i)))
          .addColumn(b("g"), b("extra"), b("g" + i)));
    }
    puts.add(new Put(b("zz")).addColumn(b("f"), b("name"), b("no-score")));
    table.put(puts);
  }

  @AfterAll
  static void drop() throws Exception {
    if (shared != null) {
      shared.close();
    }
  }

  private static List<String> rowsWith(Filter filter) throws Exception {
    return rows(table, new Scan().setFilter(filter));
  }

  private static List<String> rowRange(int from, int to) {
    return keys("row", from, to, 2);
  }

  @Test
  void prefixFilter() throws Exception {
    assertEquals(rowRange(10, 20), rowsWith(new PrefixFilter(b("row1"))));
    assertEquals(List.of("zz"), rowsWith(new PrefixFilter(b("z"))));
  }

  @Test
  void columnPrefixFilterKeepsMatchingQualifiersOnly() throws Exception {
    List<Result> rs = results(table, new Scan().setFilter(new ColumnPrefixFilter(b("col_"))));
    assertEquals(20, rs.size(), "zz has no col_ column and is dropped");
    assertEquals(List.of("f:col_a=a7", "f:col_b=b7", "f:col_c=c7"), cells(rs.get(7)));
  }

  @Test
  void singleColumnValueFilterAndMissingColumns() throws Exception {
    SingleColumnValueFilter atLeast15 =
        new SingleColumnValueFilter(b("f"), b("score"), CompareOperator.GREATER_OR_EQUAL, b("015"));
    List<String> expected = new ArrayList<>(rowRange(15, 20));
    expected.add("zz");
    assertEquals(expected, rowsWith(atLeast15), "a row without the column passes by default");

    SingleColumnValueFilter strict =
        new SingleColumnValueFilter(b("f"), b("score"), CompareOperator.GREATER_OR_EQUAL, b("015"));
    strict.setFilterIfMissing(true);
    assertEquals(rowRange(15, 20), rowsWith(strict));

    List<Result> whole = results(table, new Scan().setFilter(strict));
    assertEquals(6, whole.get(0).size(), "the filter passes whole rows, every column");

    SingleColumnValueFilter equal =
        new SingleColumnValueFilter(b("f"), b("name"), CompareOperator.EQUAL, b("no-score"));
    equal.setFilterIfMissing(true);
    assertEquals(List.of("zz"), rowsWith(equal));
  }

  @Test
  void rowFilterWithComparators() throws Exception {
    assertEquals(List.of("row07"), rowsWith(new RowFilter(CompareOperator.EQUAL, new BinaryComparator(b("row07")))));
    assertEquals(rowRange(0, 3), rowsWith(new RowFilter(CompareOperator.LESS, new BinaryComparator(b("row03")))));
    assertEquals(rowRange(10, 20),
        rowsWith(new RowFilter(CompareOperator.EQUAL, new BinaryPrefixComparator(b("row1")))));
    // A regex matches anywhere in the key (find, not a full match).
    assertEquals(List.of("row05", "row15"),
        rowsWith(new RowFilter(CompareOperator.EQUAL, new RegexStringComparator("5"))));
    assertEquals(List.of("row02", "row03", "row04"),
        rowsWith(new RowFilter(CompareOperator.EQUAL, new RegexStringComparator("^row0[2-4]$"))));
    List<String> notRow1x = new ArrayList<>(rowRange(0, 10));
    notRow1x.add("zz");
    assertEquals(notRow1x,
        rowsWith(new RowFilter(CompareOperator.NOT_EQUAL, new SubstringComparator("ow1"))));
  }

  @Test
  void valueFilterWithComparators() throws Exception {
    // SubstringComparator ignores case.
    List<Result> rs = results(table, new Scan().setFilter(
        new ValueFilter(CompareOperator.EQUAL, new SubstringComparator("AME1"))));
    List<String> got = new ArrayList<>();
    for (Result r : rs) {
      got.addAll(cells(r));
    }
    List<String> expected = new ArrayList<>(List.of("f:name=name1"));
    for (int i = 10; i < 20; i++) {
      expected.add("f:name=name" + i);
    }
    assertEquals(expected, got);

    List<Result> exact = results(table, new Scan().setFilter(
        new ValueFilter(CompareOperator.EQUAL, new BinaryComparator(b("b3")))));
    assertEquals(1, exact.size());
    assertEquals("row03", s(exact.get(0).getRow()));
    assertEquals(List.of("f:col_b=b3"), cells(exact.get(0)));

    List<Result> prefixed = results(table, new Scan().setFilter(
        new ValueFilter(CompareOperator.EQUAL, new BinaryPrefixComparator(b("no-")))));
    assertEquals(1, prefixed.size());
    assertEquals(List.of("f:name=no-score"), cells(prefixed.get(0)));
  }

  @Test
  void qualifierAndFamilyFilters() throws Exception {
    Result r = table.get(new Get(b("row04")).setFilter(
        new QualifierFilter(CompareOperator.EQUAL, new BinaryComparator(b("col_b")))));
    assertEquals(List.of("f:col_b=b4"), cells(r));
    r = table.get(new Get(b("row04")).setFilter(
        new QualifierFilter(CompareOperator.LESS, new BinaryComparator(b("col_b")))));
    assertEquals(List.of("f:col_a=a4"), cells(r));
    r = table.get(new Get(b("row04")).setFilter(
        new QualifierFilter(CompareOperator.EQUAL, new RegexStringComparator("^(name|extra)$"))));
    assertEquals(List.of("f:name=name4", "g:extra=g4"), cells(r));

    List<Result> onlyG = results(table, new Scan().setFilter(
        new FamilyFilter(CompareOperator.EQUAL, new BinaryComparator(b("g")))));
    assertEquals(20, onlyG.size());
    assertEquals(List.of("g:extra=g9"), cells(onlyG.get(9)));
    Result notG = table.get(new Get(b("row01")).setFilter(
        new FamilyFilter(CompareOperator.NOT_EQUAL, new BinaryComparator(b("g")))));
    assertEquals(5, notG.size());
  }

  @Test
  void filterListAllAndOne() throws Exception {
    FilterList all = new FilterList(FilterList.Operator.MUST_PASS_ALL,
        new PrefixFilter(b("row1")),
        new SingleColumnValueFilter(b("f"), b("score"), CompareOperator.LESS, b("013")));
    assertEquals(rowRange(10, 13), rowsWith(all));

    FilterList one = new FilterList(FilterList.Operator.MUST_PASS_ONE,
        new RowFilter(CompareOperator.EQUAL, new BinaryComparator(b("row03"))),
        new RowFilter(CompareOperator.EQUAL, new BinaryComparator(b("row17"))));
    assertEquals(List.of("row03", "row17"), rowsWith(one));

    FilterList nested = new FilterList(FilterList.Operator.MUST_PASS_ALL,
        one, new QualifierFilter(CompareOperator.EQUAL, new BinaryComparator(b("name"))));
    List<Result> rs = results(table, new Scan().setFilter(nested));
    assertEquals(2, rs.size());
    assertEquals(List.of("f:name=name3"), cells(rs.get(0)));
    assertEquals(List.of("f:name=name17"), cells(rs.get(1)));
  }

  @Test
  void pageFilterLimitsRowsInARegion() throws Exception {
    assertEquals(rowRange(0, 5), rowsWith(new PageFilter(5)));
    assertEquals(rowRange(8, 11), rows(table, new Scan().withStartRow(b("row08")).setFilter(new PageFilter(3))));
  }

  @Test
  void keyOnlyFilterStripsValues() throws Exception {
    Result r = table.get(new Get(b("row12")).setFilter(new KeyOnlyFilter()));
    assertEquals(6, r.size());
    for (var c : r.rawCells()) {
      assertEquals(0, c.getValueLength());
    }
    assertEquals(List.of("f:col_a=", "f:col_b=", "f:col_c=", "f:name=", "f:score=", "g:extra="), cells(r));

    Result lengths = table.get(new Get(b("row12")).addColumn(b("f"), b("name")).setFilter(new KeyOnlyFilter(true)));
    assertArrayEquals(Bytes.toBytes("name12".length()), lengths.getValue(b("f"), b("name")),
        "lenAsVal: the value becomes the 4-byte original length");
  }

  @Test
  void firstKeyOnlyFilterReturnsOneCellPerRow() throws Exception {
    List<Result> rs = results(table, new Scan().setFilter(new FirstKeyOnlyFilter()));
    assertEquals(21, rs.size());
    assertEquals(List.of("f:col_a=a0"), cells(rs.get(0)));
    assertEquals(List.of("f:name=no-score"), cells(rs.get(20)));
  }

  @Test
  void columnRangeFilter() throws Exception {
    Result r = table.get(new Get(b("row02")).setFilter(new ColumnRangeFilter(b("col_a"), true, b("col_c"), false)));
    assertEquals(List.of("f:col_a=a2", "f:col_b=b2"), cells(r));
    r = table.get(new Get(b("row02")).setFilter(new ColumnRangeFilter(b("col_a"), false, b("col_c"), true)));
    assertEquals(List.of("f:col_b=b2", "f:col_c=c2"), cells(r));
    r = table.get(new Get(b("row02")).setFilter(new ColumnRangeFilter(b("n"), true, null, false)));
    assertEquals(List.of("f:name=name2", "f:score=002"), cells(r), "open upper bound, family g has none");
  }

  @Test
  void multiRowRangeFilter() throws Exception {
    List<RowRange> ranges = new ArrayList<>();
    ranges.add(new RowRange(b("row10"), true, b("row12"), true));
    ranges.add(new RowRange(b("row02"), true, b("row04"), false));
    ranges.add(new RowRange(b("row18"), false, b("row99"), false));
    List<String> expected = List.of("row02", "row03", "row10", "row11", "row12", "row19");
    assertEquals(expected, rowsWith(new MultiRowRangeFilter(ranges)));
  }

  @Test
  void columnPaginationFilterPagesThroughARowsColumns() throws Exception {
    // row02's columns in order: f:col_a, f:col_b, f:col_c, f:name, f:score, g:extra.
    Result r = table.get(new Get(b("row02")).setFilter(new ColumnPaginationFilter(2, 1)));
    assertEquals(List.of("f:col_b=b2", "f:col_c=c2"), cells(r));
    r = table.get(new Get(b("row02")).setFilter(new ColumnPaginationFilter(2, 4)));
    assertEquals(List.of("f:score=002", "g:extra=g2"), cells(r));
    r = table.get(new Get(b("row02")).setFilter(new ColumnPaginationFilter(2, b("name"))));
    assertEquals(List.of("f:name=name2", "f:score=002"), cells(r), "from a qualifier on");
    // On a scan, each row gets its own page.
    List<String> firstColumns = new ArrayList<>();
    try (ResultScanner scanner = table.getScanner(
        new Scan().withStartRow(b("row05")).withStopRow(b("row08")).setFilter(new ColumnPaginationFilter(1, 0)))) {
      for (Result each : scanner) {
        firstColumns.addAll(cells(each));
      }
    }
    assertEquals(List.of("f:col_a=a5", "f:col_a=a6", "f:col_a=a7"), firstColumns);
  }

  @Test
  void columnCountGetFilterKeepsARowsFirstColumnsAndEndsAScanAtTheFirstLongerRow() throws Exception {
    Result r = table.get(new Get(b("row02")).setFilter(new ColumnCountGetFilter(2)));
    assertEquals(List.of("f:col_a=a2", "f:col_b=b2"), cells(r));
    List<String> got = new ArrayList<>();
    for (Result each : results(table,
        new Scan().withStartRow(b("row05")).withStopRow(b("row08")).setFilter(new ColumnCountGetFilter(2)))) {
      got.add(s(each.getRow()) + ":" + cells(each));
    }
    assertEquals(List.of("row05:[f:col_a=a5, f:col_b=b5]"), got);
    // Rows of exactly six columns: each passes whole, and the count starts again per row.
    assertEquals(rowRange(5, 8), rows(table,
        new Scan().withStartRow(b("row05")).withStopRow(b("row08")).setFilter(new ColumnCountGetFilter(6))));
  }

  @Test
  void skipFilterDropsRowsWithAnyFilteredCell() throws Exception {
    // Rows where no cell's value is "b7" or "name9": all but row07 and row09.
    Filter notB7 = new ValueFilter(CompareOperator.NOT_EQUAL, new BinaryComparator(b("b7")));
    Filter notName9 = new ValueFilter(CompareOperator.NOT_EQUAL, new BinaryComparator(b("name9")));
    List<String> expected = new ArrayList<>(rowRange(0, 20));
    expected.remove("row07");
    expected.remove("row09");
    expected.add("zz");
    assertEquals(expected, rowsWith(new SkipFilter(
        new FilterList(FilterList.Operator.MUST_PASS_ALL, notB7, notName9))));
  }

  @Test
  void whileMatchFilterEndsTheScanAtTheFirstRowItsFilterDrops() throws Exception {
    Filter belowRow05 = new RowFilter(CompareOperator.LESS, new BinaryComparator(b("row05")));
    assertEquals(rowRange(0, 5), rowsWith(new WhileMatchFilter(belowRow05)));
    // Unlike the bare filter, nothing after that row comes back, even rows it would pass.
    Filter notRow05 = new RowFilter(CompareOperator.NOT_EQUAL, new BinaryComparator(b("row05")));
    assertEquals(rowRange(0, 5), rowsWith(new WhileMatchFilter(notRow05)));
  }

  @Test
  void fuzzyRowFilterMatchesFixedBytesAndAnyInBetween() throws Exception {
    // "row?5": any fourth byte. Then two keys: "row?5" or "row1?". (The filter rewrites the
    // masks it is given, so each filter gets its own.)
    assertEquals(List.of("row05", "row15"), rowsWith(new FuzzyRowFilter(
        List.of(new Pair<>(b("row_5"), new byte[] {0, 0, 0, 1, 0})))));
    List<String> expected = new ArrayList<>(rowRange(10, 20));
    expected.add(0, "row05");
    assertEquals(expected, rowsWith(new FuzzyRowFilter(List.of(
        new Pair<>(b("row_5"), new byte[] {0, 0, 0, 1, 0}),
        new Pair<>(b("row1_"), new byte[] {0, 0, 0, 0, 1})))));
  }
}
