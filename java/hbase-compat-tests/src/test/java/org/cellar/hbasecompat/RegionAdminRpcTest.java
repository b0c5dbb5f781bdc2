package org.cellar.hbasecompat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.hadoop.hbase.HRegionLocation;
import org.apache.hadoop.hbase.client.ClusterConnection;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.RegionInfoBuilder;
import org.apache.hadoop.hbase.client.RegionLocator;
import org.apache.hadoop.hbase.shaded.protobuf.generated.AdminProtos;
import org.junit.jupiter.api.Test;

/**
 * The region server's AdminService fields the Admin API does not reach, sent through HBase's
 * own protobuf classes and RPC stub: GetRegionInfo's best_split_row, splittable and mergeable,
 * FlushRegion's if_older_than_ts and last_flush_time.
 */
class RegionAdminRpcTest extends CompatTest {

  private static HRegionLocation only(TempTable t) throws Exception {
    try (RegionLocator locator = connection.getRegionLocator(t.name())) {
      return locator.getRegionLocation(b(""), true);
    }
  }

  private static AdminProtos.AdminService.BlockingInterface stub(HRegionLocation loc)
      throws Exception {
    return ((ClusterConnection) connection).getAdmin(loc.getServerName());
  }

  private static AdminProtos.GetRegionInfoResponse info(
      AdminProtos.AdminService.BlockingInterface stub, byte[] regionName, boolean bestSplitRow)
      throws Exception {
    AdminProtos.GetRegionInfoRequest.Builder req =
        AdminProtos.GetRegionInfoRequest.newBuilder().setRegion(region(regionName));
    if (bestSplitRow) {
      req.setBestSplitRow(true);
    }
    return stub.getRegionInfo(null, req.build());
  }

  @Test
  void regionInfoAnswersSplittableMergeableAndTheBestSplitRow() throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "rpc_split_row", "f")) {
      // One row: nothing to split at, even after the flush the call makes.
      t.table().put(new Put(b("a")).addColumn(b("f"), b("q"), b("v")));
      HRegionLocation loc = only(t);
      AdminProtos.AdminService.BlockingInterface stub = stub(loc);
      byte[] name = loc.getRegion().getRegionName();
      AdminProtos.GetRegionInfoResponse small = info(stub, name, true);
      System.out.println("one row: " + small.toString().replace('\n', ' '));
      assertTrue(small.hasSplittable() && small.getSplittable(), small.toString());
      assertTrue(small.hasMergeable() && small.getMergeable(), small.toString());
      assertFalse(small.hasBestSplitRow(), small.toString());

      // 180 rows of 1 KiB (several 64 KiB blocks, below the size at which Cellar's test
      // server splits a region on its own), in the memstore (HBase's): the call flushes and
      // answers a row strictly inside the region's rows.
      for (int i = 0; i < 180; i++) {
        t.table().put(new Put(b(String.format("r%03d", i))).addColumn(b("f"), b("q"),
            new byte[1024]));
      }
      AdminProtos.GetRegionInfoResponse big = info(stub, name, true);
      assertTrue(big.hasBestSplitRow(), big.toString());
      String row = s(big.getBestSplitRow().toByteArray());
      System.out.println("best split row of r000..r179: " + row);
      assertTrue(row.compareTo("r000") > 0 && row.compareTo("r179") <= 0, row);
      assertTrue(big.getSplittable() && big.getMergeable(), big.toString());
      assertEquals(s(loc.getRegion().getRegionName()),
          s(RegionInfoBuilder.newBuilder(t.name()).setRegionId(big.getRegionInfo().getRegionId())
              .build().getRegionName()));

      // Not asked: no row, the flags still set.
      AdminProtos.GetRegionInfoResponse plain = info(stub, name, false);
      assertFalse(plain.hasBestSplitRow(), plain.toString());
      assertTrue(plain.hasSplittable() && plain.hasMergeable(), plain.toString());
    }
  }

  @Test
  void metaIsNotSplittable() throws Exception {
    HRegionLocation meta;
    try (RegionLocator locator = connection.getRegionLocator(
        org.apache.hadoop.hbase.TableName.META_TABLE_NAME)) {
      meta = locator.getRegionLocation(b(""));
    }
    AdminProtos.GetRegionInfoResponse r =
        info(stub(meta), meta.getRegion().getRegionName(), true);
    System.out.println("meta: " + r.toString().replace('\n', ' '));
    assertTrue(r.hasSplittable() && !r.getSplittable(), r.toString());
    assertTrue(r.hasMergeable(), r.toString());
    assertFalse(r.hasBestSplitRow(), r.toString());
  }

  private static AdminProtos.FlushRegionResponse flush(
      AdminProtos.AdminService.BlockingInterface stub, byte[] name, Long ifOlderThan)
      throws Exception {
    AdminProtos.FlushRegionRequest.Builder req =
        AdminProtos.FlushRegionRequest.newBuilder().setRegion(region(name));
    if (ifOlderThan != null) {
      req.setIfOlderThanTs(ifOlderThan);
    }
    return stub.flushRegion(null, req.build());
  }

  @Test
  void flushIfOlderThanFlushesOnlyRegionsFlushedBeforeAndAnswersTheLastFlushTime()
      throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "rpc_flush_ts", "f")) {
      t.table().put(new Put(b("a")).addColumn(b("f"), b("q"), b("v")));
      HRegionLocation loc = only(t);
      AdminProtos.AdminService.BlockingInterface stub = stub(loc);
      byte[] name = loc.getRegion().getRegionName();

      // Never flushed: the last flush time is when the region opened, not older than 1.
      AdminProtos.FlushRegionResponse skipped = flush(stub, name, 1L);
      System.out.println("not older than 1: " + skipped.toString().replace('\n', ' '));
      assertFalse(skipped.hasFlushed(), skipped.toString());
      long opened = skipped.getLastFlushTime();
      assertTrue(opened > 0 && opened <= System.currentTimeMillis(), skipped.toString());

      // Older than now + 1 h: flushed, the flush's time answered.
      long before = System.currentTimeMillis();
      AdminProtos.FlushRegionResponse done =
          flush(stub, name, System.currentTimeMillis() + 3_600_000L);
      System.out.println("older than in an hour: " + done.toString().replace('\n', ' '));
      assertTrue(done.hasFlushed() && done.getFlushed(), done.toString());
      long flushedAt = done.getLastFlushTime();
      assertTrue(flushedAt >= before - 1000 && flushedAt <= System.currentTimeMillis(),
          flushedAt + " not within the call (" + before + ")");
      assertTrue(flushedAt >= opened);

      // Not older than its own flush time: not flushed again, the same time answered.
      AdminProtos.FlushRegionResponse again = flush(stub, name, flushedAt);
      assertFalse(again.hasFlushed(), again.toString());
      assertEquals(flushedAt, again.getLastFlushTime());

      // A plain flush of an empty memstore: nothing flushed, the time unchanged.
      Thread.sleep(5);
      AdminProtos.FlushRegionResponse empty = flush(stub, name, null);
      System.out.println("empty memstore: " + empty.toString().replace('\n', ' '));
      assertTrue(empty.hasFlushed() && !empty.getFlushed(), empty.toString());
      assertEquals(flushedAt, empty.getLastFlushTime());
    }
  }
}
