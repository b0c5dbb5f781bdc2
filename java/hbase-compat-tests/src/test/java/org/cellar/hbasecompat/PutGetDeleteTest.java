package org.cellar.hbasecompat;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptor;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.Delete;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.Table;
import org.junit.jupiter.api.Test;

/** Single-row writes and reads, and every kind of Delete. */
class PutGetDeleteTest extends CompatTest {
  /** Two families keeping 5 versions, so version-targeted deletes are observable. */
  private static TempTable versioned(String label) throws Exception {
    ColumnFamilyDescriptor a = ColumnFamilyDescriptorBuilder.newBuilder(b("a")).setMaxVersions(5).build();
    ColumnFamilyDescriptor bf = ColumnFamilyDescriptorBuilder.newBuilder(b("b")).setMaxVersions(5).build();
    return TempTable.create(connection, admin, label, null, a, bf);
  }

  private static Get all(String row) {
    return new Get(b(row)).readAllVersions();
  }

  /** Versions of one column as "ts=value", newest first. */
  private static List<String> versions(Table t, String row, String fam, String qual) throws Exception {
    Result r = t.get(all(row));
    return r.getColumnCells(b(fam), b(qual)).stream()
        .map(c -> c.getTimestamp() + "=" + s(CellUtil.cloneValue(c)))
        .toList();
  }

