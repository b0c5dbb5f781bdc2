package org.cellar.hbasecompat;

import java.io.IOException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;

/**
 * Where the server under test is and how the client reaches it: either the ZooKeeper-free
 * registry (-Dcellar.hbase.bootstrap=HOST:PORT) or, with -Dcellar.hbase.zookeeper=HOST:PORT,
 * nothing but {@code hbase.zookeeper.quorum}, the client's default registry reading the
 * server's znodes. Plus modest timeouts: a broken server fails a test within about a minute
 * instead of letting the client retry for tens of minutes (its defaults).
 */
final class Cluster {
  static final String BOOTSTRAP_PROPERTY = "cellar.hbase.bootstrap";
  static final String AUTOSPLIT_PROPERTY = "cellar.autosplit";
  static final String ZOOKEEPER_PROPERTY = "cellar.hbase.zookeeper";
  /** The cluster's parent znode (HBase's zookeeper.znode.parent), when not /hbase. */
  static final String ZNODE_PARENT_PROPERTY = "cellar.hbase.znode.parent";

  private Cluster() {}

  /** HOST:PORT of the server, from -Dcellar.hbase.bootstrap; a missing value is an error. */
  static String bootstrap() {
    String value = System.getProperty(BOOTSTRAP_PROPERTY);
    if (value == null || value.isBlank()) {
      throw new IllegalStateException(
          "system property " + BOOTSTRAP_PROPERTY + " is not set: run `mvn test -D"
              + BOOTSTRAP_PROPERTY + "=HOST:PORT` against a running server"
              + " (scripts/hbase-compat.sh starts one and sets it)");
    }
    return value.trim();
  }

  /**
   * True when the server splits regions by itself as they grow (Cellar with a small split
   * size); false (-Dcellar.autosplit=false) makes the split test ask for the split instead.
   */
  static boolean autoSplit() {
    return Boolean.parseBoolean(System.getProperty(AUTOSPLIT_PROPERTY, "true").trim());
  }

  static Configuration configuration() {
    Configuration conf = HBaseConfiguration.create();
    String quorum = System.getProperty(ZOOKEEPER_PROPERTY);
    if (quorum != null && !quorum.isBlank()) {
      // What an HBase user's hbase-site.xml says, and nothing else about where the cluster is.
      conf.set("hbase.zookeeper.quorum", quorum.trim());
      String parent = System.getProperty(ZNODE_PARENT_PROPERTY);
      if (parent != null && !parent.isBlank()) {
        conf.set("zookeeper.znode.parent", parent.trim());
      }
    } else {
      conf.set("hbase.client.registry.impl", "org.apache.hadoop.hbase.client.RpcConnectionRegistry");
      conf.set("hbase.client.bootstrap.servers", bootstrap());
    }
    conf.setInt("hbase.client.retries.number", 10);
    conf.setInt("hbase.client.pause", 200);
    conf.setInt("hbase.rpc.timeout", 30_000);
    conf.setInt("hbase.client.operation.timeout", 60_000);
    conf.setInt("hbase.client.meta.operation.timeout", 60_000);
    conf.setInt("hbase.client.scanner.timeout.period", 60_000);
    // How long a synchronous Admin call (create, disable, split...) waits for its procedure.
    conf.setInt("hbase.client.sync.wait.timeout.msec", 120_000);
    return conf;
  }

  static Connection connect() throws IOException {
    return ConnectionFactory.createConnection(configuration());
  }
}
