package org.cellar.hbasecompat;

import java.io.IOException;
import java.util.Locale;
import java.util.concurrent.ThreadLocalRandom;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptor;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.client.TableDescriptor;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;
import org.apache.hadoop.hbase.util.Bytes;

/**
 * A table with a unique name, created for one test and dropped when the test closes it, so
 * tests never see each other's data and a failed run leaves nothing behind on the server.
 */
final class TempTable implements AutoCloseable {
  private final Admin admin;
  private final TableName name;
  private final Table table;

  private TempTable(Admin admin, TableName name, Table table) {
    this.admin = admin;
    this.name = name;
    this.table = table;
  }

  /** A fresh, unused table name: the label plus a random suffix. */
  static TableName uniqueName(String label) {
    long suffix = ThreadLocalRandom.current().nextLong() & 0xffffffffffL;
    return TableName.valueOf("compat_" + label + "_" + Long.toHexString(suffix).toLowerCase(Locale.ROOT));
  }

  /** Families with default options (VERSIONS 1, no TTL). */
  static TempTable create(Connection conn, Admin admin, String label, String... families)
      throws IOException {
    return create(conn, admin, label, null, descriptors(families));
  }

  static TempTable createSplit(
      Connection conn, Admin admin, String label, byte[][] splits, String... families)
      throws IOException {
    return create(conn, admin, label, splits, descriptors(families));
  }

  static TempTable create(
      Connection conn, Admin admin, String label, byte[][] splits, ColumnFamilyDescriptor... families)
      throws IOException {
    TableName name = uniqueName(label);
    TableDescriptorBuilder builder = TableDescriptorBuilder.newBuilder(name);
    for (ColumnFamilyDescriptor f : families) {
      builder.setColumnFamily(f);
    }
    TableDescriptor desc = builder.build();
    if (splits == null || splits.length == 0) {
      admin.createTable(desc);
    } else {
      admin.createTable(desc, splits);
    }
    return new TempTable(admin, name, conn.getTable(name));
  }

  static ColumnFamilyDescriptor[] descriptors(String... families) {
    ColumnFamilyDescriptor[] out = new ColumnFamilyDescriptor[families.length];
    for (int i = 0; i < families.length; i++) {
      out[i] = ColumnFamilyDescriptorBuilder.of(Bytes.toBytes(families[i]));
    }
    return out;
  }

  TableName name() {
    return name;
  }

  Table table() {
    return table;
  }

  /** Disables (if needed) and drops the table; a test that already dropped it is fine. */
  @Override
  public void close() throws IOException {
    table.close();
    if (admin.tableExists(name)) {
      if (admin.isTableEnabled(name)) {
        admin.disableTable(name);
      }
      admin.deleteTable(name);
    }
  }
}
