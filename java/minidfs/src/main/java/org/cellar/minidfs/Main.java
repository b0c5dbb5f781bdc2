package org.cellar.minidfs;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;

/**
 * Runs a MiniDFS on 127.0.0.1 until its standard input closes.
 *
 * <p>Usage: {@code Main BASE_DIR [NAMENODE_PORT [DATANODES [LEASE_SOFT_LIMIT_MS]]]} (port 0
 * picks a free one, 3 DataNodes by default; the lease soft limit, 60 s in HDFS, is how long a
 * dead writer's lease keeps others from appending to its file: tests shorten it). Prints {@code hdfs=hdfs://127.0.0.1:PORT} and then {@code Ready!}
 * once every DataNode is up. Commands on standard input, one per line: {@code stop-datanode N}
 * (stops DataNode N, as a crash would), {@code restart-datanode N} (starts a DataNode stopped
 * that way again, on its old port and storage), {@code quit}. DataNodes are numbered as they
 * were at start, whichever were stopped since. End of input also stops the cluster,
 * unless the environment has {@code MINIDFS_DAEMON=1}: then it runs until SIGTERM (scripts).
 */
public final class Main {
  private Main() {}

  public static void main(String[] args) throws Exception {
    if (args.length < 1) {
      System.err.println("usage: Main BASE_DIR [NAMENODE_PORT [DATANODES [LEASE_SOFT_LIMIT_MS]]]");
      System.exit(2);
    }
    File base = new File(args[0]);
    int port = args.length > 1 ? Integer.parseInt(args[1]) : 0;
    int dataNodes = args.length > 2 ? Integer.parseInt(args[2]) : 3;
    long softLimitMs = args.length > 3 ? Long.parseLong(args[3]) : 0;

    Configuration conf = new Configuration();
    conf.set("dfs.namenode.rpc-bind-host", "127.0.0.1");
    conf.set("dfs.namenode.http-address", "127.0.0.1:0");
    conf.set("dfs.datanode.address", "127.0.0.1:0");
    conf.set("dfs.datanode.http.address", "127.0.0.1:0");
    conf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
    conf.setInt("dfs.replication", Math.min(3, dataNodes));
    // A dead server's WAL is taken over by lease recovery: keep its soft limit short.
    conf.setLong("dfs.namenode.lease-recheck-interval-ms", 1000);
    conf.setBoolean("dfs.permissions.enabled", false);
    // A DataNode that stops heartbeating is soon "stale" and new blocks avoid it, as HBase
    // advises for its clusters (dfs.namenode.avoid.write.stale.datanode): the Rust client does
    // not exclude a dead DataNode from a new block's pipeline by itself.
    conf.setLong("dfs.heartbeat.interval", 1);
    conf.setBoolean("dfs.namenode.avoid.write.stale.datanode", true);
    conf.setBoolean("dfs.namenode.avoid.read.stale.datanode", true);
    conf.setLong("dfs.namenode.stale.datanode.interval", 3000);
    // Extra settings for experiments, e.g. MINIDFS_CONF=dfs.client-write-packet-size=262144
    // (the packet size the NameNode hands clients as a server default).
    String extra = System.getenv("MINIDFS_CONF");
    if (extra != null) {
      for (String pair : extra.split(",")) {
        if (pair.isBlank()) {
          continue;
        }
        int eq = pair.indexOf('=');
        if (eq <= 0) {
          System.err.println("MINIDFS_CONF: expected KEY=VALUE[,KEY=VALUE...], got '" + pair + "'");
          System.exit(2);
        }
        conf.set(pair.substring(0, eq).trim(), pair.substring(eq + 1).trim());
      }
    }

    // MINIDFS_KEEP=1: a restart on the name and data directories an earlier run left (the
    // same cluster and its files); else, or when there are none, a freshly formatted one.
    File[] nameDirs = base.listFiles((dir, name) -> name.startsWith("name"));
    boolean keep = "1".equals(System.getenv("MINIDFS_KEEP")) && nameDirs != null && nameDirs.length > 0;
    MiniDFSCluster cluster =
        new MiniDFSCluster.Builder(conf, base)
            .nameNodePort(port)
            .numDataNodes(dataNodes)
            .format(!keep)
            .build();
    cluster.waitActive();
    if (softLimitMs > 0) {
      cluster.setLeasePeriod(softLimitMs, Math.max(2 * softLimitMs, 20_000));
    }
    Runtime.getRuntime().addShutdownHook(new Thread(cluster::shutdown));
    System.out.println("hdfs=hdfs://127.0.0.1:" + cluster.getNameNodePort());
    System.out.println("Ready!");
    System.out.flush();

    if ("1".equals(System.getenv("MINIDFS_DAEMON"))) {
      Thread.currentThread().join();
    }
    Map<Integer, String> names = new HashMap<>();
    for (int i = 0; i < cluster.getDataNodes().size(); i++) {
      names.put(i, cluster.getDataNodes().get(i).getDisplayName());
    }
    Map<Integer, MiniDFSCluster.DataNodeProperties> stopped = new HashMap<>();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      line = line.trim();
      if (line.equals("quit")) {
        break;
      }
      if (line.startsWith("stop-datanode ")) {
        int n = Integer.parseInt(line.substring("stop-datanode ".length()).trim());
        // MiniDFSCluster renumbers its DataNodes as they stop: find N by its start-time name.
        String name = names.get(n);
        int index = 0;
        for (int i = 0; i < cluster.getDataNodes().size(); i++) {
          if (cluster.getDataNodes().get(i).getDisplayName().equals(name)) {
            index = i;
          }
        }
        stopped.put(n, cluster.stopDataNode(index));
        System.out.println("stopped datanode " + n);
        System.out.flush();
      } else if (line.startsWith("restart-datanode ")) {
        int n = Integer.parseInt(line.substring("restart-datanode ".length()).trim());
        MiniDFSCluster.DataNodeProperties props = stopped.remove(n);
        if (props == null) {
          System.out.println("datanode " + n + " is not stopped");
        } else {
          cluster.restartDataNode(props, true);
          cluster.waitActive();
          System.out.println("restarted datanode " + n);
        }
        System.out.flush();
      } else if (!line.isEmpty()) {
        System.out.println("unknown command: " + line);
        System.out.flush();
      }
    }
    cluster.shutdown();
    System.exit(0);
  }
}
