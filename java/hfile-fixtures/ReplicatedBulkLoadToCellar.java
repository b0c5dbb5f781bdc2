// A bulk load into an Apache HBase 2.6.4 table replicated to Cellar, with HBase's own bulk-load
// replication (`hbase.replication.bulkload.enabled=true` and `hbase.replication.cluster.id` on
// the source, set by scripts/hbase-replication.sh): HFiles written by HBase's own store file
// writer are loaded into the source table by BulkLoadHFiles (what `completebulkload` runs),
// which splits them at the source's region boundary; the source then ships one bulk-load
// marker per region, and Cellar reads the files from the source's root directory (under its
// --bulk-load-dir). Cellar's table has other region boundaries than the source's. Puts before
// and after the bulk load, one of them at the coordinates of a file's cell (the file's value
// wins on both). Every version of every cell is then read from both through HBase's client and
// compared. Prints "replicated-bulk-load: N cells compared".
//
// Run by scripts/hbase-replication.sh:
//   java -cp HBASE_LIB/* ReplicatedBulkLoadToCellar.java SOURCE_ADDR CELLAR_ADDR PEER_KEY WORK_DIR
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellComparatorImpl;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.HConstants;
import org.apache.hadoop.hbase.KeyValue;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.ResultScanner;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;
import org.apache.hadoop.hbase.io.compress.Compression;
import org.apache.hadoop.hbase.io.encoding.DataBlockEncoding;
import org.apache.hadoop.hbase.io.hfile.CacheConfig;
import org.apache.hadoop.hbase.io.hfile.HFileContextBuilder;
import org.apache.hadoop.hbase.regionserver.BloomType;
import org.apache.hadoop.hbase.regionserver.StoreFileWriter;
import org.apache.hadoop.hbase.replication.ReplicationPeerConfig;
import org.apache.hadoop.hbase.tool.BulkLoadHFiles;
import org.apache.hadoop.hbase.util.Bytes;

public class ReplicatedBulkLoadToCellar {
  static final long T0 = 1_700_000_000_000L;
  static final int ROWS = 2000;
  static final String PEER = "cellar_bulk";

