package org.cellar.hbasecompat;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.apache.hadoop.hbase.DoNotRetryIOException;
import org.apache.hadoop.hbase.ClusterMetrics;
import org.apache.hadoop.hbase.HConstants;
import org.apache.hadoop.hbase.HRegionLocation;
import org.apache.hadoop.hbase.NamespaceDescriptor;
import org.apache.hadoop.hbase.NamespaceExistException;
import org.apache.hadoop.hbase.NamespaceNotFoundException;
import org.apache.hadoop.hbase.RegionMetrics;
import org.apache.hadoop.hbase.ServerName;
import org.apache.hadoop.hbase.TableExistsException;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.TableNotDisabledException;
import org.apache.hadoop.hbase.TableNotEnabledException;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptor;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.RegionInfo;
import org.apache.hadoop.hbase.client.RegionLocator;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.client.TableDescriptor;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;
import org.apache.hadoop.hbase.regionserver.NoSuchColumnFamilyException;
import org.apache.hadoop.hbase.util.Bytes;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/** Table life cycle and schema: what `Admin` and `RegionLocator` report and change. */
class AdminTest extends CompatTest {

  @Test
  void createWithFamiliesAndOptionsRoundTripsTheDescriptor() throws Exception {
    ColumnFamilyDescriptor a =
        ColumnFamilyDescriptorBuilder.newBuilder(b("a")).setMaxVersions(5).setTimeToLive(3600).build();
    ColumnFamilyDescriptor bFam = ColumnFamilyDescriptorBuilder.of("b");
    ColumnFamilyDescriptor c =
        ColumnFamilyDescriptorBuilder.newBuilder(b("c")).setMaxVersions(2).build();
    try (TempTable t = TempTable.create(connection, admin, "admin_desc", null, a, bFam, c)) {
      assertTrue(admin.tableExists(t.name()));
      assertTrue(Arrays.asList(admin.listTableNames()).contains(t.name()),
          "listTableNames() lists the new table");

      TableDescriptor desc = admin.getDescriptor(t.name());
      assertEquals(t.name(), desc.getTableName());
      Set<String> names = new TreeSet<>();
      for (ColumnFamilyDescriptor f : desc.getColumnFamilies()) {
        names.add(f.getNameAsString());
      }
      assertEquals(Set.of("a", "b", "c"), names);
      assertEquals(5, desc.getColumnFamily(b("a")).getMaxVersions());
      assertEquals(3600, desc.getColumnFamily(b("a")).getTimeToLive());
      assertEquals(1, desc.getColumnFamily(b("b")).getMaxVersions(), "default VERSIONS is 1");
      assertEquals(HConstants.FOREVER, desc.getColumnFamily(b("b")).getTimeToLive(),
          "default TTL is FOREVER");
      assertEquals(2, desc.getColumnFamily(b("c")).getMaxVersions());
    }
  }

