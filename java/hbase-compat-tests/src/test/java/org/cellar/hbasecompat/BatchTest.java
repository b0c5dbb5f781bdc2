package org.cellar.hbasecompat;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.hbase.client.Append;
import org.apache.hadoop.hbase.client.Delete;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Increment;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.RetriesExhaustedWithDetailsException;
import org.apache.hadoop.hbase.client.Row;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.regionserver.NoSuchColumnFamilyException;
import org.apache.hadoop.hbase.util.Bytes;
import org.junit.jupiter.api.Test;

/** Multi-row calls: put(List), get(List), delete(List), exists(List) and Table.batch. */
class BatchTest extends CompatTest {
  private static final byte[][] SPLITS = {b("k025"), b("k050"), b("k075")};

  @Test
  void putListAndGetListAcrossRegions() throws Exception {
    try (TempTable t = TempTable.createSplit(connection, admin, "batch_lists", SPLITS, "f")) {
      Table tbl = t.table();
      List<String> keys = keys("k", 0, 100, 3);
      List<Put> puts = new ArrayList<>();
      // Out of order on purpose: the client groups by region, the results must not care.
      for (int i = keys.size() - 1; i >= 0; i--) {
        puts.add(new Put(b(keys.get(i))).addColumn(b("f"), b("q"), b("v" + i)));
      }
      tbl.put(puts);
      assertEquals(keys, rows(tbl, new Scan()));

      List<Get> gets = new ArrayList<>();
      for (int i : new int[] {99, 0, 50, 24, 25, 74}) {
        gets.add(new Get(b(keys.get(i))));
      }
      gets.add(new Get(b("k999")));
      Result[] got = tbl.get(gets);
      assertEquals(7, got.length);
      int[] expect = {99, 0, 50, 24, 25, 74};
      for (int i = 0; i < expect.length; i++) {
        assertEquals("v" + expect[i], s(got[i].getValue(b("f"), b("q"))), "result " + i + " in request order");
      }
      assertTrue(got[6].isEmpty(), "a missing row is an empty Result in its slot");

      boolean[] exists = tbl.exists(List.of(new Get(b("k010")), new Get(b("nope")), new Get(b("k090"))));
      assertArrayEquals(new boolean[] {true, false, true}, exists);

      List<Delete> deletes = new ArrayList<>();
      for (int i = 0; i < 100; i += 2) {
        deletes.add(new Delete(b(keys.get(i))));
      }
      tbl.delete(deletes);
      List<String> odd = new ArrayList<>();
      for (int i = 1; i < 100; i += 2) {
        odd.add(keys.get(i));
      }
      assertEquals(odd, rows(tbl, new Scan()));
    }
  }

  @Test
  void batchMixesActionsAndReturnsOneResultPerAction() throws Exception {
    try (TempTable t = TempTable.createSplit(connection, admin, "batch_mixed", SPLITS, "f")) {
      Table tbl = t.table();
      tbl.put(new Put(b("k010")).addColumn(b("f"), b("q"), b("ten")));
      tbl.put(new Put(b("k060")).addColumn(b("f"), b("q"), b("sixty")));
      tbl.put(new Put(b("k080")).addColumn(b("f"), b("n"), Bytes.toBytes(5L)));

      List<Row> actions = new ArrayList<>();
      actions.add(new Put(b("k030")).addColumn(b("f"), b("q"), b("thirty")));
      actions.add(new Get(b("k010")));
      actions.add(new Delete(b("k060")));
      actions.add(new Increment(b("k080")).addColumn(b("f"), b("n"), 3L));
      actions.add(new Append(b("k010")).addColumn(b("f"), b("q"), b("!")));
      actions.add(new Get(b("k099")));
      Object[] results = new Object[actions.size()];
      tbl.batch(actions, results);

      for (Object r : results) {
        assertInstanceOf(Result.class, r);
      }
      assertTrue(((Result) results[0]).isEmpty(), "a Put's result is empty");
      assertEquals("ten", s(((Result) results[1]).getValue(b("f"), b("q"))));
      assertTrue(((Result) results[2]).isEmpty(), "a Delete's result is empty");
      assertEquals(8L, Bytes.toLong(((Result) results[3]).getValue(b("f"), b("n"))));
      assertEquals("ten!", s(((Result) results[4]).getValue(b("f"), b("q"))));
      assertTrue(((Result) results[5]).isEmpty());

      assertEquals("thirty", s(tbl.get(new Get(b("k030"))).getValue(b("f"), b("q"))));
      assertTrue(tbl.get(new Get(b("k060"))).isEmpty());
      assertEquals("ten!", s(tbl.get(new Get(b("k010"))).getValue(b("f"), b("q"))));
    }
  }

  @Test
  void batchReportsPerActionFailuresAndAppliesTheRest() throws Exception {
    try (TempTable t = TempTable.createSplit(connection, admin, "batch_errors", SPLITS, "f")) {
      Table tbl = t.table();
      List<Row> actions = List.of(
          new Put(b("k001")).addColumn(b("f"), b("q"), b("ok1")),
          new Put(b("k002")).addColumn(b("nosuch"), b("q"), b("bad")),
          new Put(b("k090")).addColumn(b("f"), b("q"), b("ok2")));
      Object[] results = new Object[actions.size()];
      RetriesExhaustedWithDetailsException e =
          assertThrows(RetriesExhaustedWithDetailsException.class, () -> tbl.batch(actions, results));
      assertEquals(1, e.getNumExceptions());
      assertInstanceOf(NoSuchColumnFamilyException.class, e.getCause(0));
      assertArrayEquals(b("k002"), e.getRow(0).getRow());
      assertInstanceOf(Result.class, results[0]);
      assertInstanceOf(NoSuchColumnFamilyException.class, results[1]);
      assertInstanceOf(Result.class, results[2]);
      assertEquals("ok1", s(tbl.get(new Get(b("k001"))).getValue(b("f"), b("q"))));
      assertEquals("ok2", s(tbl.get(new Get(b("k090"))).getValue(b("f"), b("q"))));
      assertTrue(tbl.get(new Get(b("k002"))).isEmpty());
    }
  }
}
