// A MapReduce bulk load as HBase's users run one: a job in Hadoop's local runner whose mapper
// generates cells, HFileOutputFormat2.configureIncrementalLoad (the table's descriptor and
// region boundaries read from the target server) partitioning and writing them as HFiles, one
// per family and region, then BulkLoadHFilesTool loading the job's output directory. The table
// has two families with different storage settings (Cellar refuses a DATA_BLOCK_ENCODING other
// than NONE, so both have none) and four regions; the data set is
// deterministic: 3,000 binary row keys (one equal to a split key), up to four versions of a
// column at explicit timestamps, a 1.5 MiB cell, and delete markers of every kind written into
// the HFiles as KeyValues of type Delete, DeleteColumn, DeleteFamily and DeleteFamilyVersion.
//
// Read back through HBase's client: a raw scan of all versions must return every cell and
// marker written, and a plain scan of all versions exactly the cells the markers leave visible,
// cell for cell. Prints "mapreduce-bulk-load: N cells compared" (both scans) and exits non-zero
// naming the first differing cells otherwise.
//
// Run by scripts/hbase-bulk-load.sh, with the jars of `scripts/hbase/fetch.sh mapreduce`:
//   java -cp CLASSPATH MapReduceBulkLoad.java HBASE_ADDR WORK_DIR
// The job's input, staging, temporary and output files all stay under WORK_DIR/mr, the HFiles
// in WORK_DIR/mr/hfiles (the server must be allowed to read them there: Cellar's
// --bulk-load-dir).
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.zip.CRC32;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellComparatorImpl;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.KeyValue;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptor;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.RegionLocator;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.ResultScanner;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.client.TableDescriptor;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;
import org.apache.hadoop.hbase.io.ImmutableBytesWritable;
import org.apache.hadoop.hbase.io.compress.Compression;
import org.apache.hadoop.hbase.io.hfile.CacheConfig;
import org.apache.hadoop.hbase.io.hfile.HFile;
import org.apache.hadoop.hbase.io.hfile.HFileContext;
import org.apache.hadoop.hbase.mapreduce.HFileOutputFormat2;
import org.apache.hadoop.hbase.regionserver.BloomType;
import org.apache.hadoop.hbase.tool.BulkLoadHFiles;
import org.apache.hadoop.hbase.util.Bytes;
import org.apache.hadoop.io.LongWritable;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.mapreduce.Job;
import org.apache.hadoop.mapreduce.Mapper;
import org.apache.hadoop.mapreduce.lib.input.FileInputFormat;
import org.apache.hadoop.mapreduce.lib.input.NLineInputFormat;
import org.apache.hadoop.mapreduce.lib.output.FileOutputFormat;

public class MapReduceBulkLoad {
  static final TableName TABLE = TableName.valueOf("mrbulk");
  static final byte[] A = Bytes.toBytes("a");
  static final byte[] B = Bytes.toBytes("b");
  static final int MAX_VERSIONS = 10;
  static final byte[][] SPLITS = {{0x40}, {(byte) 0x80}, {(byte) 0xc0}};
  static final int GROUPS = 40;
  static final int ROWS_PER_GROUP = 75;
  static final int BIG_ROW = 1234;
  static final int BIG_SIZE = 1536 * 1024 + 17;
  static final long T0 = 1_700_000_000_000L;