  @Test
  void createExistingTableFailsWithTableExistsException() throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "admin_exists", "f")) {
      TableDescriptor again = TableDescriptorBuilder.newBuilder(t.name())
          .setColumnFamily(ColumnFamilyDescriptorBuilder.of("f")).build();
      assertThrows(TableExistsException.class, () -> admin.createTable(again));
    }
  }

  @Test
  void disableAndEnableKeepTheData() throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "admin_disable", "f")) {
      t.table().put(new Put(b("r1")).addColumn(b("f"), b("q"), b("v1")));
      assertTrue(admin.isTableEnabled(t.name()));
      assertFalse(admin.isTableDisabled(t.name()));

      admin.disableTable(t.name());
      assertTrue(admin.isTableDisabled(t.name()));
      assertFalse(admin.isTableEnabled(t.name()));
      assertTrue(admin.tableExists(t.name()), "a disabled table still exists");
      assertThrows(TableNotEnabledException.class, () -> t.table().get(new Get(b("r1"))));
      assertThrows(TableNotEnabledException.class, () -> admin.disableTable(t.name()));

      admin.enableTable(t.name());
      assertTrue(admin.isTableEnabled(t.name()));
      assertEquals("v1", s(t.table().get(new Get(b("r1"))).getValue(b("f"), b("q"))));
    }
  }

  @Test
  void dropRemovesTheTableAndNeedsItDisabled() throws Exception {
    TempTable t = TempTable.create(connection, admin, "admin_drop", "f");
    try {
      TableName name = t.name();
      t.table().put(new Put(b("r1")).addColumn(b("f"), b("q"), b("v1")));
      assertThrows(TableNotDisabledException.class, () -> admin.deleteTable(name));
      admin.disableTable(name);
      admin.deleteTable(name);
      assertFalse(admin.tableExists(name));
      assertFalse(Arrays.asList(admin.listTableNames()).contains(name));
    } finally {
      t.close();
    }
  }

  @Test
  void preSplitTableHasOneRegionPerRangeWithMatchingKeys() throws Exception {
    byte[][] splits = {b("g"), b("n"), b("t")};
    try (TempTable t = TempTable.createSplit(connection, admin, "admin_presplit", splits, "f")) {
      List<RegionInfo> regions = new ArrayList<>(admin.getRegions(t.name()));
      regions.sort((x, y) -> Bytes.compareTo(x.getStartKey(), y.getStartKey()));
      assertEquals(4, regions.size(), "splits + 1 regions");
      List<String> starts = new ArrayList<>();
      for (RegionInfo r : regions) {
        assertEquals(t.name(), r.getTable());
        starts.add(s(r.getStartKey()));
      }
      assertEquals(List.of("", "g", "n", "t"), starts);

      try (RegionLocator locator = connection.getRegionLocator(t.name())) {
        List<HRegionLocation> locations = locator.getAllRegionLocations();
        assertEquals(4, locations.size());
        locations.sort((x, y) -> Bytes.compareTo(x.getRegion().getStartKey(), y.getRegion().getStartKey()));
        byte[][] bounds = {HConstants.EMPTY_START_ROW, b("g"), b("n"), b("t"), HConstants.EMPTY_END_ROW};
        for (int i = 0; i < locations.size(); i++) {
          HRegionLocation loc = locations.get(i);
          assertNotNull(loc.getServerName(), "every region is hosted somewhere");
          assertArrayEquals(bounds[i], loc.getRegion().getStartKey(), "start key of region " + i);
          assertArrayEquals(bounds[i + 1], loc.getRegion().getEndKey(), "end key of region " + i);
        }
        assertArrayEquals(b("n"), locator.getRegionLocation(b("p")).getRegion().getStartKey(),
            "row p lives in the region starting at n");
      }
      // Rows land in their regions and read back across all of them in order.
      for (String row : List.of("a", "h", "o", "z")) {
        t.table().put(new Put(b(row)).addColumn(b("f"), b("q"), b(row)));
      }
      assertEquals(List.of("a", "h", "o", "z"), rows(t.table(), new Scan()));
    }
  }

  @Test
  void adminSplitAtTheMiddleAndAtARowKeepsEveryRow() throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "admin_split", "f")) {
      // 120 rows of 1 KiB: more than one 64 KiB block, so the region has a middle row, and
      // below the size at which the server would split the table on its own.
      List<String> written = new ArrayList<>();
      for (int i = 0; i < 120; i++) {
        String row = String.format("r%03d", i);
        written.add(row);
        t.table().put(new Put(b(row)).addColumn(b("f"), b("q"), new byte[1024]));
      }
      // No split row: the one region splits at its middle row, strictly inside it.
      // Admin.split is asynchronous: wait (bounded) until meta shows the daughters.
      admin.split(t.name());
      List<RegionInfo> halves = liveRegionsOnceThereAre(t.name(), 2);
      assertEquals(2, halves.size(), "one region split in two");
      String middle = s(halves.get(1).getStartKey());
      assertTrue(middle.compareTo("r000") > 0 && middle.compareTo("r119") <= 0, middle);
      assertArrayEquals(halves.get(1).getStartKey(), halves.get(0).getEndKey());

      // At a row: the region holding it splits there.
      // HBase refuses to split a daughter until a compaction has rewritten the parent's files
      // ("NOT splittable"); its users ask for that compaction and retry (the one HBase queues
      // after a split can take minutes on a busy machine: it failed this test's 60 s against
      // HBase 2.6.4). Cellar compacts first.
      long deadline = System.currentTimeMillis() + 180_000;
      boolean compacted = false;
      while (true) {
        try {
          admin.split(t.name(), b("r110"));
          break;
        } catch (DoNotRetryIOException e) {
          if (!String.valueOf(e.getMessage()).contains("NOT splittable")
              || System.currentTimeMillis() > deadline) {
            throw e;
          }
          if (!compacted) {
            admin.majorCompact(t.name());
            compacted = true;
          }
          Thread.sleep(200);
        }
      }
      List<String> starts = new ArrayList<>();
      for (RegionInfo r : liveRegionsOnceThereAre(t.name(), 3)) {
        starts.add(s(r.getStartKey()));
      }
      assertEquals(List.of("", middle, "r110"), starts);
      assertEquals(written, rows(t.table(), new Scan()), "every row, once, in order");
      assertEquals(1024, t.table().get(new Get(b("r115"))).getValue(b("f"), b("q")).length);
    }
  }

  @Test
  void namespacesAreCreatedModifiedAndRemovedOnlyWhenEmpty() throws Exception {
    String ns = TempTable.uniqueName("ns").getNameAsString();
    admin.createNamespace(NamespaceDescriptor.create(ns).addConfiguration("owner", "compat").build());
    try {
      NamespaceDescriptor got = admin.getNamespaceDescriptor(ns);
      assertEquals("compat", got.getConfigurationValue("owner"));
      assertTrue(Arrays.asList(admin.listNamespaces()).contains(ns), "listed with no table in it");
      assertThrows(NamespaceExistException.class,
          () -> admin.createNamespace(NamespaceDescriptor.create(ns).build()));

      admin.modifyNamespace(NamespaceDescriptor.create(ns).addConfiguration("owner", "other").build());
      assertEquals("other", admin.getNamespaceDescriptor(ns).getConfigurationValue("owner"));

      TableName inNs = TableName.valueOf(ns, "t");
      admin.createTable(TableDescriptorBuilder.newBuilder(inNs)
          .setColumnFamily(ColumnFamilyDescriptorBuilder.of("f")).build());
      try (Table table = connection.getTable(inNs)) {
        table.put(new Put(b("r")).addColumn(b("f"), b("q"), b("v")));
        assertEquals("v", s(table.get(new Get(b("r"))).getValue(b("f"), b("q"))));
      }
      assertEquals(List.of(inNs), Arrays.asList(admin.listTableNamesByNamespace(ns)));
      assertConstraint(() -> admin.deleteNamespace(ns), "not empty");
      admin.disableTable(inNs);
      admin.deleteTable(inNs);
    } finally {
      admin.deleteNamespace(ns);
    }
    assertThrows(NamespaceNotFoundException.class, () -> admin.getNamespaceDescriptor(ns));
    assertFalse(Arrays.asList(admin.listNamespaces()).contains(ns));
    // A table goes only into a namespace that exists.
    assertThrows(NamespaceNotFoundException.class, () -> admin.createTable(
        TableDescriptorBuilder.newBuilder(TableName.valueOf(ns, "t"))
            .setColumnFamily(ColumnFamilyDescriptorBuilder.of("f")).build()));
    assertFalse(admin.tableExists(TableName.valueOf(ns, "t")));
    assertConstraint(() -> admin.deleteNamespace("default"), "reserved");
  }

  /**
   * The call fails with HBase's ConstraintException. That class lives in HBase's server jar,
   * not the client's, so the client reports it as a remote exception naming the class.
   */
  private static void assertConstraint(Executable call, String why) {
    IOException e = assertThrows(IOException.class, call, why);
    assertTrue(e.toString().contains("org.apache.hadoop.hbase.constraint.ConstraintException"),
        why + ": " + e);
  }

  @Test
  void clusterMetricsNameTheServersAndTheTablesRegions() throws Exception {
    byte[][] splits = {b("g"), b("n")};
    try (TempTable t = TempTable.createSplit(connection, admin, "admin_metrics", splits, "f")) {
      ClusterMetrics all = admin.getClusterMetrics();
      assertNotNull(all.getMasterName(), "the active master");
      assertFalse(all.getClusterId() == null || all.getClusterId().isEmpty(), "the cluster id");
      assertFalse(all.getHBaseVersion() == null || all.getHBaseVersion().isEmpty(), "a version");
      // One live region server standalone, each of a cluster's otherwise.
      List<ServerName> servers = new ArrayList<>(admin.getRegionServers());
      assertFalse(servers.isEmpty(), "live region servers");
      assertEquals(new HashSet<>(servers), new HashSet<>(all.getLiveServerMetrics().keySet()));
      assertEquals(3, all.getTableRegionStatesCount().get(t.name()).getOpenRegions());

      // Only what was asked for.
      ClusterMetrics some = admin.getClusterMetrics(EnumSet.of(ClusterMetrics.Option.LIVE_SERVERS));
      assertEquals(new HashSet<>(servers), new HashSet<>(some.getLiveServerMetrics().keySet()));
      assertNull(some.getMasterName());

      // The servers' regions of the table, one store each (one family), three in all.
      int found = 0;
      for (ServerName server : servers) {
        for (RegionMetrics r : admin.getRegionMetrics(server, t.name())) {
          found++;
          assertEquals(1, r.getStoreCount(), r.getNameAsString());
          assertTrue(r.getNameAsString().startsWith(t.name().getNameAsString() + ","), r.getNameAsString());
        }
      }
      assertEquals(3, found);
    }
  }

  /** The table's live regions once there are {@code n} of them, or after 60 s, whichever is first. */
  private static List<RegionInfo> liveRegionsOnceThereAre(TableName name, int n) throws Exception {
    long deadline = System.currentTimeMillis() + 60_000;
    List<RegionInfo> regions = SplitTest.liveRegions(name);
    while (regions.size() != n && System.currentTimeMillis() < deadline) {
      Thread.sleep(100);
      regions = SplitTest.liveRegions(name);
    }
    return regions;
  }

  @Test
  void truncatePreservingSplitsEmptiesTheTableAndKeepsRegions() throws Exception {
    byte[][] splits = {b("m")};
    try (TempTable t = TempTable.createSplit(connection, admin, "admin_truncate", splits, "f")) {
      for (String row : List.of("a", "b", "x", "y")) {
        t.table().put(new Put(b(row)).addColumn(b("f"), b("q"), b(row)));
      }
      assertEquals(4, rows(t.table(), new Scan()).size());
      admin.disableTable(t.name());
      admin.truncateTable(t.name(), true);
      assertTrue(admin.isTableEnabled(t.name()), "truncate leaves the table enabled");
      assertEquals(List.of(), rows(t.table(), new Scan()));
      List<String> starts = new ArrayList<>();
      for (RegionInfo r : admin.getRegions(t.name())) {
        starts.add(s(r.getStartKey()));
      }
      starts.sort(null);
      assertEquals(List.of("", "m"), starts);
      assertEquals(1, admin.getDescriptor(t.name()).getColumnFamilyCount());
      t.table().put(new Put(b("c")).addColumn(b("f"), b("q"), b("after")));
      assertEquals("after", s(t.table().get(new Get(b("c"))).getValue(b("f"), b("q"))));
    }
  }

  @Test
  void addModifyAndDeleteColumnFamilies() throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "admin_families", "a", "b")) {
      t.table().put(new Put(b("r")).addColumn(b("a"), b("q"), b("va")).addColumn(b("b"), b("q"), b("vb")));

      admin.addColumnFamily(t.name(),
          ColumnFamilyDescriptorBuilder.newBuilder(b("c")).setMaxVersions(3).build());
      TableDescriptor desc = admin.getDescriptor(t.name());
      assertEquals(3, desc.getColumnFamilyCount());
      assertEquals(3, desc.getColumnFamily(b("c")).getMaxVersions());
      t.table().put(new Put(b("r")).addColumn(b("c"), b("q"), b("vc")));
      assertEquals("vc", s(t.table().get(new Get(b("r"))).getValue(b("c"), b("q"))));

      admin.modifyColumnFamily(t.name(),
          ColumnFamilyDescriptorBuilder.newBuilder(b("a")).setMaxVersions(4).setTimeToLive(7200).build());
      ColumnFamilyDescriptor a = admin.getDescriptor(t.name()).getColumnFamily(b("a"));
      assertEquals(4, a.getMaxVersions());
      assertEquals(7200, a.getTimeToLive());
      assertEquals("va", s(t.table().get(new Get(b("r"))).getValue(b("a"), b("q"))),
          "modifying a family keeps its data");

      admin.deleteColumnFamily(t.name(), b("b"));
      desc = admin.getDescriptor(t.name());
      assertNull(desc.getColumnFamily(b("b")));
      assertEquals(2, desc.getColumnFamilyCount());
      assertEquals(List.of("a:q=va", "c:q=vc"), cells(t.table().get(new Get(b("r")))));
      assertThrows(NoSuchColumnFamilyException.class,
          () -> t.table().put(new Put(b("r")).addColumn(b("b"), b("q"), b("again"))));
    }
  }

  @Test
  void modifyWithoutReopeningRegionsRefusesAddingOrRemovingFamilies() throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "admin_noreopen", "a")) {
      TableDescriptor before = admin.getDescriptor(t.name());
      TableDescriptor more = TableDescriptorBuilder.newBuilder(before)
          .setColumnFamily(ColumnFamilyDescriptorBuilder.of("b")).build();
      long start = System.currentTimeMillis();
      Exception e = assertThrows(Exception.class, () -> admin.modifyTable(more, false));
      System.out.println("modifyTable(+family, reopenRegions=false): " + e.getClass().getName()
          + " after " + (System.currentTimeMillis() - start) + " ms: " + e.getMessage()
          + (e.getCause() == null ? "" : " / cause " + e.getCause()));
      assertTrue(String.valueOf(e.getMessage()).contains(
          "Cannot add or remove column families when this modification won't reopen regions"),
          e.toString());
      assertEquals(1, admin.getDescriptor(t.name()).getColumnFamilyCount(), "nothing changed");

      // Other changes are stored (HBase applies them when the regions next open).
      TableDescriptor versions = TableDescriptorBuilder.newBuilder(before)
          .modifyColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(b("a")).setMaxVersions(5)
              .build()).build();
      admin.modifyTable(versions, false);
      assertEquals(5, admin.getDescriptor(t.name()).getColumnFamily(b("a")).getMaxVersions());
    }
  }
}
