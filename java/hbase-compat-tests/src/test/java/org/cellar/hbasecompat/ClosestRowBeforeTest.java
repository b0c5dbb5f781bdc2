package org.cellar.hbasecompat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.List;
import org.apache.hadoop.hbase.HConstants;
import org.apache.hadoop.hbase.HRegionLocation;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.ClusterConnection;
import org.apache.hadoop.hbase.client.RegionLocator;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.exceptions.UnknownProtocolException;
import org.apache.hadoop.hbase.shaded.protobuf.ProtobufUtil;
import org.apache.hadoop.hbase.shaded.protobuf.generated.ClientProtos;
import org.apache.hadoop.hbase.util.Bytes;
import org.apache.hbase.thirdparty.com.google.protobuf.ByteString;
import org.apache.hbase.thirdparty.com.google.protobuf.ServiceException;
import org.junit.jupiter.api.Test;

/**
 * The region lookup of clients older than the current Java one (pre-1.0 Java clients,
 * OpenTSDB's AsyncHBase): a Get of hbase:meta with {@code closest_row_before} and family
 * {@code info}, sent here through HBase's own protobuf classes and RPC stub, as such a client
 * puts it on the wire. HBase 2.x's region server refuses it with UnknownProtocolException
 * (HBASE-20225), in a Get and in a Multi's Get action, and AsyncHBase then locates with a
 * reversed scan of meta from the same key. Run against Apache HBase and against Cellar, the
 * answers must be the same; cellar-cli's hbase_wire test sends the same bytes from Rust.
 */
class ClosestRowBeforeTest extends CompatTest {

  private static ClientProtos.Get closestRowBefore(byte[] row) {
    return ClientProtos.Get.newBuilder()
        .setRow(ByteString.copyFrom(row))
        .addColumn(ClientProtos.Column.newBuilder().setFamily(ByteString.copyFrom(b("info"))))
        .setClosestRowBefore(true)
        .build();
  }

  @Test
  void closestRowBeforeOnMetaIsRefusedWithUnknownProtocolAndAReversedScanLocates()
      throws Exception {
    try (TempTable t = TempTable.createSplit(connection, admin, "crb", new byte[][] {b("m")}, "f")) {
      TableName name = t.table().getName();
      // AsyncHBase's search key: "<table>,<row>,:" (':' sorts after every region id).
      byte[] key = Bytes.add(name.getName(), b(",q,:"));
      HRegionLocation meta;
      try (RegionLocator locator = connection.getRegionLocator(TableName.META_TABLE_NAME)) {
        meta = locator.getRegionLocation(HConstants.EMPTY_START_ROW);
      }
      ClientProtos.ClientService.BlockingInterface stub =
          ((ClusterConnection) connection).getClient(meta.getServerName());
      byte[] metaRegion = meta.getRegion().getRegionName();

      ClientProtos.GetRequest get = ClientProtos.GetRequest.newBuilder()
          .setRegion(region(metaRegion))
          .setGet(closestRowBefore(key))
          .build();
      ServiceException e = assertThrows(ServiceException.class, () -> stub.get(null, get));
      IOException remote = ProtobufUtil.handleRemoteException(e);
      System.out.println("closest_row_before Get answered: " + remote.getClass().getName()
          + ": " + remote.getMessage());
      assertTrue(remote instanceof UnknownProtocolException, remote.toString());

      ClientProtos.MultiRequest multi = ClientProtos.MultiRequest.newBuilder()
          .addRegionAction(ClientProtos.RegionAction.newBuilder()
              .setRegion(region(metaRegion))
              .addAction(ClientProtos.Action.newBuilder().setIndex(0)
                  .setGet(closestRowBefore(key))))
          .build();
      ClientProtos.MultiResponse resp = stub.multi(null, multi);
      List<ClientProtos.ResultOrException> roe =
          resp.getRegionActionResult(0).getResultOrExceptionList();
      assertEquals(1, roe.size(), resp.toString());
      assertTrue(roe.get(0).hasException(), resp.toString());
      System.out.println("closest_row_before Multi action answered: "
          + roe.get(0).getException().getName());
      assertEquals(UnknownProtocolException.class.getName(), roe.get(0).getException().getName());

      // AsyncHBase's fallback: a reversed scan of meta from the same key, family info, one row.
      try (Table metaTable = connection.getTable(TableName.META_TABLE_NAME)) {
        Scan scan = new Scan().withStartRow(key).setReversed(true).addFamily(b("info"))
            .setLimit(1);
        List<Result> found = results(metaTable, scan);
        assertEquals(1, found.size());
        String row = s(found.get(0).getRow());
        assertTrue(row.startsWith(name.getNameAsString() + ",m,"), row);
      }
    }
  }
}
