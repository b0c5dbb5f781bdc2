package org.cellar.hbasecompat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.HConstants;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.Append;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.Delete;
import org.apache.hadoop.hbase.client.Increment;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.ResultScanner;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.client.TableDescriptor;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;
import org.apache.hadoop.hbase.replication.ReplicationPeerConfig;
import org.apache.hadoop.hbase.util.Bytes;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Cellar as a replication peer of an unmodified Apache HBase 2.6: the HBase side only creates
 * its table with {@code REPLICATION_SCOPE => 1} and adds a peer whose cluster key is Cellar's
 * ZooKeeper; every edit written to HBase afterwards (puts with and without timestamps, every
 * delete kind, increments, appends, check-and-puts, a large cell, a batch) must arrive in
 * Cellar, every version equal, and a family with scope 0 must not ship. Run by
 * scripts/hbase-replication.sh, which starts both servers and sets
 * -Dcellar.replication.source=HBASE_HOST:PORT, -Dcellar.hbase.bootstrap=CELLAR_HOST:PORT and
 * -Dcellar.replication.peer=ZK_HOST:ZK_PORT:/hbase; skipped without them.
 */
class ReplicationSinkTest {
  static final String SOURCE_PROPERTY = "cellar.replication.source";
  static final String PEER_PROPERTY = "cellar.replication.peer";
  static final byte[] F = Bytes.toBytes("f");
  static final byte[] G = Bytes.toBytes("g");
  static final byte[] LOCAL = Bytes.toBytes("local");

  static Connection source;
  static Connection sink;
  static Admin sourceAdmin;
  static Admin sinkAdmin;
  static String peerKey;

  @BeforeAll
  static void connect() throws Exception {
    String sourceAddr = System.getProperty(SOURCE_PROPERTY);
    peerKey = System.getProperty(PEER_PROPERTY);
    assumeTrue(sourceAddr != null && !sourceAddr.isBlank() && peerKey != null,
        "no replication source given (scripts/hbase-replication.sh runs this)");
    Configuration conf = Cluster.configuration();
    conf.set("hbase.client.bootstrap.servers", sourceAddr.trim());
    conf.set("hbase.client.registry.impl", "org.apache.hadoop.hbase.client.RpcConnectionRegistry");
    source = ConnectionFactory.createConnection(conf);
    sourceAdmin = source.getAdmin();
    sink = Cluster.connect();
    sinkAdmin = sink.getAdmin();
  }

  @AfterAll
  static void disconnect() throws Exception {
    for (AutoCloseable c : new AutoCloseable[] {sourceAdmin, source, sinkAdmin, sink}) {
      if (c != null) {
        c.close();
      }
    }
  }

  static byte[] b(String s) {
    return Bytes.toBytes(s);
  }

  /** Every version of every cell of the table, as family:qualifier@ts=value (values hashed past 64 bytes). */
  static List<String> everything(Connection conn, TableName name, boolean withLocal) throws Exception {
    List<String> out = new ArrayList<>();
    Scan scan = new Scan().readAllVersions().addFamily(F).addFamily(G);
    if (withLocal) {
      scan.addFamily(LOCAL);
    }
    try (Table t = conn.getTable(name); ResultScanner rs = t.getScanner(scan)) {
      for (Result r : rs) {
        for (Cell c : r.rawCells()) {
          byte[] v = CellUtil.cloneValue(c);
          String value = v.length > 64 ? "len" + v.length + "#" + Arrays.hashCode(v) : Bytes.toStringBinary(v);
          out.add(Bytes.toStringBinary(CellUtil.cloneRow(c)) + "/" + Bytes.toString(CellUtil.cloneFamily(c)) + ":"
              + Bytes.toStringBinary(CellUtil.cloneQualifier(c)) + "@" + c.getTimestamp() + "=" + value);
        }
      }
    }
    return out;
  }

