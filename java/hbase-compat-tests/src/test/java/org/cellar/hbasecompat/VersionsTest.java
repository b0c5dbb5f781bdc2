package org.cellar.hbasecompat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.CompareOperator;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptor;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.filter.BinaryComparator;
import org.apache.hadoop.hbase.filter.TimestampsFilter;
import org.apache.hadoop.hbase.filter.ValueFilter;
import org.junit.jupiter.api.Test;

/** Cell versions: how many are kept and returned, and reads by timestamp and time range. */
class VersionsTest extends CompatTest {

  /** Family v keeps 3 versions, family one keeps 1; row r has v:q at ts 1..5 (value "vN"). */
  private static TempTable fiveVersions(String label) throws Exception {
    ColumnFamilyDescriptor v = ColumnFamilyDescriptorBuilder.newBuilder(b("v")).setMaxVersions(3).build();
    ColumnFamilyDescriptor one = ColumnFamilyDescriptorBuilder.of("one");
    TempTable t = TempTable.create(connection, admin, label, null, v, one);
    for (long ts = 1; ts <= 5; ts++) {
      t.table().put(new Put(b("r")).addColumn(b("v"), b("q"), ts, b("v" + ts))
          .addColumn(b("one"), b("q"), ts, b("o" + ts)));
    }
    return t;
  }

  private static List<String> stamped(Result r) {
    return r.listCells() == null ? List.of()
        : r.listCells().stream()
            .map(c -> s(CellUtil.cloneFamily(c)) + "@" + c.getTimestamp() + "=" + s(CellUtil.cloneValue(c)))
            .toList();
  }

  @Test
  void getReturnsOnlyTheLatestVersionByDefault() throws Exception {
    try (TempTable t = fiveVersions("ver_default")) {
      assertEquals(List.of("one@5=o5", "v@5=v5"), stamped(t.table().get(new Get(b("r")))));
    }
  }

  @Test
  void readVersionsIsCappedByTheFamilysMaxVersions() throws Exception {
    try (TempTable t = fiveVersions("ver_read")) {
      Table tbl = t.table();
      assertEquals(List.of("v@5=v5", "v@4=v4"),
          stamped(tbl.get(new Get(b("r")).addFamily(b("v")).readVersions(2))));
      assertEquals(List.of("v@5=v5", "v@4=v4", "v@3=v3"),
          stamped(tbl.get(new Get(b("r")).addFamily(b("v")).readVersions(10))),
          "VERSIONS => 3 keeps three");
      assertEquals(List.of("one@5=o5", "v@5=v5", "v@4=v4", "v@3=v3"),
          stamped(tbl.get(new Get(b("r")).readAllVersions())), "VERSIONS => 1 keeps one");
    }
  }

  @Test
  void timeRangeIsMinInclusiveMaxExclusive() throws Exception {
    try (TempTable t = fiveVersions("ver_range")) {
      Table tbl = t.table();
      assertEquals(List.of("v@3=v3"),
          stamped(tbl.get(new Get(b("r")).addFamily(b("v")).setTimeRange(2, 4))),
          "latest version inside [2,4)");
      assertEquals(List.of("v@3=v3"),
          stamped(tbl.get(new Get(b("r")).addFamily(b("v")).setTimeRange(3, 4).readAllVersions())));
      assertEquals(List.of("v@4=v4", "v@3=v3"),
          stamped(tbl.get(new Get(b("r")).addFamily(b("v")).setTimeRange(3, 5).readAllVersions())));
      assertTrue(tbl.get(new Get(b("r")).addFamily(b("v")).setTimeRange(6, 100)).isEmpty());
    }
  }

  @Test
  void exactTimestampReadsOneVersion() throws Exception {
    try (TempTable t = fiveVersions("ver_timestamp")) {
      Table tbl = t.table();
      assertEquals(List.of("v@4=v4"), stamped(tbl.get(new Get(b("r")).addFamily(b("v")).setTimestamp(4))));
      assertEquals(List.of("one@5=o5", "v@5=v5"), stamped(tbl.get(new Get(b("r")).setTimestamp(5))));
      assertTrue(tbl.get(new Get(b("r")).setTimestamp(42)).isEmpty());
    }
  }