  @Test
  void putThenGetReturnsExactCellsSortedByFamilyAndQualifier() throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "pgd_basic", "a", "b")) {
      Put p = new Put(b("row1"))
          .addColumn(b("b"), b("z"), b("bz"))
          .addColumn(b("a"), b("y"), b("ay"))
          .addColumn(b("a"), b("x"), b("ax"))
          .addColumn(b("b"), b(""), b("empty-qualifier"));
      t.table().put(p);

      Result r = t.table().get(new Get(b("row1")));
      assertEquals("row1", s(r.getRow()));
      assertEquals(List.of("a:x=ax", "a:y=ay", "b:=empty-qualifier", "b:z=bz"), cells(r));
      assertEquals("ay", s(r.getValue(b("a"), b("y"))));
      assertNull(r.getValue(b("a"), b("nope")));

      assertEquals(List.of("a:y=ay"), cells(t.table().get(new Get(b("row1")).addColumn(b("a"), b("y")))));
      assertEquals(List.of("b:=empty-qualifier", "b:z=bz"),
          cells(t.table().get(new Get(b("row1")).addFamily(b("b")))));

      Result missing = t.table().get(new Get(b("row2")));
      assertTrue(missing.isEmpty());
      assertNull(missing.getRow());
      assertTrue(t.table().exists(new Get(b("row1"))));
      assertFalse(t.table().exists(new Get(b("row2"))));
    }
  }

  @Test
  void overwriteKeepsLatestAndExplicitTimestampsAreReturned() throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "pgd_overwrite", "f")) {
      t.table().put(new Put(b("r")).addColumn(b("f"), b("q"), 100L, b("old")));
      t.table().put(new Put(b("r")).addColumn(b("f"), b("q"), 200L, b("new")));
      Cell c = t.table().get(new Get(b("r"))).getColumnLatestCell(b("f"), b("q"));
      assertEquals(200L, c.getTimestamp());
      assertEquals("new", s(CellUtil.cloneValue(c)));
      // A write with an older timestamp does not hide the newer one.
      t.table().put(new Put(b("r")).addColumn(b("f"), b("q"), 150L, b("middle")));
      assertEquals("new", s(t.table().get(new Get(b("r"))).getValue(b("f"), b("q"))));
      // Same row, column and timestamp: the last write wins.
      t.table().put(new Put(b("r")).addColumn(b("f"), b("q"), 200L, b("replaced")));
      assertEquals("replaced", s(t.table().get(new Get(b("r"))).getValue(b("f"), b("q"))));
    }
  }

  @Test
  void binaryKeysAndLargeValuesRoundTrip() throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "pgd_binary", "f")) {
      byte[] row = {0, (byte) 0xff, 1, (byte) 0x80, 0};
      byte[] qual = {(byte) 0xfe, 0, 7};
      byte[] value = new byte[300 * 1024];
      for (int i = 0; i < value.length; i++) {
        value[i] = (byte) (i * 31 + 7);
      }
      t.table().put(new Put(row).addColumn(b("f"), qual, value));
      Result r = t.table().get(new Get(row));
      assertArrayEquals(row, r.getRow());
      assertArrayEquals(value, r.getValue(b("f"), qual));
      t.table().put(new Put(row).addColumn(b("f"), b("empty"), new byte[0]));
      assertArrayEquals(new byte[0], t.table().get(new Get(row)).getValue(b("f"), b("empty")),
          "an empty value is a value, not a missing cell");
    }
  }

  @Test
  void deleteWholeRow() throws Exception {
    try (TempTable t = versioned("pgd_del_row")) {
      Table tbl = t.table();
      tbl.put(new Put(b("r1")).addColumn(b("a"), b("q"), b("1")).addColumn(b("b"), b("q"), b("2")));
      tbl.put(new Put(b("r2")).addColumn(b("a"), b("q"), b("3")));
      tbl.delete(new Delete(b("r1")));
      assertTrue(tbl.get(new Get(b("r1"))).isEmpty());
      assertEquals("3", s(tbl.get(new Get(b("r2"))).getValue(b("a"), b("q"))), "other rows untouched");
      // A later put is visible again: the delete only covered what existed then. Both take
      // the server's clock, and a put in the delete marker's own millisecond is masked by it
      // (HBase's rule), so the put waits for the next millisecond.
      Thread.sleep(5);
      tbl.put(new Put(b("r1")).addColumn(b("a"), b("q"), b("back")));
      assertEquals("back", s(tbl.get(new Get(b("r1"))).getValue(b("a"), b("q"))));
    }
  }

  @Test
  void deleteRowUpToTimestamp() throws Exception {
    try (TempTable t = versioned("pgd_del_row_ts")) {
      Table tbl = t.table();
      tbl.put(new Put(b("r")).addColumn(b("a"), b("q"), 10L, b("a10")).addColumn(b("a"), b("q"), 20L, b("a20"))
          .addColumn(b("b"), b("q"), 15L, b("b15")).addColumn(b("b"), b("q"), 30L, b("b30")));
      tbl.delete(new Delete(b("r"), 20L));
      assertEquals(List.of("b:q=b30"), cells(tbl.get(all("r"))),
          "cells at or below ts 20 are gone in every family");
    }
  }

  @Test
  void deleteFamily() throws Exception {
    try (TempTable t = versioned("pgd_del_family")) {
      Table tbl = t.table();
      tbl.put(new Put(b("r")).addColumn(b("a"), b("x"), b("ax")).addColumn(b("a"), b("y"), b("ay"))
          .addColumn(b("b"), b("x"), b("bx")));
      tbl.delete(new Delete(b("r")).addFamily(b("a")));
      assertEquals(List.of("b:x=bx"), cells(tbl.get(all("r"))));
    }
  }

  @Test
  void deleteFamilyUpToTimestamp() throws Exception {
    try (TempTable t = versioned("pgd_del_family_ts")) {
      Table tbl = t.table();
      tbl.put(new Put(b("r")).addColumn(b("a"), b("x"), 5L, b("x5")).addColumn(b("a"), b("x"), 50L, b("x50"))
          .addColumn(b("a"), b("y"), 7L, b("y7")).addColumn(b("b"), b("x"), 5L, b("bx5")));
      tbl.delete(new Delete(b("r")).addFamily(b("a"), 10L));
      assertEquals(List.of("a:x=x50", "b:x=bx5"), cells(tbl.get(all("r"))));
    }
  }

  @Test
  void deleteFamilyVersionRemovesThatTimestampInEveryColumn() throws Exception {
    try (TempTable t = versioned("pgd_del_family_version")) {
      Table tbl = t.table();
      tbl.put(new Put(b("r")).addColumn(b("a"), b("x"), 1L, b("x1")).addColumn(b("a"), b("x"), 2L, b("x2"))
          .addColumn(b("a"), b("y"), 2L, b("y2")).addColumn(b("a"), b("y"), 3L, b("y3"))
          .addColumn(b("b"), b("x"), 2L, b("bx2")));
      tbl.delete(new Delete(b("r")).addFamilyVersion(b("a"), 2L));
      assertEquals(List.of("1=x1"), versions(tbl, "r", "a", "x"));
      assertEquals(List.of("3=y3"), versions(tbl, "r", "a", "y"));
      assertEquals(List.of("2=bx2"), versions(tbl, "r", "b", "x"), "other families untouched");
    }
  }

  @Test
  void deleteLatestVersionOfAColumnUncoversThePreviousOne() throws Exception {
    try (TempTable t = versioned("pgd_del_column")) {
      Table tbl = t.table();
      tbl.put(new Put(b("r")).addColumn(b("a"), b("q"), 1L, b("v1")).addColumn(b("a"), b("q"), 2L, b("v2"))
          .addColumn(b("a"), b("q"), 3L, b("v3")).addColumn(b("a"), b("other"), 3L, b("o")));
      tbl.delete(new Delete(b("r")).addColumn(b("a"), b("q")));
      assertEquals("v2", s(tbl.get(new Get(b("r"))).getValue(b("a"), b("q"))));
      assertEquals(List.of("2=v2", "1=v1"), versions(tbl, "r", "a", "q"));
      assertEquals(List.of("3=o"), versions(tbl, "r", "a", "other"));
    }
  }

  @Test
  void deleteOneExactVersionOfAColumn() throws Exception {
    try (TempTable t = versioned("pgd_del_column_ts")) {
      Table tbl = t.table();
      tbl.put(new Put(b("r")).addColumn(b("a"), b("q"), 1L, b("v1")).addColumn(b("a"), b("q"), 2L, b("v2"))
          .addColumn(b("a"), b("q"), 3L, b("v3")));
      tbl.delete(new Delete(b("r")).addColumn(b("a"), b("q"), 2L));
      assertEquals(List.of("3=v3", "1=v1"), versions(tbl, "r", "a", "q"));
    }
  }

  @Test
  void deleteAllVersionsOfAColumn() throws Exception {
    try (TempTable t = versioned("pgd_del_columns")) {
      Table tbl = t.table();
      tbl.put(new Put(b("r")).addColumn(b("a"), b("q"), 1L, b("v1")).addColumn(b("a"), b("q"), 2L, b("v2"))
          .addColumn(b("a"), b("keep"), 1L, b("k")));
      tbl.delete(new Delete(b("r")).addColumns(b("a"), b("q")));
      assertEquals(List.of(), versions(tbl, "r", "a", "q"));
      assertEquals(List.of("a:keep=k"), cells(tbl.get(all("r"))));
    }
  }

  @Test
  void deleteColumnVersionsUpToTimestamp() throws Exception {
    try (TempTable t = versioned("pgd_del_columns_ts")) {
      Table tbl = t.table();
      tbl.put(new Put(b("r")).addColumn(b("a"), b("q"), 1L, b("v1")).addColumn(b("a"), b("q"), 2L, b("v2"))
          .addColumn(b("a"), b("q"), 3L, b("v3")));
      tbl.delete(new Delete(b("r")).addColumns(b("a"), b("q"), 2L));
      assertEquals(List.of("3=v3"), versions(tbl, "r", "a", "q"));
      // A put below the delete marker's timestamp stays hidden (until a major compaction).
      tbl.put(new Put(b("r")).addColumn(b("a"), b("q"), 1L, b("again")));
      assertEquals(List.of("3=v3"), versions(tbl, "r", "a", "q"));
    }
  }
}
