package org.cellar.ycsb;

import java.util.Map;
import java.util.Set;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.util.Bytes;
import site.ycsb.ByteArrayByteIterator;
import site.ycsb.ByteIterator;
import site.ycsb.Status;

/** How HBase results become YCSB fields and Status codes. */
final class Outcomes {
  private Outcomes() {}

  /**
   * Copies a row's cells into YCSB's field map (qualifier → value). An empty row is
   * NOT_FOUND, as YCSB expects for a read of a missing key.
   */
  static Status fillRow(Result row, Set<String> fields, Map<String, ByteIterator> out) {
    if (row == null || row.isEmpty()) {
      return Status.NOT_FOUND;
    }
    for (Cell cell : row.rawCells()) {
      String qualifier = Bytes.toString(CellUtil.cloneQualifier(cell));
      if (fields == null || fields.contains(qualifier)) {
        out.put(qualifier, new ByteArrayByteIterator(CellUtil.cloneValue(cell)));
      }
    }
    return Status.OK;
  }

  /** A write handed to the client-side buffer is not yet acknowledged by the server. */
  static Status written(boolean buffered) {
    return buffered ? Status.BATCHED_OK : Status.OK;
  }
}
