package org.cellar.ycsb;

import java.io.IOException;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.Vector;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.BufferedMutator;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.Delete;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Mutation;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.ResultScanner;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.util.Bytes;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;

/**
 * YCSB binding for Apache HBase 2.x. YCSB makes one instance per client thread; the instances
 * share one {@link Connection} and each keeps its own {@link Table}. Every YCSB call is one
 * RPC, unless {@code clientbuffering=true}, which sends writes through a BufferedMutator.
 *
 * <p>Connect with {@code -p hbase.zookeeper.quorum=HOST} or, without ZooKeeper, {@code -p
 * hbase.client.registry.impl=org.apache.hadoop.hbase.client.RpcConnectionRegistry -p
 * hbase.client.bootstrap.servers=HOST:PORT}; every {@code hbase.*} property is passed on.
 */
public class HBaseClient extends DB {
  private static final Object SHARED_LOCK = new Object();
  private static RefCounted<Connection> shared;

  private ClientSettings settings;
  private Connection connection;
  private String tableName;
  private Table table;
  private BufferedMutator mutator;

  @Override
  public void init() throws DBException {
    try {
      settings = ClientSettings.from(getProperties());
      RefCounted<Connection> conn;
      synchronized (SHARED_LOCK) {
        if (shared == null) {
          var conf = ClientSettings.hbaseConfiguration(getProperties());
          shared = new RefCounted<>(() -> ConnectionFactory.createConnection(conf));
        }
        conn = shared;
      }
      connection = conn.acquire();
    } catch (IllegalArgumentException e) {
      throw new DBException("HBase binding: " + e.getMessage(), e);
    } catch (IOException e) {
      throw new DBException("HBase binding: cannot connect to HBase: " + e.getMessage(), e);
    }
  }

  @Override
  public void cleanup() throws DBException {
    try {
      closeTable();
    } catch (IOException e) {
      throw new DBException("HBase binding: flushing/closing table " + tableName + ": " + e, e);
    } finally {
      if (connection != null) {
        connection = null;
        try {
          shared.release();
        } catch (IOException e) {
          throw new DBException("HBase binding: closing the shared connection: " + e, e);
        }
      }
    }
  }

  /** Opens (or switches to) the Table and, when buffering, the BufferedMutator for `name`. */
  private void useTable(String name) throws IOException {
    if (name.equals(tableName)) {
      return;
    }
    closeTable();
    TableName tn;
    try {
      tn = TableName.valueOf(name);
    } catch (IllegalArgumentException e) {
      throw new IOException("invalid HBase table name '" + name + "': " + e.getMessage(), e);
    }
    table = connection.getTable(tn);
    if (settings.clientBuffering()) {
      mutator = connection.getBufferedMutator(tn);
    }
    tableName = name;
  }

  private void closeTable() throws IOException {
    try {
      if (mutator != null) {
        mutator.close(); // flushes what is still buffered
      }
    } finally {
      mutator = null;
      if (table != null) {
        table.close();
      }
      table = null;
      tableName = null;
    }
  }

  @Override
  public Status read(String tbl, String key, Set<String> fields, Map<String, ByteIterator> result) {
    try {
      useTable(tbl);
      Get get = new Get(Bytes.toBytes(key));
      byte[] family = settings.family();
      if (fields == null) {
        get.addFamily(family);
      } else {
        for (String field : fields) {
          get.addColumn(family, Bytes.toBytes(field));
        }
      }
      return Outcomes.fillRow(table.get(get), fields, result);
    } catch (IOException e) {
      return failed("read", tbl, key, e);
    }
  }

  @Override
  public Status scan(String tbl, String startkey, int recordcount, Set<String> fields,
      Vector<HashMap<String, ByteIterator>> result) {
    try {
      useTable(tbl);
      Scan scan = new Scan().withStartRow(Bytes.toBytes(startkey)).setLimit(recordcount);
      scan.setCaching(recordcount);
      byte[] family = settings.family();
      if (fields == null) {
        scan.addFamily(family);
      } else {
        for (String field : fields) {
          scan.addColumn(family, Bytes.toBytes(field));
        }
      }
      try (ResultScanner scanner = table.getScanner(scan)) {
        for (Result row : scanner) {
          HashMap<String, ByteIterator> values = new HashMap<>();
          Outcomes.fillRow(row, fields, values);
          result.add(values);
          if (result.size() >= recordcount) {
            break;
          }
        }
      }
      return Status.OK;
    } catch (IOException e) {
      return failed("scan", tbl, startkey, e);
    }
  }

  @Override
  public Status update(String tbl, String key, Map<String, ByteIterator> values) {
    return put("update", tbl, key, values);
  }

  @Override
  public Status insert(String tbl, String key, Map<String, ByteIterator> values) {
    return put("insert", tbl, key, values);
  }

  private Status put(String op, String tbl, String key, Map<String, ByteIterator> values) {
    try {
      useTable(tbl);
      Put put = new Put(Bytes.toBytes(key));
      put.setDurability(settings.durability());
      byte[] family = settings.family();
      for (Map.Entry<String, ByteIterator> field : values.entrySet()) {
        put.addColumn(family, Bytes.toBytes(field.getKey()), field.getValue().toArray());
      }
      return mutate(put);
    } catch (IOException e) {
      return failed(op, tbl, key, e);
    }
  }

  @Override
  public Status delete(String tbl, String key) {
    try {
      useTable(tbl);
      Delete delete = new Delete(Bytes.toBytes(key));
      delete.setDurability(settings.durability());
      return mutate(delete);
    } catch (IOException e) {
      return failed("delete", tbl, key, e);
    }
  }

  private Status mutate(Mutation mutation) throws IOException {
    if (mutator != null) {
      mutator.mutate(mutation);
      return Outcomes.written(true);
    }
    if (mutation instanceof Put) {
      table.put((Put) mutation);
    } else {
      table.delete((Delete) mutation);
    }
    return Outcomes.written(false);
  }

  private static Status failed(String op, String tbl, String key, IOException e) {
    System.err.println("HBase binding: " + op + " of key " + key + " in table " + tbl
        + " failed: " + e.getMessage());
    return Status.ERROR;
  }
}
