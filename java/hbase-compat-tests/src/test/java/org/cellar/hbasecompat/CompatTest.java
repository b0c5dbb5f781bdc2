package org.cellar.hbasecompat;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.ResultScanner;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.shaded.protobuf.generated.HBaseProtos;
import org.apache.hadoop.hbase.util.Bytes;
import org.apache.hbase.thirdparty.com.google.protobuf.ByteString;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** One client connection per test class, and the small helpers every test class uses. */
abstract class CompatTest {
  static Connection connection;
  static Admin admin;

  @BeforeAll
  static void connect() throws IOException {
    connection = Cluster.connect();
    admin = connection.getAdmin();
  }

  @AfterAll
  static void disconnect() throws IOException {
    if (admin != null) {
      admin.close();
      admin = null;
    }
    if (connection != null) {
      connection.close();
      connection = null;
    }
  }

  /** A region named as HBase's own RPC stubs name it (RegionSpecifier REGION_NAME). */
  static HBaseProtos.RegionSpecifier region(byte[] name) {
    return HBaseProtos.RegionSpecifier.newBuilder()
        .setType(HBaseProtos.RegionSpecifier.RegionSpecifierType.REGION_NAME)
        .setValue(ByteString.copyFrom(name))
        .build();
  }

  static byte[] b(String s) {
    return Bytes.toBytes(s);
  }

  static String s(byte[] bytes) {
    return bytes == null ? null : Bytes.toString(bytes);
  }

  /** Row keys of a scan, in the order the server returned them. */
  static List<String> rows(Table table, Scan scan) throws IOException {
    List<String> rows = new ArrayList<>();
    try (ResultScanner scanner = table.getScanner(scan)) {
      for (Result r : scanner) {
        rows.add(s(r.getRow()));
      }
    }
    return rows;
  }

  /** Every Result of a scan (a row may come as several Results when batching). */
  static List<Result> results(Table table, Scan scan) throws IOException {
    List<Result> out = new ArrayList<>();
    try (ResultScanner scanner = table.getScanner(scan)) {
      for (Result r : scanner) {
        out.add(r);
      }
    }
    return out;
  }

  /** A cell as "family:qualifier=value", for exact comparisons of whole results. */
  static String cell(Cell c) {
    return s(CellUtil.cloneFamily(c)) + ":" + s(CellUtil.cloneQualifier(c)) + "="
        + s(CellUtil.cloneValue(c));
  }

  static List<String> cells(Result r) {
    List<String> out = new ArrayList<>();
    for (Cell c : r.rawCells()) {
      out.add(cell(c));
    }
    return out;
  }

  /** "row0".."row{n-1}" zero-padded to width. */
  static List<String> keys(String prefix, int from, int to, int width) {
    List<String> out = new ArrayList<>();
    for (int i = from; i < to; i++) {
      out.add(prefix + String.format("%0" + width + "d", i));
    }
    return out;
  }
}
