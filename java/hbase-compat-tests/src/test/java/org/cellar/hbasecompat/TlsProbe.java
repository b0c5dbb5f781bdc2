package org.cellar.hbasecompat;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;
import org.apache.hadoop.hbase.util.Bytes;

/**
 * The Java client's side of the TLS test (scripts/hbase-tls.sh): one connection attempt with
 * HBase 2.6's own TLS settings, not a JUnit test (the script starts Cellar with different
 * certificates between attempts).
 *
 * <pre>
 * BOOTSTRAP TRUSTSTORE|plain KEYSTORE|- EXPECT
 * </pre>
 *
 * <p>TRUSTSTORE is a PEM file of CA certificates ({@code hbase.rpc.tls.truststore.type=PEM}), or
 * {@code plain} for a client without TLS; KEYSTORE a PEM file with the client's key and
 * certificate ({@code hbase.rpc.tls.keystore.type=PEM}) or {@code -} for none. The probe creates
 * table {@code tls_t} if needed, puts a row and reads it back. EXPECT is {@code ok} (that must
 * work) or a word that must appear in the failure's cause chain (class names and messages).
 * Prints {@code tls-probe: passed|failed ...}; exit 0 when the outcome is the expected one.
 */
public final class TlsProbe {
  private TlsProbe() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 4) {
      System.err.println("usage: BOOTSTRAP TRUSTSTORE|plain KEYSTORE|- EXPECT");
      System.exit(2);
    }
    String bootstrap = args[0];
    String trust = args[1];
    String key = args[2];
    String expect = args[3];
    Configuration conf = HBaseConfiguration.create();
    conf.set("hbase.client.registry.impl", "org.apache.hadoop.hbase.client.RpcConnectionRegistry");
    conf.set("hbase.client.bootstrap.servers", bootstrap);
    conf.setInt("hbase.client.retries.number", 2);
    conf.setInt("hbase.client.pause", 100);
    conf.setInt("hbase.rpc.timeout", 15_000);
    conf.setInt("hbase.client.operation.timeout", 30_000);
    conf.setInt("hbase.client.meta.operation.timeout", 30_000);
    if (!trust.equals("plain")) {
      conf.setBoolean("hbase.client.netty.tls.enabled", true);
      conf.set("hbase.rpc.tls.truststore.location", trust);
      conf.set("hbase.rpc.tls.truststore.type", "PEM");
      if (!key.equals("-")) {
        conf.set("hbase.rpc.tls.keystore.location", key);
        conf.set("hbase.rpc.tls.keystore.type", "PEM");
      }
    }
    String outcome;
    try {
      roundTrip(conf);
      outcome = "ok";
    } catch (Exception e) {
      outcome = chain(e);
    }
    boolean passed =
        expect.equals("ok") ? outcome.equals("ok") : !outcome.equals("ok") && outcome.contains(expect);
    System.out.println("tls-probe: " + (passed ? "passed" : "failed") + " (expected " + expect
        + "; got " + outcome + ")");
    System.exit(passed ? 0 : 1);
  }

  private static void roundTrip(Configuration conf) throws IOException {
    TableName name = TableName.valueOf("tls_t");
    byte[] f = Bytes.toBytes("f");
    try (Connection conn = ConnectionFactory.createConnection(conf);
        Admin admin = conn.getAdmin()) {
      if (!admin.tableExists(name)) {
        admin.createTable(TableDescriptorBuilder.newBuilder(name)
            .setColumnFamily(ColumnFamilyDescriptorBuilder.of(f)).build());
      }
      try (Table t = conn.getTable(name)) {
        t.put(new Put(Bytes.toBytes("r")).addColumn(f, Bytes.toBytes("q"), Bytes.toBytes("v")));
        Result r = t.get(new Get(Bytes.toBytes("r")));
        byte[] v = r.getValue(f, Bytes.toBytes("q"));
        if (v == null || !Bytes.toString(v).equals("v")) {
          throw new IOException("read back " + (v == null ? "nothing" : Bytes.toString(v)));
        }
      }
    }
  }

  /** Every exception of the cause chain (and the suppressed ones), class and message. */
  private static String chain(Throwable e) {
    List<String> parts = new ArrayList<>();
    collect(e, parts, 0);
    return String.join(" <- ", parts);
  }

  private static void collect(Throwable e, List<String> parts, int depth) {
    if (e == null || depth > 12) {
      return;
    }
    parts.add(e.getClass().getName() + ": " + e.getMessage());
    for (Throwable s : e.getSuppressed()) {
      collect(s, parts, depth + 1);
    }
    if (e.getCause() != e) {
      collect(e.getCause(), parts, depth + 1);
    }
  }
}
