import java.io.File;
import java.util.Random;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
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
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;
import org.apache.hadoop.hbase.replication.ReplicationPeerConfig;
import org.apache.hadoop.hbase.util.Bytes;

/**
 * The HBase side of the move-in runbook (scripts/hbase-move-in.sh, docs/migration.md), with
 * HBase 2.6.4's own client and nothing else: run as {@code java -cp "$HBASE_LIB/*"
 * MoveIn.java COMMAND HBASE_HOST:PORT ...}.
 *
 * <ul>
 *   <li>{@code setup ADDR PEER_KEY}: creates {@code usertable} (family {@code family}, YCSB's)
 *       and {@code orders} (families {@code f}, 3 versions, and {@code g}), both with
 *       {@code REPLICATION_SCOPE => 1} and split keys, and adds peer {@code cellar} with
 *       PEER_KEY as its cluster key, disabled (runbook step 2).
 *   <li>{@code churn ADDR STOP_FILE SECONDS}: writes to {@code orders} until STOP_FILE exists
 *       (at most SECONDS): puts (server time and explicit timestamps, both families),
 *       increments, appends, and deletes of every kind; prints its counts.
 *   <li>{@code snapshot ADDR TABLE NAME}: HBase's {@code snapshot 'TABLE', 'NAME'}.
 *   <li>{@code enable-peer ADDR} / {@code remove-peer ADDR}: steps 5 and 8.
 *   <li>{@code create-usertable ADDR [SCOPE]}: {@code usertable} alone (scope 1 when SCOPE is
 *       {@code replicated}), for scripts/bench-replication.sh's source and sinks.
 *   <li>{@code add-peer ADDR ID PEER_KEY}: a peer added enabled.
 * </ul>
 */
public class MoveIn {
  static final byte[] F = Bytes.toBytes("f");
  static final byte[] G = Bytes.toBytes("g");
  static final String PEER = "cellar";

  public static void main(String[] args) throws Exception {
    if (args.length < 2) {
      System.err.println("usage: MoveIn setup|churn|snapshot|enable-peer|remove-peer|create-usertable|add-peer HBASE_HOST:PORT ...");
      System.exit(2);
    }
    Configuration conf = HBaseConfiguration.create();
    conf.set("hbase.client.registry.impl", "org.apache.hadoop.hbase.client.RpcConnectionRegistry");
    conf.set("hbase.client.bootstrap.servers", args[1]);
    conf.setInt("hbase.client.retries.number", 10);
    try (Connection c = ConnectionFactory.createConnection(conf); Admin admin = c.getAdmin()) {
      switch (args[0]) {
        case "setup":
          setup(admin, args[2]);
          break;
        case "churn":
          churn(c, new File(args[2]), Long.parseLong(args[3]));
          break;
        case "snapshot":
          admin.snapshot(args[3], TableName.valueOf(args[2]));
          System.out.println("snapshot " + args[3] + " of " + args[2] + " taken");
          break;
        case "enable-peer":
          admin.enableReplicationPeer(PEER);
          System.out.println("peer " + PEER + " enabled");
          break;
        case "create-usertable":
          admin.createTable(usertable(args.length > 2 && args[2].equals("replicated")),
              new byte[][] {Bytes.toBytes("user2"), Bytes.toBytes("user5"), Bytes.toBytes("user8")});
          System.out.println("table usertable created");
          break;
        case "add-peer":
          admin.addReplicationPeer(args[2], ReplicationPeerConfig.newBuilder().setClusterKey(args[3]).build(), true);
          System.out.println("peer " + args[2] + " added");
          break;
        case "remove-peer":
          admin.removeReplicationPeer(PEER);
          System.out.println("peer " + PEER + " removed");
          break;
        default:
          System.err.println("unknown command " + args[0]);
          System.exit(2);
      }
    }
  }

  static org.apache.hadoop.hbase.client.TableDescriptor usertable(boolean replicated) {
    return TableDescriptorBuilder.newBuilder(TableName.valueOf("usertable"))
        .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(Bytes.toBytes("family"))
            .setScope(replicated ? HConstants.REPLICATION_SCOPE_GLOBAL : HConstants.REPLICATION_SCOPE_LOCAL)
            .build())
        .build();
  }

  static void setup(Admin admin, String peerKey) throws Exception {
    admin.createTable(usertable(true),
        new byte[][] {Bytes.toBytes("user2"), Bytes.toBytes("user5"), Bytes.toBytes("user8")});
    admin.createTable(
        TableDescriptorBuilder.newBuilder(TableName.valueOf("orders"))
            .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(F).setMaxVersions(3)
                .setScope(HConstants.REPLICATION_SCOPE_GLOBAL).build())
            .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(G)
                .setScope(HConstants.REPLICATION_SCOPE_GLOBAL).build())
            .build(),
        new byte[][] {Bytes.toBytes("o0500"), Bytes.toBytes("o1000"), Bytes.toBytes("o1500")});
    admin.addReplicationPeer(PEER, ReplicationPeerConfig.newBuilder().setClusterKey(peerKey).build(), false);
    System.out.println("tables usertable and orders created, peer " + PEER + " added disabled");
  }

  static void churn(Connection c, File stop, long seconds) throws Exception {
    Random random = new Random(41);
    long deadline = System.currentTimeMillis() + seconds * 1000;
    long puts = 0, deletes = 0, increments = 0, appends = 0;
    try (Table t = c.getTable(TableName.valueOf("orders"))) {
      while (!stop.exists() && System.currentTimeMillis() < deadline) {
        byte[] row = Bytes.toBytes(String.format("o%04d", random.nextInt(2000)));
        byte[] q = Bytes.toBytes("q" + random.nextInt(4));
        int op = random.nextInt(100);
        if (op < 55) {
          Put p = new Put(row).addColumn(F, q, Bytes.toBytes("v" + random.nextInt(1_000_000)));
          if (random.nextBoolean()) {
            p.addColumn(G, q, 1_000_000L + random.nextInt(1000), Bytes.toBytes("g" + puts));
          }
          t.put(p);
          puts++;
        } else if (op < 65) {
          t.increment(new Increment(row).addColumn(F, Bytes.toBytes("n"), 1));
          increments++;
        } else if (op < 70) {
          t.append(new Append(row).addColumn(G, Bytes.toBytes("log"), Bytes.toBytes(".")));
          appends++;
        } else {
          Delete d = new Delete(row);
          switch (op % 5) {
            case 0: d.addColumn(F, q); break;            // the newest version
            case 1: d.addColumns(F, q); break;           // every version
            case 2: d.addFamily(G); break;               // the family
            case 3: d.addFamilyVersion(G, 1_000_000L + random.nextInt(1000)); break;
            default: break;                              // the whole row
          }
          t.delete(d);
          deletes++;
        }
      }
    }
    System.out.println("churn: " + puts + " puts, " + increments + " increments, " + appends
        + " appends, " + deletes + " deletes");
  }
}
