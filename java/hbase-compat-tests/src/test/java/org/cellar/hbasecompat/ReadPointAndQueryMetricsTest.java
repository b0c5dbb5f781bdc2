package org.cellar.hbasecompat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.hbase.HRegionLocation;
import org.apache.hadoop.hbase.client.ClusterConnection;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.RegionLocator;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.ResultScanner;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.ipc.HBaseRpcController;
import org.apache.hadoop.hbase.shaded.protobuf.ResponseConverter;
import org.apache.hadoop.hbase.shaded.protobuf.generated.ClientProtos;
import org.apache.hadoop.hbase.shaded.protobuf.generated.HBaseProtos;
import org.apache.hbase.thirdparty.com.google.protobuf.ByteString;
import org.junit.jupiter.api.Test;

/**
 * Two fields of HBase 2.6's Scan and Get that its region server honours:
 * <ul>
 *   <li>{@code mvcc_read_point}: a region's scanner open answers its read point, and a Scan
 *       carrying it reads only the writes that were committed then. HBase's synchronous client
 *       sends it back when it reopens a scan in the same region (after a move or a lost
 *       scanner); here the requests go through HBase's own protobuf classes and RPC stub, as
 *       that client sends them.</li>
 *   <li>{@code query_metrics_enabled} (HBase 2.6.3+): each Result of a Get, or of a scanner's
 *       open, carries the store file block bytes its read went through
 *       ({@code Result.getMetrics()}).</li>
 * </ul>
 * Run against Apache HBase and against Cellar: the answers must be the same.
 */
class ReadPointAndQueryMetricsTest extends CompatTest {

  /** Each result as "row=value" (one column per row here). */
  private static List<String> values(Result[] results) {
    List<String> out = new ArrayList<>();
    for (Result r : results) {
      out.add(s(r.getRow()) + "=" + s(r.value()));
    }
    return out;
  }

  @Test
  void aScanReopenedWithItsReadPointReadsTheWritesItsFirstOpenSaw() throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "read_point", null,
        ColumnFamilyDescriptorBuilder.newBuilder(b("f")).setMaxVersions(3).build())) {
      t.table().put(new Put(b("r1")).addColumn(b("f"), b("q"), b("old")));
      t.table().put(new Put(b("r2")).addColumn(b("f"), b("q"), b("old")));
      HRegionLocation loc;
      try (RegionLocator locator = connection.getRegionLocator(t.name())) {
        loc = locator.getRegionLocation(b("r1"));
      }
      ClusterConnection cc = (ClusterConnection) connection;
      ClientProtos.ClientService.BlockingInterface stub = cc.getClient(loc.getServerName());
      HBaseProtos.RegionSpecifier spec = region(loc.getRegion().getRegionName());

      // Open, one row, closed at once: the answer carries the scanner's read point.
      HBaseRpcController c = cc.getRpcControllerFactory().newController();
      ClientProtos.ScanResponse first = stub.scan(c, ClientProtos.ScanRequest.newBuilder()
          .setRegion(spec).setScan(ClientProtos.Scan.newBuilder()).setNumberOfRows(1)
          .setCloseScanner(true).build());
      assertEquals(List.of("r1=old"), values(ResponseConverter.getResults(c.cellScanner(), first)));
      assertTrue(first.hasMvccReadPoint(), first.toString());
      long point = first.getMvccReadPoint();
      assertTrue(point > 0, first.toString());

      // Written after it: a newer version of r2 and a new row r3.
      t.table().put(new Put(b("r2")).addColumn(b("f"), b("q"), b("new")));
      t.table().put(new Put(b("r3")).addColumn(b("f"), b("q"), b("new")));

      // Reopened after r1 with the read point: only what the first open saw.
      ClientProtos.Scan.Builder afterR1 = ClientProtos.Scan.newBuilder()
          .setStartRow(ByteString.copyFrom(b("r1"))).setIncludeStartRow(false);
      c = cc.getRpcControllerFactory().newController();
      ClientProtos.ScanResponse reopened = stub.scan(c, ClientProtos.ScanRequest.newBuilder()
          .setRegion(spec).setScan(afterR1.clone().setMvccReadPoint(point)).setNumberOfRows(10)
          .setCloseScanner(true).build());
      assertEquals(List.of("r2=old"),
          values(ResponseConverter.getResults(c.cellScanner(), reopened)));
      assertEquals(point, reopened.getMvccReadPoint(), reopened.toString());

      // Without it: what is committed now, at a later read point.
      c = cc.getRpcControllerFactory().newController();
      ClientProtos.ScanResponse fresh = stub.scan(c, ClientProtos.ScanRequest.newBuilder()
          .setRegion(spec).setScan(afterR1.clone()).setNumberOfRows(10).setCloseScanner(true)
          .build());
      assertEquals(List.of("r2=new", "r3=new"),
          values(ResponseConverter.getResults(c.cellScanner(), fresh)));
      assertTrue(fresh.getMvccReadPoint() > point, fresh.toString());
    }
  }

  @Test
  void getsAndScanOpensReportTheBlockBytesTheyReadWhenAsked() throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "query_metrics", "f")) {
      for (String row : List.of("r1", "r2", "r3")) {
        t.table().put(new Put(b(row)).addColumn(b("f"), b("q"), b("v-" + row)));
      }
      Get asked = new Get(b("r1"));
      asked.setQueryMetricsEnabled(true);
      // Only in the memstore: no store file block read.
      Result fromMemory = t.table().get(asked);
      assertEquals("v-r1", s(fromMemory.value()));
      assertNotNull(fromMemory.getMetrics(), "metrics asked for");
      assertEquals(0L, fromMemory.getMetrics().getBlockBytesScanned());
      assertNull(t.table().get(new Get(b("r1"))).getMetrics(), "not asked, none");

      admin.flush(t.name());
      Result fromFile = t.table().get(asked);
      assertEquals("v-r1", s(fromFile.value()));
      long read = fromFile.getMetrics().getBlockBytesScanned();
      System.out.println("query metrics: a Get from a store file scanned " + read + " block bytes");
      assertTrue(read > 0, "a read from a store file scans its block");

      // A scan's first answer (all three rows): one QueryMetrics per Result, the first row's
      // read through the file's block.
      Scan scan = new Scan().setCaching(10);
      scan.setQueryMetricsEnabled(true);
      List<Result> results = new ArrayList<>();
      try (ResultScanner rs = t.table().getScanner(scan)) {
        for (Result r : rs) {
          results.add(r);
        }
      }
      assertEquals(3, results.size());
      for (Result r : results) {
        assertNotNull(r.getMetrics(), s(r.getRow()));
      }
      assertTrue(results.get(0).getMetrics().getBlockBytesScanned() > 0);
      try (ResultScanner rs = t.table().getScanner(new Scan().setCaching(10))) {
        for (Result r : rs) {
          assertNull(r.getMetrics(), "not asked, none");
        }
      }
    }
  }
}
