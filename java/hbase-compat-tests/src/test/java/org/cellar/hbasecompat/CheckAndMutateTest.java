package org.cellar.hbasecompat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.apache.hadoop.hbase.CompareOperator;
import org.apache.hadoop.hbase.client.CheckAndMutate;
import org.apache.hadoop.hbase.client.CheckAndMutateResult;
import org.apache.hadoop.hbase.client.Delete;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.RowMutations;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.filter.FilterList;
import org.apache.hadoop.hbase.filter.SingleColumnValueFilter;
import org.junit.jupiter.api.Test;

/** Conditional and atomic single-row mutations. */
class CheckAndMutateTest extends CompatTest {

  private static String value(Table t, String row, String q) throws Exception {
    return s(t.get(new Get(b(row))).getValue(b("f"), b(q)));
  }

  @Test
  void ifEqualsPutsOnlyWhenTheValueMatches() throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "cam_equals", "f")) {
      Table tbl = t.table();
      tbl.put(new Put(b("r")).addColumn(b("f"), b("state"), b("open")));
      CheckAndMutateResult miss = tbl.checkAndMutate(CheckAndMutate.newBuilder(b("r"))
          .ifEquals(b("f"), b("state"), b("closed"))
          .build(new Put(b("r")).addColumn(b("f"), b("state"), b("reopened"))));
      assertFalse(miss.isSuccess());
      assertEquals("open", value(tbl, "r", "state"));

      CheckAndMutateResult hit = tbl.checkAndMutate(CheckAndMutate.newBuilder(b("r"))
          .ifEquals(b("f"), b("state"), b("open"))
          .build(new Put(b("r")).addColumn(b("f"), b("state"), b("closed"))));
      assertTrue(hit.isSuccess());
      assertEquals("closed", value(tbl, "r", "state"));

      // The older builder API goes through the same call.
      assertTrue(tbl.checkAndMutate(b("r"), b("f")).qualifier(b("state")).ifEquals(b("closed"))
          .thenPut(new Put(b("r")).addColumn(b("f"), b("state"), b("archived"))));
      assertEquals("archived", value(tbl, "r", "state"));
    }
  }

  @Test
  void ifNotExistsPutsOnce() throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "cam_not_exists", "f")) {
      Table tbl = t.table();
      CheckAndMutate claim = CheckAndMutate.newBuilder(b("lock")).ifNotExists(b("f"), b("owner"))
          .build(new Put(b("lock")).addColumn(b("f"), b("owner"), b("first")));
      assertTrue(tbl.checkAndMutate(claim).isSuccess());
      CheckAndMutate again = CheckAndMutate.newBuilder(b("lock")).ifNotExists(b("f"), b("owner"))
          .build(new Put(b("lock")).addColumn(b("f"), b("owner"), b("second")));
      assertFalse(tbl.checkAndMutate(again).isSuccess());
      assertEquals("first", value(tbl, "lock", "owner"));
    }
  }

  @Test
  void compareOperatorsCompareTheGivenValueAgainstTheStoredOne() throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "cam_compare", "f")) {
      Table tbl = t.table();
      tbl.put(new Put(b("r")).addColumn(b("f"), b("v"), b("m")));
      Put mark = new Put(b("r")).addColumn(b("f"), b("hit"), b("yes"));
      // HBase's rule: ifMatches(op, given) passes when `given op stored`.
      assertTrue(tbl.checkAndMutate(CheckAndMutate.newBuilder(b("r"))
          .ifMatches(b("f"), b("v"), CompareOperator.LESS, b("a")).build(mark)).isSuccess(), "a < m");
      assertFalse(tbl.checkAndMutate(CheckAndMutate.newBuilder(b("r"))
          .ifMatches(b("f"), b("v"), CompareOperator.GREATER, b("a")).build(mark)).isSuccess());
      assertTrue(tbl.checkAndMutate(CheckAndMutate.newBuilder(b("r"))
          .ifMatches(b("f"), b("v"), CompareOperator.NOT_EQUAL, b("z")).build(mark)).isSuccess());
      assertTrue(tbl.checkAndMutate(CheckAndMutate.newBuilder(b("r"))
          .ifMatches(b("f"), b("v"), CompareOperator.GREATER_OR_EQUAL, b("m")).build(mark)).isSuccess());
    }
  }

  @Test
  void checkThenDeleteAndRowMutations() throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "cam_delete", "f")) {
      Table tbl = t.table();
      tbl.put(new Put(b("r")).addColumn(b("f"), b("a"), b("1")).addColumn(b("f"), b("b"), b("2")));
      assertFalse(tbl.checkAndMutate(CheckAndMutate.newBuilder(b("r")).ifEquals(b("f"), b("a"), b("9"))
          .build(new Delete(b("r")))).isSuccess());
      assertTrue(tbl.checkAndMutate(CheckAndMutate.newBuilder(b("r")).ifEquals(b("f"), b("a"), b("1"))
          .build(new Delete(b("r")).addColumns(b("f"), b("b")))).isSuccess());
      assertEquals(List.of("f:a=1"), cells(tbl.get(new Get(b("r")))));

      RowMutations both = new RowMutations(b("r"));
      both.add(new Put(b("r")).addColumn(b("f"), b("c"), b("3")));
      both.add(new Delete(b("r")).addColumns(b("f"), b("a")));
      assertTrue(tbl.checkAndMutate(CheckAndMutate.newBuilder(b("r")).ifEquals(b("f"), b("a"), b("1"))
          .build(both)).isSuccess());
      assertEquals(List.of("f:c=3"), cells(tbl.get(new Get(b("r")))));

      RowMutations plain = new RowMutations(b("r"));
      plain.add(new Put(b("r")).addColumn(b("f"), b("d"), b("4")));
      plain.add(new Delete(b("r")).addColumns(b("f"), b("c")));
      tbl.mutateRow(plain);
      assertEquals(List.of("f:d=4"), cells(tbl.get(new Get(b("r")))));
    }
  }

  @Test
  void checkWithAFilter() throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "cam_filter", "f")) {
      Table tbl = t.table();
      tbl.put(new Put(b("r")).addColumn(b("f"), b("x"), b("1")).addColumn(b("f"), b("y"), b("2")));
      SingleColumnValueFilter xIs1 = new SingleColumnValueFilter(b("f"), b("x"), CompareOperator.EQUAL, b("1"));
      xIs1.setFilterIfMissing(true);
      SingleColumnValueFilter yIs3 = new SingleColumnValueFilter(b("f"), b("y"), CompareOperator.EQUAL, b("3"));
      yIs3.setFilterIfMissing(true);
      FilterList both = new FilterList(FilterList.Operator.MUST_PASS_ALL, xIs1, yIs3);
      assertFalse(tbl.checkAndMutate(CheckAndMutate.newBuilder(b("r")).ifMatches(both)
          .build(new Put(b("r")).addColumn(b("f"), b("z"), b("no")))).isSuccess());
      FilterList either = new FilterList(FilterList.Operator.MUST_PASS_ONE, xIs1, yIs3);
      assertTrue(tbl.checkAndMutate(CheckAndMutate.newBuilder(b("r")).ifMatches(either)
          .build(new Put(b("r")).addColumn(b("f"), b("z"), b("yes")))).isSuccess());
      assertEquals("yes", value(tbl, "r", "z"));
    }
  }
}
