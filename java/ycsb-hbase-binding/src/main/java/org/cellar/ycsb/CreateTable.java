package org.cellar.ycsb;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;
import org.apache.hadoop.hbase.util.Bytes;

/**
 * Recreates the YCSB table, pre-split so the load spreads over regions from the first row.
 *
 * <p>Usage: {@code CreateTable key=value...} with {@code table} (default usertable), {@code
 * columnfamily} (default family), {@code splits} (comma list, default user1,...,user9) and any
 * {@code hbase.*} client property. An existing table of that name is dropped first.
 */
public final class CreateTable {
  private CreateTable() {}

  public static void main(String[] args) {
    try {
      run(parseArgs(args));
    } catch (IllegalArgumentException | IOException e) {
      System.err.println("CreateTable: " + e.getMessage());
      System.exit(1);
    }
  }

  static Properties parseArgs(String[] args) {
    Properties props = new Properties();
    for (String arg : args) {
      int eq = arg.indexOf('=');
      if (eq <= 0) {
        throw new IllegalArgumentException("argument '" + arg + "' is not key=value");
      }
      props.setProperty(arg.substring(0, eq), arg.substring(eq + 1));
    }
    return props;
  }

  /** Split points from `splits=a,b,c`; default user1..user9, i.e. ten regions. */
  static byte[][] splitPoints(Properties props) {
    List<byte[]> points = new ArrayList<>();
    String list = props.getProperty("splits");
    if (list == null) {
      for (int i = 1; i <= 9; i++) {
        points.add(Bytes.toBytes("user" + i));
      }
    } else {
      for (String p : list.split(",")) {
        if (!p.isBlank()) {
          points.add(Bytes.toBytes(p.trim()));
        }
      }
    }
    return points.toArray(new byte[0][]);
  }

  static void run(Properties props) throws IOException {
    TableName name = TableName.valueOf(props.getProperty("table", "usertable"));
    ClientSettings settings = ClientSettings.from(props);
    byte[][] splits = splitPoints(props);
    try (Connection conn =
            ConnectionFactory.createConnection(ClientSettings.hbaseConfiguration(props));
        Admin admin = conn.getAdmin()) {
      if (admin.tableExists(name)) {
        if (admin.isTableEnabled(name)) {
          admin.disableTable(name);
        }
        admin.deleteTable(name);
      }
      var table = TableDescriptorBuilder.newBuilder(name)
          .setColumnFamily(ColumnFamilyDescriptorBuilder.of(settings.family()))
          .build();
      if (splits.length == 0) {
        admin.createTable(table);
      } else {
        admin.createTable(table, splits);
      }
      System.out.println("created " + name + " with " + (splits.length + 1) + " regions");
    }
  }
}
