package org.cellar.hbasecompat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import org.apache.hadoop.hbase.ClusterMetrics;
import org.apache.hadoop.hbase.HRegionLocation;
import org.apache.hadoop.hbase.ServerName;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.RegionLocator;
import org.apache.hadoop.hbase.client.Result;
import org.junit.jupiter.api.Test;

/**
 * Runs only in the pass with -Dcellar.hbase.zookeeper (the client knows nothing but the
 * ZooKeeper quorum): the client's default registry finds the master, hbase:meta and the
 * cluster id through the znodes Cellar publishes, and they all name Cellar's HBase port (the
 * master's, for a cluster; its regions are on the region servers the master lists).
 */
class ZooKeeperRegistryTest extends CompatTest {
  private static String quorum() {
    String q = System.getProperty(Cluster.ZOOKEEPER_PROPERTY);
    assumeTrue(q != null && !q.isBlank(), "only with -D" + Cluster.ZOOKEEPER_PROPERTY);
    return q;
  }

  private static int bootstrapPort() {
    String b = Cluster.bootstrap();
    return Integer.parseInt(b.substring(b.lastIndexOf(':') + 1));
  }

  @Test
  void theClientIsConfiguredWithTheQuorumAlone() {
    String q = quorum();
    assertEquals(q, connection.getConfiguration().get("hbase.zookeeper.quorum"));
    assertNull(connection.getConfiguration().get("hbase.client.bootstrap.servers"));
    assertNull(connection.getConfiguration().get("hbase.client.registry.impl"));
  }

  @Test
  void masterMetaAndClusterIdComeFromTheZnodes() throws Exception {
    quorum();
    ClusterMetrics metrics = admin.getClusterMetrics();
    ServerName master = metrics.getMasterName();
    assertNotNull(master);
    assertEquals(bootstrapPort(), master.getPort());
    assertNotNull(metrics.getClusterId());
    assertTrue(!metrics.getClusterId().isEmpty());
    try (RegionLocator meta = connection.getRegionLocator(TableName.META_TABLE_NAME)) {
      HRegionLocation loc = meta.getRegionLocation(b(""), true);
      assertEquals(bootstrapPort(), loc.getServerName().getPort());
    }
  }

  @Test
  void dataGoesThroughTheLocationsZooKeeperGave() throws Exception {
    quorum();
    try (TempTable t = TempTable.create(connection, admin, "zk", "f")) {
      t.table().put(new Put(b("row")).addColumn(b("f"), b("q"), b("v")));
      Result r = t.table().get(new Get(b("row")));
      assertEquals("v", s(r.getValue(b("f"), b("q"))));
      try (RegionLocator loc = connection.getRegionLocator(t.name())) {
        // Standalone: this one server; a cluster: one of its region servers.
        ServerName at = loc.getRegionLocation(b("row"), true).getServerName();
        assertTrue(admin.getRegionServers().contains(at), at + " is a live region server");
      }
    }
  }
}