  @Test
  void editsWrittenToHBaseArriveInCellarEveryVersionEqual() throws Exception {
    TableName name = TempTable.uniqueName("replicated");
    // Cellar's copy first: a source retries edits for a table its peer lacks until it exists.
    sinkAdmin.createTable(TableDescriptorBuilder.newBuilder(name)
        .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(F).setMaxVersions(3).build())
        .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(G).build())
        .build());
    TableDescriptor onSource = TableDescriptorBuilder.newBuilder(name)
        .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(F).setMaxVersions(3)
            .setScope(HConstants.REPLICATION_SCOPE_GLOBAL).build())
        .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(G)
            .setScope(HConstants.REPLICATION_SCOPE_GLOBAL).build())
        .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(LOCAL).build())
        .build();
    sourceAdmin.createTable(onSource);
    String peer = "cellar";
    if (sourceAdmin.listReplicationPeers().stream().noneMatch(p -> p.getPeerId().equals(peer))) {
      sourceAdmin.addReplicationPeer(peer, ReplicationPeerConfig.newBuilder().setClusterKey(peerKey).build());
    }
    try (Table t = source.getTable(name)) {
      // Puts: explicit timestamps (three versions of one column), the server's time, two
      // families in one put, a cell in the family that is not replicated, a 5 MiB value.
      for (long ts = 1; ts <= 4; ts++) {
        t.put(new Put(b("v")).addColumn(F, b("q"), ts, b("v" + ts)));
      }
      t.put(new Put(b("both")).addColumn(F, b("a"), b("fa")).addColumn(G, b("b"), b("gb")));
      t.put(new Put(b("local")).addColumn(LOCAL, b("x"), b("stays")).addColumn(F, b("x"), b("ships")));
      byte[] big = new byte[5 * 1024 * 1024];
      Arrays.fill(big, (byte) 7);
      t.put(new Put(b("big")).addColumn(F, b("q"), big));
      // Every delete kind.
      for (String row : List.of("d1", "d2", "d3", "d4", "d5")) {
        t.put(new Put(b(row)).addColumn(F, b("a"), 10, b("a10")).addColumn(F, b("a"), 20, b("a20"))
            .addColumn(F, b("b"), 10, b("b10")).addColumn(G, b("c"), 10, b("c10")));
      }
      t.delete(new Delete(b("d1")).addColumn(F, b("a"), 20));   // one version
      t.delete(new Delete(b("d2")).addColumns(F, b("a"), 15));  // versions <= 15
      t.delete(new Delete(b("d3")).addFamily(F));               // the family
      t.delete(new Delete(b("d4")).addFamilyVersion(F, 10));     // the family at 10
      t.delete(new Delete(b("d5")));                             // the row
      t.delete(new Delete(b("v")).addColumn(F, b("q")));         // the latest version
      // Read-modify-writes ship as the puts of their results.
      for (int i = 0; i < 5; i++) {
        t.increment(new Increment(b("counter")).addColumn(F, b("n"), 2));
      }
      t.append(new Append(b("text")).addColumn(F, b("s"), b("ab")));
      t.append(new Append(b("text")).addColumn(F, b("s"), b("cd")));
      t.checkAndMutate(b("cas"), F).qualifier(b("c")).ifNotExists()
          .thenPut(new Put(b("cas")).addColumn(F, b("c"), b("first")));
      t.checkAndMutate(b("cas"), F).qualifier(b("c")).ifEquals(b("first"))
          .thenPut(new Put(b("cas")).addColumn(F, b("c"), b("second")));
      // A batch across rows.
      List<Put> batch = new ArrayList<>();
      for (int i = 0; i < 500; i++) {
        batch.add(new Put(b(String.format("batch%04d", i))).addColumn(G, b("i"), b(Integer.toString(i))));
      }
      t.put(batch);
    }

    List<String> want = everything(source, name, false);
    List<String> got = new ArrayList<>();
    long deadline = System.nanoTime() + 180_000_000_000L;
    while (System.nanoTime() < deadline) {
      got = everything(sink, name, false);
      if (got.equals(want)) {
        break;
      }
      Thread.sleep(500);
    }
    System.out.println("replication: " + want.size() + " cells on HBase, " + got.size() + " in Cellar");
    assertEquals(want, got, "every version of every replicated cell arrives");
    assertTrue(want.size() > 500, "the workload's cells are there to compare: " + want.size());
    assertTrue(want.stream().anyMatch(c -> c.startsWith("text/f:s@") && c.endsWith("=abcd")), want.toString());
    assertTrue(want.stream().anyMatch(c -> c.startsWith("cas/f:c@") && c.endsWith("=second")), want.toString());
    assertTrue(want.stream().noneMatch(c -> c.startsWith("d5/")), "the deleted row is gone");
    // The family with scope 0 stayed on HBase (Cellar's table does not even have it).
    try (Table t = source.getTable(name)) {
      assertEquals("stays", Bytes.toString(t.get(new org.apache.hadoop.hbase.client.Get(b("local")))
          .getValue(LOCAL, b("x"))));
    }
    sourceAdmin.removeReplicationPeer(peer);
    sourceAdmin.disableTable(name);
    sourceAdmin.deleteTable(name);
    sinkAdmin.disableTable(name);
    sinkAdmin.deleteTable(name);
  }
}