  @Test
  void scansHonourVersionsAndTimeRanges() throws Exception {
    try (TempTable t = fiveVersions("ver_scan")) {
      Table tbl = t.table();
      tbl.put(new Put(b("s")).addColumn(b("v"), b("q"), 4L, b("s4")));
      List<Result> all = results(tbl, new Scan().addFamily(b("v")).readVersions(2));
      assertEquals(2, all.size());
      assertEquals(List.of("v@5=v5", "v@4=v4"), stamped(all.get(0)));
      assertEquals(List.of("v@4=s4"), stamped(all.get(1)));

      List<Result> ranged = results(tbl, new Scan().addFamily(b("v")).setTimeRange(4, 5));
      assertEquals(List.of("v@4=v4"), stamped(ranged.get(0)));
      assertEquals(List.of("v@4=s4"), stamped(ranged.get(1)));
      assertEquals(List.of("s"), rows(tbl, new Scan().addFamily(b("v")).setTimestamp(4).withStartRow(b("s"))));
    }
  }

  @Test
  void cellsOlderThanTheTtlAreNotReturned() throws Exception {
    ColumnFamilyDescriptor ttl = ColumnFamilyDescriptorBuilder.newBuilder(b("t")).setTimeToLive(3600).build();
    try (TempTable t = TempTable.create(connection, admin, "ver_ttl", null, ttl)) {
      long now = System.currentTimeMillis();
      t.table().put(new Put(b("r")).addColumn(b("t"), b("old"), now - 7_200_000L, b("expired"))
          .addColumn(b("t"), b("new"), now, b("fresh")));
      assertEquals(List.of("t:new=fresh"), cells(t.table().get(new Get(b("r")))));
      assertEquals(1, rows(t.table(), new Scan()).size());
    }
  }

  /**
   * HBase 2 counts a read's versions among the cells its filter lets through: the filter sees
   * every version the family keeps (three here), so one version with a value filter is the
   * newest version whose value matches, and a version the family no longer keeps never is.
   */
  @Test
  void aFilterSeesEveryKeptVersionAndTheReadsCountAppliesAfterIt() throws Exception {
    try (TempTable t = fiveVersions("ver_filter")) {
      Table tbl = t.table();
      ValueFilter v4 = new ValueFilter(CompareOperator.EQUAL, new BinaryComparator(b("v4")));
      assertEquals(List.of("v@4=v4"), stamped(tbl.get(new Get(b("r")).addFamily(b("v")).setFilter(v4))));
      assertEquals(List.of("v@4=v4"),
          stamped(results(tbl, new Scan().addFamily(b("v")).setFilter(v4)).get(0)));
      ValueFilter notV5 = new ValueFilter(CompareOperator.NOT_EQUAL, new BinaryComparator(b("v5")));
      assertEquals(List.of("v@4=v4", "v@3=v3"),
          stamped(tbl.get(new Get(b("r")).addFamily(b("v")).readVersions(2).setFilter(notV5))));
      ValueFilter v1 = new ValueFilter(CompareOperator.EQUAL, new BinaryComparator(b("v1")));
      assertTrue(tbl.get(new Get(b("r")).addFamily(b("v")).setFilter(v1)).isEmpty(),
          "v1 is past the family's three versions");
    }
  }

  /** TimestampsFilter: the listed versions the family still keeps, newest first. */
  @Test
  void timestampsFilterReturnsTheNewestListedVersion() throws Exception {
    try (TempTable t = fiveVersions("ver_timestamps")) {
      Table tbl = t.table();
      TimestampsFilter threeAndOne = new TimestampsFilter(List.of(3L, 1L));
      assertEquals(List.of("v@3=v3"),
          stamped(tbl.get(new Get(b("r")).addFamily(b("v")).setFilter(threeAndOne))),
          "ts 1 is past the family's three versions");
      TimestampsFilter fourAndThree = new TimestampsFilter(List.of(4L, 3L));
      assertEquals(List.of("v@4=v4", "v@3=v3"), stamped(
          results(tbl, new Scan().addFamily(b("v")).readAllVersions().setFilter(fourAndThree)).get(0)));
      assertEquals(List.of("one@5=o5", "v@5=v5"),
          stamped(tbl.get(new Get(b("r")).setFilter(new TimestampsFilter(List.of(5L))))));
    }
  }
}