  public static void main(String[] args) throws Exception {
    if (args.length != 2) {
      System.err.println("usage: MapReduceBulkLoad HBASE_ADDR WORK_DIR");
      System.exit(2);
    }
    // The job's classes live in the source launcher's in-memory class loader: make it the one
    // every Configuration (and so the local runner's task threads) loads classes with.
    Thread.currentThread().setContextClassLoader(MapReduceBulkLoad.class.getClassLoader());
    File mr = new File(args[1], "mr").getAbsoluteFile();
    Configuration conf = HBaseConfiguration.create();
    conf.set("hbase.client.bootstrap.servers", args[0]);
    conf.set("hbase.client.registry.impl", "org.apache.hadoop.hbase.client.RpcConnectionRegistry");
    conf.setInt("hbase.client.retries.number", 5);
    conf.set("fs.defaultFS", "file:///");
    conf.set("mapreduce.framework.name", "local");
    conf.set("hadoop.tmp.dir", new File(mr, "tmp").getPath());
    conf.set("mapreduce.jobtracker.staging.root.dir", new File(mr, "staging").getPath());
    conf.set("mapreduce.cluster.local.dir", new File(mr, "local").getPath());
    conf.set("hbase.fs.tmp.dir", new File(mr, "hbase-staging").getPath());
    conf.setInt("mapreduce.task.io.sort.mb", 64);

    List<String> problems = new ArrayList<>();
    int compared = 0;
    try (Connection c = ConnectionFactory.createConnection(conf); Admin admin = c.getAdmin()) {
      TableDescriptor created = TableDescriptorBuilder.newBuilder(TABLE)
          .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(A).setMaxVersions(MAX_VERSIONS)
              .setCompressionType(Compression.Algorithm.SNAPPY).setBloomFilterType(BloomType.ROW)
              .setBlocksize(16 * 1024).build())
          .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(B).setMaxVersions(MAX_VERSIONS)
              .setCompressionType(Compression.Algorithm.NONE).setBloomFilterType(BloomType.ROWCOL)
              .setBlocksize(8 * 1024).build())
          .build();
      admin.createTable(created, SPLITS);

      Path out;
      try (Table table = c.getTable(TABLE); RegionLocator locator = c.getRegionLocator(TABLE)) {
        // What the job is configured with is what the server answers, as in a real job.
        TableDescriptor described = table.getDescriptor();
        for (ColumnFamilyDescriptor want : created.getColumnFamilies()) {
          ColumnFamilyDescriptor got = described.getColumnFamily(want.getName());
          String w = storage(want);
          String g = got == null ? "missing" : storage(got);
          if (!w.equals(g)) {
            problems.add("table descriptor: family " + want.getNameAsString() + " created as " + w
                + ", described as " + g);
          }
        }
        out = runJob(conf, mr, described, locator);
      }
      checkHFiles(conf, out, problems);

      Map<?, ?> loaded = BulkLoadHFiles.create(conf).bulkLoad(TABLE, out);
      if (loaded.isEmpty()) {
        problems.add("BulkLoadHFilesTool loaded nothing from " + out);
      }
      int regions = admin.getRegions(TABLE).size();
      if (regions != SPLITS.length + 1) {
        problems.add("the table has " + regions + " regions after the load, not " + (SPLITS.length + 1));
      }

