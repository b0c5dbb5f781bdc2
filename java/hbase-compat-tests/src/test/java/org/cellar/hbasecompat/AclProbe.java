package org.cellar.hbasecompat;

import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.ResultScanner;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;
import org.apache.hadoop.hbase.security.access.AccessControlClient;
import org.apache.hadoop.hbase.security.access.Permission;
import org.apache.hadoop.hbase.security.access.UserPermission;
import org.apache.hadoop.hbase.util.Bytes;

/**
 * The Java client's side of the access-control cases (scripts/hbase-security.sh), run as the
 * user in HADOOP_USER_NAME (HBase's SIMPLE authentication), against a Cellar with
 * {@code security.authorization} on and {@code admin} a superuser.
 *
 * <pre>
 * grant  BOOTSTRAP   (as admin) create acl_t (f, g), write a row, grant bob READ on acl_t:f
 *                    with AccessControlClient.grant, list it with getUserPermissions
 * user   BOOTSTRAP   (as bob) read only f; writes, DDL and a read of g alone refused with
 *                    AccessDeniedException
 * revoke BOOTSTRAP   (as admin) AccessControlClient.revoke
 * denied BOOTSTRAP   (as bob) every read refused
 * </pre>
 *
 * Prints {@code acl-probe: passed} or {@code acl-probe: failed (why)}; exit 0 when passed.
 */
public final class AclProbe {
  static final TableName TABLE = TableName.valueOf("acl_t");
  static final byte[] F = Bytes.toBytes("f");
  static final byte[] G = Bytes.toBytes("g");
  static final byte[] Q = Bytes.toBytes("q");
  static final byte[] ROW = Bytes.toBytes("r1");

  private AclProbe() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 2) {
      System.err.println("usage: grant|user|revoke|denied BOOTSTRAP");
      System.exit(2);
    }
    Configuration conf = HBaseConfiguration.create();
    conf.set("hbase.client.registry.impl", "org.apache.hadoop.hbase.client.RpcConnectionRegistry");
    conf.set("hbase.client.bootstrap.servers", args[1]);
    conf.setInt("hbase.client.retries.number", 2);
    conf.setInt("hbase.client.pause", 100);
    conf.setInt("hbase.rpc.timeout", 15_000);
    conf.setInt("hbase.client.operation.timeout", 30_000);
    List<String> problems = new ArrayList<>();
    try (Connection conn = ConnectionFactory.createConnection(conf)) {
      switch (args[0]) {
        case "grant":
          grant(conn, problems);
          break;
        case "user":
          user(conn, problems);
          break;
        case "revoke":
          AccessControlClient.revoke(conn, TABLE, "bob", F, null, Permission.Action.READ);
          break;
        case "denied":
          expectDenied(problems, "get after the revoke", () -> read(conn, new Get(ROW)));
          break;
        default:
          problems.add("unknown mode " + args[0]);
      }
    } catch (Throwable t) {
      problems.add("unexpected " + chain(t));
    }
    System.out.println("acl-probe: " + (problems.isEmpty() ? "passed" : "failed " + problems));
    System.exit(problems.isEmpty() ? 0 : 1);
  }

  private static void grant(Connection conn, List<String> problems) throws Throwable {
    try (Admin admin = conn.getAdmin()) {
      if (!admin.tableExists(TABLE)) {
        admin.createTable(TableDescriptorBuilder.newBuilder(TABLE)
            .setColumnFamily(ColumnFamilyDescriptorBuilder.of(F))
            .setColumnFamily(ColumnFamilyDescriptorBuilder.of(G)).build());
      }
    }
    try (Table t = conn.getTable(TABLE)) {
      t.put(new Put(ROW).addColumn(F, Q, Bytes.toBytes("fv")).addColumn(G, Q, Bytes.toBytes("gv")));
    }
    AccessControlClient.grant(conn, TABLE, "bob", F, null, Permission.Action.READ);
    boolean listed = false;
    for (UserPermission p : AccessControlClient.getUserPermissions(conn, TABLE.getNameAsString())) {
      if (p.getUser().equals("bob") && p.getPermission().implies(Permission.Action.READ)) {
        listed = true;
      }
    }
    if (!listed) {
      problems.add("getUserPermissions does not list bob's READ on acl_t:f");
    }
  }

  private static void user(Connection conn, List<String> problems) throws Throwable {
    Result r = read(conn, new Get(ROW));
    for (Cell c : r.rawCells()) {
      if (!Bytes.equals(CellUtil.cloneFamily(c), F)) {
        problems.add("bob read a cell of family " + Bytes.toString(CellUtil.cloneFamily(c)));
      }
    }
    if (r.getValue(F, Q) == null) {
      problems.add("bob's get returned no f:q");
    }
    try (Table t = conn.getTable(TABLE); ResultScanner s = t.getScanner(new Scan())) {
      for (Result row : s) {
        if (row.getValue(G, Q) != null) {
          problems.add("bob's scan returned g:q");
        }
      }
    }
    expectDenied(problems, "put", () -> {
      try (Table t = conn.getTable(TABLE)) {
        t.put(new Put(ROW).addColumn(F, Q, Bytes.toBytes("x")));
      }
      return null;
    });
    expectDenied(problems, "get of g alone", () -> read(conn, new Get(ROW).addFamily(G)));
    expectDenied(problems, "disable", () -> {
      try (Admin admin = conn.getAdmin()) {
        admin.disableTable(TABLE);
      }
      return null;
    });
    expectDenied(problems, "grant", () -> {
      AccessControlClient.grant(conn, "bob", Permission.Action.ADMIN);
      return null;
    });
  }

  private static Result read(Connection conn, Get g) throws Exception {
    try (Table t = conn.getTable(TABLE)) {
      return t.get(g);
    }
  }

  interface Call {
    Object run() throws Throwable;
  }

  private static void expectDenied(List<String> problems, String what, Call c) {
    try {
      c.run();
      problems.add(what + " was allowed");
    } catch (Throwable t) {
      String chain = chain(t);
      if (!chain.contains("org.apache.hadoop.hbase.security.AccessDeniedException")) {
        problems.add(what + " failed without AccessDeniedException: " + chain);
      }
    }
  }

  private static String chain(Throwable e) {
    StringBuilder b = new StringBuilder();
    for (int i = 0; e != null && i < 12; i++, e = e.getCause()) {
      b.append(e.getClass().getName()).append(": ").append(e.getMessage()).append(" <- ");
    }
    return b.toString();
  }
}