  public static void main(String[] args) throws Exception {
    if (args.length != 4) {
      System.err.println("usage: ReplicatedBulkLoadToCellar SOURCE_ADDR CELLAR_ADDR PEER_KEY WORK_DIR");
      System.exit(2);
    }
    Configuration sourceConf = client(args[0]);
    Configuration sinkConf = client(args[1]);
    String peerKey = args[2];
    FileSystem fs = FileSystem.getLocal(sourceConf).getRawFileSystem();
    Path input = new Path(new java.io.File(args[3], "replicated-bulk-input").getAbsolutePath());
    TableName t = TableName.valueOf("replicated_bulk");
    byte[] f = Bytes.toBytes("f");
    byte[] g = Bytes.toBytes("g");
    try (Connection source = ConnectionFactory.createConnection(sourceConf);
        Connection sink = ConnectionFactory.createConnection(sinkConf);
        Admin sourceAdmin = source.getAdmin();
        Admin sinkAdmin = sink.getAdmin()) {
      // Cellar: three regions; the source: two, split elsewhere.
      sinkAdmin.createTable(TableDescriptorBuilder.newBuilder(t)
          .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(f).setMaxVersions(3).build())
          .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(g).setMaxVersions(3).build())
          .build(), new byte[][] {Bytes.toBytes("h"), Bytes.toBytes("p")});
      sourceAdmin.createTable(TableDescriptorBuilder.newBuilder(t)
          .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(f).setMaxVersions(3)
              .setScope(HConstants.REPLICATION_SCOPE_GLOBAL).build())
          .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(g).setMaxVersions(3)
              .setScope(HConstants.REPLICATION_SCOPE_GLOBAL).build())
          .build(), new byte[][] {Bytes.toBytes("m")});
      // A peer for this table only: the source's current WAL may hold edits of tables gone
      // from Cellar since (an earlier test's), which a peer of every table would ship first.
      sourceAdmin.addReplicationPeer(PEER, ReplicationPeerConfig.newBuilder().setClusterKey(peerKey)
          .setReplicateAllUserTables(false)
          .setTableCFsMap(Collections.singletonMap(t, null)).build());

      List<KeyValue> fOne = write(sourceConf, fs, new Path(input, "f/one"), "f", 0, 2);
      write(sourceConf, fs, new Path(input, "f/two"), "f", 1, 2);
      write(sourceConf, fs, new Path(input, "g/only"), "g", 0, 1);
      KeyValue shadowed = fOne.get(0);
      try (Table table = source.getTable(t)) {
        // Before the load: a put the file's cell at the same coordinates replaces, and one of
        // its own. After it: another.
        table.put(new Put(CellUtil.cloneRow(shadowed)).addColumn(f, CellUtil.cloneQualifier(shadowed),
            shadowed.getTimestamp(), Bytes.toBytes("replaced by the file")));
        table.put(new Put(Bytes.toBytes("zz-before")).addColumn(f, Bytes.toBytes("q"), Bytes.toBytes("1")));
        BulkLoadHFiles.create(sourceConf).bulkLoad(t, input);
        table.put(new Put(Bytes.toBytes("zz-after")).addColumn(g, Bytes.toBytes("q"), Bytes.toBytes("2")));
      }

      List<String> want = everything(source, t);
      String fileValue = Bytes.toStringBinary(CellUtil.cloneValue(shadowed));
      if (!want.contains(line(shadowed))) {
        throw new IllegalStateException("HBase shows another value than the file's " + fileValue);
      }
      List<String> got = new ArrayList<>();
      long deadline = System.nanoTime() + 180_000_000_000L;
      while (System.nanoTime() < deadline) {
        got = everything(sink, t);
        if (got.equals(want)) {
          break;
        }
        Thread.sleep(1000);
      }
      for (int i = 0; i < Math.min(want.size(), got.size()); i++) {
        if (!want.get(i).equals(got.get(i))) {
          throw new IllegalStateException("cell " + i + ": HBase has " + want.get(i)
              + ", Cellar " + got.get(i) + " (" + got.size() + " of " + want.size() + " cells)");
        }
      }
      if (want.size() != got.size()) {
        throw new IllegalStateException("HBase has " + want.size() + " cells, Cellar " + got.size());
      }
      if (want.size() < 3 * ROWS) {
        throw new IllegalStateException("only " + want.size() + " cells to compare");
      }
      sourceAdmin.removeReplicationPeer(PEER);
      sourceAdmin.disableTable(t);
      sourceAdmin.deleteTable(t);
      sinkAdmin.disableTable(t);
      sinkAdmin.deleteTable(t);
      System.out.println("replicated-bulk-load: " + got.size() + " cells compared");
    }
  }

  static Configuration client(String addr) {
    Configuration conf = HBaseConfiguration.create();
    conf.set("hbase.client.bootstrap.servers", addr);
    conf.set("hbase.client.registry.impl", "org.apache.hadoop.hbase.client.RpcConnectionRegistry");
    conf.setInt("hbase.client.retries.number", 5);
    return conf;
  }

  /** Rows 0..ROWS-1 whose number is `parity` mod `step`, each with two versions of one column. */
  static List<KeyValue> write(Configuration conf, FileSystem fs, Path path, String family,
      int parity, int step) throws Exception {
    byte[] fam = Bytes.toBytes(family);
    List<KeyValue> cells = new ArrayList<>();
    for (int i = parity; i < ROWS; i += step) {
      byte[] row = Bytes.toBytes(String.format("%c%05d", (char) ('a' + i % 26), i));
      for (int v = 1; v >= 0; v--) {
        cells.add(new KeyValue(row, fam, Bytes.toBytes("q"), T0 + i * 10 + v,
            Bytes.toBytes(family + i + "." + v)));
      }
    }
    Collections.sort(cells, CellComparatorImpl.COMPARATOR);
    StoreFileWriter w = new StoreFileWriter.Builder(conf, CacheConfig.DISABLED, fs)
        .withFilePath(path).withBloomType(BloomType.ROW)
        .withFileContext(new HFileContextBuilder().withBlockSize(4096)
            .withCompression(Compression.Algorithm.GZ)
            .withDataBlockEncoding(DataBlockEncoding.FAST_DIFF).withIncludesTags(true)
            .withIncludesMvcc(true).build())
        .build();
    for (KeyValue kv : cells) {
      w.append(kv);
    }
    w.appendMetadata(parity + 1, false);
    w.close();
    return cells;
  }

  /** Every version of every cell of the table. */
  static List<String> everything(Connection conn, TableName name) throws Exception {
    List<String> out = new ArrayList<>();
    try (Table table = conn.getTable(name);
        ResultScanner s = table.getScanner(new Scan().readAllVersions())) {
      for (Result r : s) {
        for (Cell cell : r.rawCells()) {
          out.add(line(cell));
        }
      }
    }
    return out;
  }

  static String line(Cell c) {
    return Bytes.toStringBinary(CellUtil.cloneRow(c)) + "/" + Bytes.toString(CellUtil.cloneFamily(c))
        + ":" + Bytes.toStringBinary(CellUtil.cloneQualifier(c)) + "/" + c.getTimestamp() + "/"
        + Bytes.toStringBinary(CellUtil.cloneValue(c));
  }
}