      List<KeyValue> written = new ArrayList<>();
      for (int g = 0; g < GROUPS; g++) {
        written.addAll(group(g));
      }
      Collections.sort(written, CellComparatorImpl.COMPARATOR);
      List<KeyValue> seen = visible(written);
      long markers = written.stream().filter(kv -> kv.getType() != Cell.Type.Put).count();
      System.err.println("mapreduce-bulk-load: expecting " + written.size() + " cells raw ("
          + markers + " delete markers), " + seen.size() + " in a plain scan");
      try (Table table = c.getTable(TABLE)) {
        compared += compare("raw scan", lines(written), scan(table, true), problems);
        compared += compare("scan", lines(seen), scan(table, false), problems);
      }
    }
    if (!problems.isEmpty()) {
      for (String p : problems) {
        System.err.println("mapreduce-bulk-load: " + p);
      }
      System.out.println("mapreduce-bulk-load: " + compared + " cells compared, "
          + problems.size() + " problem(s), the first: " + problems.get(0));
      System.exit(1);
    }
    System.out.println("mapreduce-bulk-load: " + compared + " cells compared");
    // The local runner leaves non-daemon threads behind.
    System.exit(0);
  }

  /** Runs the job in Hadoop's local runner; returns its output directory. */
  static Path runJob(Configuration conf, File mr, TableDescriptor descriptor,
      RegionLocator locator) throws Exception {
    File input = new File(mr, "input");
    input.mkdirs();
    StringBuilder lines = new StringBuilder();
    for (int g = 0; g < GROUPS; g++) {
      lines.append(g).append('\n');
    }
    Files.write(new File(input, "groups.txt").toPath(),
        lines.toString().getBytes(StandardCharsets.UTF_8));
    Path out = new Path(new File(mr, "hfiles").getPath());

    Job job = Job.getInstance(conf, "cellar-mapreduce-bulk-load");
    job.getConfiguration().setClassLoader(MapReduceBulkLoad.class.getClassLoader());
    job.setMapperClass(Generate.class);
    job.setInputFormatClass(NLineInputFormat.class);
    NLineInputFormat.setNumLinesPerSplit(job, GROUPS / 4);
    FileInputFormat.addInputPath(job, new Path(input.getPath()));
    job.setMapOutputKeyClass(ImmutableBytesWritable.class);
    job.setMapOutputValueClass(KeyValue.class);
    HFileOutputFormat2.configureIncrementalLoad(job, descriptor, locator);
    FileOutputFormat.setOutputPath(job, out);
    if (job.getNumReduceTasks() != SPLITS.length + 1) {
      throw new IllegalStateException("configureIncrementalLoad set " + job.getNumReduceTasks()
          + " reducers for " + (SPLITS.length + 1) + " regions");
    }
    if (!job.waitForCompletion(false)) {
      throw new IllegalStateException("the MapReduce job failed: " + job.getStatus().getFailureInfo());
    }
    return out;
  }

  /** Every HFile the job wrote has its family's compression and encoding from the descriptor. */
  static void checkHFiles(Configuration conf, Path out, List<String> problems) throws IOException {
    FileSystem fs = out.getFileSystem(conf);
    Map<String, String> want = new TreeMap<>();
    want.put("a", "SNAPPY/NONE");
    want.put("b", "NONE/NONE");
    int files = 0;
    for (Map.Entry<String, String> e : want.entrySet()) {
      Path dir = new Path(out, e.getKey());
      if (!fs.exists(dir)) {
        problems.add("the job wrote no directory for family " + e.getKey());
        continue;
      }
      for (FileStatus f : fs.listStatus(dir)) {
        if (f.getPath().getName().startsWith("_") || f.getPath().getName().startsWith(".")) {
          continue;
        }
        files++;
        try (HFile.Reader r = HFile.createReader(fs, f.getPath(), CacheConfig.DISABLED, true, conf)) {
          HFileContext ctx = r.getFileContext();
          String got = ctx.getCompression() + "/" + ctx.getDataBlockEncoding();
          if (!got.equals(e.getValue())) {
            problems.add(f.getPath() + " is " + got + ", family " + e.getKey() + " is " + e.getValue());
          }
        }
      }
    }
    // One file per family and region: the partitioner split the rows at the regions' starts.
    if (files != want.size() * (SPLITS.length + 1)) {
      problems.add("the job wrote " + files + " HFiles, not " + want.size() * (SPLITS.length + 1));
    }
    System.err.println("mapreduce-bulk-load: the job wrote " + files + " HFiles under " + out);
  }

  static String storage(ColumnFamilyDescriptor d) {
    return "VERSIONS=" + d.getMaxVersions() + " COMPRESSION=" + d.getCompressionType()
        + " DATA_BLOCK_ENCODING=" + d.getDataBlockEncoding() + " BLOOMFILTER="
        + d.getBloomFilterType() + " BLOCKSIZE=" + d.getBlocksize();
  }

  /** The mapper: each input line names a group of rows, whose cells it emits. */
  public static class Generate extends Mapper<LongWritable, Text, ImmutableBytesWritable, KeyValue> {
    @Override
    protected void map(LongWritable offset, Text line, Context context)
        throws IOException, InterruptedException {
      for (KeyValue kv : group(Integer.parseInt(line.toString().trim()))) {
        context.write(new ImmutableBytesWritable(CellUtil.cloneRow(kv)), kv);
      }
    }
  }

  /** Row i's key: binary, 4 to 7 bytes; a few at the edges of the regions. */
  static byte[] rowKey(int i) {
    switch (i) {
      case 0: return new byte[] {0x00};
      case 1: return SPLITS[0].clone(); // a region's first row
      case 2: return new byte[] {0x7f, (byte) 0xff, (byte) 0xff, (byte) 0xff, (byte) 0xff};
      case 3: return new byte[] {(byte) 0xff, (byte) 0xff, (byte) 0xff, (byte) 0xff, (byte) 0xff, 0x00};
      default:
        byte[] row = new byte[4 + i % 4];
        Bytes.putInt(row, 0, i * 0x9E3779B1); // a bijection: distinct for distinct i
        for (int k = 4; k < row.length; k++) {
          row[k] = (byte) (k == 4 ? 0x00 : i * 31 + k);
        }
        return row;
    }
  }

  /** The cells of rows [g * ROWS_PER_GROUP, (g + 1) * ROWS_PER_GROUP), in no particular order. */
  static List<KeyValue> group(int g) {
    List<KeyValue> cells = new ArrayList<>();
    for (int i = g * ROWS_PER_GROUP; i < (g + 1) * ROWS_PER_GROUP; i++) {
      byte[] row = rowKey(i);
      long t = T0 + i * 100L;
      int versions = i % 4 + 1;
      for (int v = 1; v <= versions; v++) {
        cells.add(new KeyValue(row, A, Bytes.toBytes("q0"), t + v, Bytes.toBytes("a" + i + "." + v)));
      }
      cells.add(new KeyValue(row, A, Bytes.toBytes("q1"), t + 7,
          new byte[] {0x00, (byte) i, (byte) 0xff, (byte) (i >> 8)}));
      cells.add(new KeyValue(row, B, new byte[] {0x00, (byte) (i % 5)}, t + 3, Bytes.toBytes(i)));
      if (i % 10 == 0) {
        cells.add(new KeyValue(row, B, Bytes.toBytes("long"), t + 4, pattern(i, 4096)));
      }
      if (i == BIG_ROW) {
        cells.add(new KeyValue(row, B, Bytes.toBytes("big"), t + 5, pattern(i, BIG_SIZE)));
      }
      if (i % 50 == 3) { // masks q0's versions 1 and 2, not q1 (t + 7)
        cells.add(new KeyValue(row, A, null, t + 2, KeyValue.Type.DeleteFamily));
      }
      if (i % 37 == 5) { // masks every version of q0
        cells.add(new KeyValue(row, A, Bytes.toBytes("q0"), t + 10, KeyValue.Type.DeleteColumn));
      }
      if (i % 41 == 7) { // masks q0's version 1 only
        cells.add(new KeyValue(row, A, Bytes.toBytes("q0"), t + 1, KeyValue.Type.Delete));
      }
      if (i % 43 == 9) { // masks b's cells at t + 3 only
        cells.add(new KeyValue(row, B, null, t + 3, KeyValue.Type.DeleteFamilyVersion));
      }
      if (i % 47 == 11) { // masks nothing
        cells.add(new KeyValue(row, B, Bytes.toBytes("gone"), t + 6, KeyValue.Type.Delete));
      }
    }
    return cells;
  }

  static byte[] pattern(int seed, int size) {
    byte[] b = new byte[size];
    long x = seed * 0x9E3779B97F4A7C15L + 1;
    for (int k = 0; k < size; k++) {
      x ^= x << 13;
      x ^= x >>> 7;
      x ^= x << 17;
      b[k] = (byte) x;
    }
    return b;
  }

  /** What a reader sees of `sorted` (cells and markers in CellComparator order): HBase's rules. */
  static List<KeyValue> visible(List<KeyValue> sorted) {
    List<KeyValue> seen = new ArrayList<>();
    String store = null;
    long familyUpTo = Long.MIN_VALUE;
    Set<Long> familyVersions = new HashSet<>();
    String column = null;
    long columnUpTo = Long.MIN_VALUE;
    Set<Long> columnVersions = new HashSet<>();
    int versions = 0;
    for (KeyValue kv : sorted) {
      String s = Bytes.toStringBinary(CellUtil.cloneRow(kv)) + "/" + Bytes.toString(CellUtil.cloneFamily(kv));
      String col = s + ":" + Bytes.toStringBinary(CellUtil.cloneQualifier(kv));
      if (!s.equals(store)) {
        store = s;
        familyUpTo = Long.MIN_VALUE;
        familyVersions.clear();
        column = null;
      }
      if (!col.equals(column)) {
        column = col;
        columnUpTo = Long.MIN_VALUE;
        columnVersions.clear();
        versions = 0;
      }
      long ts = kv.getTimestamp();
      switch (kv.getType()) {
        case DeleteFamily: familyUpTo = Math.max(familyUpTo, ts); break;
        case DeleteFamilyVersion: familyVersions.add(ts); break;
        case DeleteColumn: columnUpTo = Math.max(columnUpTo, ts); break;
        case Delete: columnVersions.add(ts); break;
        default:
          if (ts > familyUpTo && ts > columnUpTo && !familyVersions.contains(ts)
              && !columnVersions.contains(ts) && versions++ < MAX_VERSIONS) {
            seen.add(kv);
          }
      }
    }
    return seen;
  }

  static List<String> scan(Table table, boolean raw) throws IOException {
    List<String> got = new ArrayList<>();
    try (ResultScanner s = table.getScanner(new Scan().setRaw(raw).readAllVersions())) {
      for (Result r : s) {
        for (Cell cell : r.rawCells()) {
          got.add(line(cell));
        }
      }
    }
    return got;
  }

  static List<String> lines(List<KeyValue> cells) {
    List<String> out = new ArrayList<>();
    for (KeyValue kv : cells) {
      out.add(line(kv));
    }
    return out;
  }

  /** Compares cell for cell; returns how many cells were compared. */
  static int compare(String what, List<String> expected, List<String> got, List<String> problems) {
    int n = Math.min(expected.size(), got.size());
    for (int i = 0; i < n; i++) {
      if (!expected.get(i).equals(got.get(i))) {
        problems.add(what + ": cell " + i + " differs: expected " + expected.get(i) + ", read "
            + got.get(i) + (i + 1 < n ? " (next expected " + expected.get(i + 1) + ", next read "
            + got.get(i + 1) + ")" : ""));
        return i;
      }
    }
    if (expected.size() != got.size()) {
      String first = expected.size() > got.size() ? "the first missing: " + expected.get(n)
          : "the first extra: " + got.get(n);
      problems.add(what + ": expected " + expected.size() + " cells, read " + got.size() + "; " + first);
    }
    return n;
  }

  /** row/family:qualifier/timestamp/type/value, a long value as its length and CRC-32. */
  static String line(Cell c) {
    byte[] value = CellUtil.cloneValue(c);
    String v;
    if (value.length > 64) {
      CRC32 crc = new CRC32();
      crc.update(value);
      v = value.length + " bytes, crc32 " + Long.toHexString(crc.getValue());
    } else {
      v = Bytes.toStringBinary(value);
    }
    return Bytes.toStringBinary(CellUtil.cloneRow(c)) + "/" + Bytes.toString(CellUtil.cloneFamily(c))
        + ":" + Bytes.toStringBinary(CellUtil.cloneQualifier(c)) + "/" + c.getTimestamp() + "/"
        + c.getType() + "/" + v;
  }
}
