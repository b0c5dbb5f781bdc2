// HBase's own bulk load tool (BulkLoadHFilesTool, what `completebulkload` runs) loading HFiles
// written by HBase's own store file writer into a Cellar table with three regions: the tool
// splits the files at the region boundaries itself, then calls PrepareBulkLoad, BulkLoadHFile
// and CleanupBulkLoad on Cellar's HBase port. Every cell is then read back through HBase's
// client and compared with what was written. Prints "bulk-load: N cells compared".
//
// Run by scripts/hbase-bulk-load.sh:
//   java -cp CLASSPATH BulkLoadToCellar.java CELLAR_HBASE_ADDR WORK_DIR
import java.nio.charset.StandardCharsets;
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
import org.apache.hadoop.hbase.KeyValue;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
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
import org.apache.hadoop.hbase.tool.BulkLoadHFiles;
import org.apache.hadoop.hbase.util.Bytes;

public class BulkLoadToCellar {
  static final long T0 = 1_700_000_000_000L;

  public static void main(String[] args) throws Exception {
    if (args.length < 2 || args.length > 3) {
      System.err.println("usage: BulkLoadToCellar CELLAR_HBASE_ADDR WORK_DIR [INPUT_URL]");
      System.exit(2);
    }
    Configuration conf = HBaseConfiguration.create();
    conf.set("hbase.client.bootstrap.servers", args[0]);
    conf.set("hbase.client.registry.impl", "org.apache.hadoop.hbase.client.RpcConnectionRegistry");
    conf.setInt("hbase.client.retries.number", 3);
    // The HFiles are written under WORK_DIR/input, or under INPUT_URL (an hdfs:// directory:
    // the tool then names files on HDFS to the server).
    Path input;
    FileSystem fs;
    if (args.length > 2) {
      input = new Path(args[2]);
      fs = input.getFileSystem(conf);
    } else {
      input = new Path(new java.io.File(args[1], "input").getAbsolutePath());
      fs = FileSystem.getLocal(conf).getRawFileSystem();
    }
    TableName t = TableName.valueOf("bulk");
    List<KeyValue> written = new ArrayList<>();
    try (Connection c = ConnectionFactory.createConnection(conf); Admin admin = c.getAdmin()) {
      admin.createTable(TableDescriptorBuilder.newBuilder(t)
          .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(Bytes.toBytes("f"))
              .setMaxVersions(3).build())
          .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(Bytes.toBytes("g"))
              .setMaxVersions(3).build()).build(),
          new byte[][] {Bytes.toBytes("h"), Bytes.toBytes("p")});
      // Two files of f (their rows interleaved, versions in each) and one of g, every one
      // spanning all three regions: the tool must split them.
      written.addAll(write(conf, fs, new Path(input, "f/one"), "f", 0, 2));
      written.addAll(write(conf, fs, new Path(input, "f/two"), "f", 1, 2));
      written.addAll(write(conf, fs, new Path(input, "g/only"), "g", 0, 1));
      BulkLoadHFiles.create(conf).bulkLoad(t, input);
      Collections.sort(written, CellComparatorImpl.COMPARATOR);
      List<String> expected = new ArrayList<>();
      for (KeyValue kv : written) {
        expected.add(line(kv));
      }
      List<String> got = new ArrayList<>();
      try (Table table = c.getTable(t);
          ResultScanner s = table.getScanner(new Scan().readAllVersions())) {
        for (Result r : s) {
          for (Cell cell : r.rawCells()) {
            got.add(line(cell));
          }
        }
      }
      for (int i = 0; i < Math.min(expected.size(), got.size()); i++) {
        if (!expected.get(i).equals(got.get(i))) {
          throw new IllegalStateException("cell " + i + ": expected " + expected.get(i)
              + ", read " + got.get(i));
        }
      }
      if (expected.size() != got.size()) {
        throw new IllegalStateException("wrote " + expected.size() + " cells, read " + got.size());
      }
      int regions = admin.getRegions(t).size();
      if (regions != 3) {
        throw new IllegalStateException(regions + " regions");
      }
      System.out.println("bulk-load: " + got.size() + " cells compared");
    }
  }

  /** Rows 0..2999 whose number is `parity` mod `step`, each with two versions of one column. */
  static List<KeyValue> write(Configuration conf, FileSystem fs, Path path, String family,
      int parity, int step) throws Exception {
    byte[] fam = Bytes.toBytes(family);
    List<KeyValue> cells = new ArrayList<>();
    for (int i = parity; i < 3000; i += step) {
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

  static String line(Cell c) {
    return Bytes.toStringBinary(CellUtil.cloneRow(c)) + "/" + Bytes.toString(CellUtil.cloneFamily(c))
        + ":" + Bytes.toStringBinary(CellUtil.cloneQualifier(c)) + "/" + c.getTimestamp() + "/"
        + Bytes.toStringBinary(CellUtil.cloneValue(c));
  }
}
