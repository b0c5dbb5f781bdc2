// Writes HFiles with Apache HBase's own store file writer (the one a flush uses), one per
// data block encoding and compression, all holding the same cells, and the listing of those
// cells as HBase's own reader reads them back (cells.txt; every file is read back and must give
// the same listing). Cellar's HFile reader (crates/hfile) is tested against both.
//
// Run by scripts/hfile-fixtures.sh: java -cp CLASSPATH HFileFixtures.java OUT_DIR [--large]
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.zip.CRC32;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hbase.ArrayBackedTag;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellComparatorImpl;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.KeyValue;
import org.apache.hadoop.hbase.Tag;
import org.apache.hadoop.hbase.io.compress.Compression;
import org.apache.hadoop.hbase.io.encoding.DataBlockEncoding;
import org.apache.hadoop.hbase.io.hfile.CacheConfig;
import org.apache.hadoop.hbase.io.hfile.HFile;
import org.apache.hadoop.hbase.io.hfile.HFileContext;
import org.apache.hadoop.hbase.io.hfile.HFileContextBuilder;
import org.apache.hadoop.hbase.io.hfile.HFileScanner;
import org.apache.hadoop.hbase.regionserver.BloomType;
import org.apache.hadoop.hbase.regionserver.StoreFileWriter;

public class HFileFixtures {
  static final byte[] FAMILY = "cf".getBytes(StandardCharsets.UTF_8);

  public static void main(String[] args) throws Exception {
    if (args.length < 1) {
      System.err.println("usage: HFileFixtures OUT_DIR [--large]");
      System.exit(2);
    }
    Configuration conf = HBaseConfiguration.create();
    // Small index chunks: the files get a multi-level block index, as big files do.
    conf.setInt("hfile.index.block.max.size", 1024);
    FileSystem fs = FileSystem.getLocal(conf).getRawFileSystem();
    Path out = new Path(new java.io.File(args[0]).getAbsolutePath());
    fs.mkdirs(out);
    boolean large = args.length > 1 && args[1].equals("--large");
    if (large) {
      // One cell of 6 MiB beside small ones: a block larger than the block size.
      List<KeyValue> cells = new ArrayList<>(cells(200, 7));
      byte[] big = new byte[6 << 20];
      new Random(11).nextBytes(big);
      cells.add(new KeyValue(new byte[] { (byte) 0x80, 'b', 'i', 'g' }, FAMILY,
        "v".getBytes(StandardCharsets.UTF_8), 1_700_000_000_000L, KeyValue.Type.Put, big));
      Collections.sort(cells, CellComparatorImpl.COMPARATOR);
      write(conf, fs, out, "large-fast_diff-gz", DataBlockEncoding.FAST_DIFF,
        Compression.Algorithm.GZ, true, cells);
      write(conf, fs, out, "large-none-none", DataBlockEncoding.NONE,
        Compression.Algorithm.NONE, true, cells);
      return;
    }
    List<KeyValue> cells = cells(300, 3);
    for (DataBlockEncoding enc : new DataBlockEncoding[] { DataBlockEncoding.NONE,
      DataBlockEncoding.PREFIX, DataBlockEncoding.DIFF, DataBlockEncoding.FAST_DIFF,
      DataBlockEncoding.ROW_INDEX_V1 }) {
      write(conf, fs, out, enc.name().toLowerCase() + "-none", enc, Compression.Algorithm.NONE,
        true, cells);
    }
    for (Compression.Algorithm c : new Compression.Algorithm[] { Compression.Algorithm.GZ,
      Compression.Algorithm.SNAPPY, Compression.Algorithm.LZ4, Compression.Algorithm.ZSTD }) {
      write(conf, fs, out, "fast_diff-" + c.getName(), DataBlockEncoding.FAST_DIFF, c, true,
        cells);
      write(conf, fs, out, "none-" + c.getName(), DataBlockEncoding.NONE, c, true, cells);
    }
    // Tags written but not compressed (a family with COMPRESS_TAGS => false).
    write(conf, fs, out, "diff-none-plaintags", DataBlockEncoding.DIFF,
      Compression.Algorithm.NONE, false, cells);
    listing = null;
    write(conf, fs, out, "empty", DataBlockEncoding.FAST_DIFF, Compression.Algorithm.NONE, true,
      new ArrayList<>());
  }

  /** The listing every file of the set must read back as; written once, as cells.txt. */
  static List<String> listing;

  /** Deterministic cells: binary rows, several versions, every delete kind, tags, MVCC. */
  static List<KeyValue> cells(int rows, long seed) {
    Random rnd = new Random(seed);
    List<KeyValue> cells = new ArrayList<>();
    Tag ttl = new ArrayBackedTag((byte) 8, new byte[] { 0, 0, 0, 0, 0, 0, (byte) 0x27, 0x10 });
    for (int r = 0; r < rows; r++) {
      byte[] row = row(r, rnd);
      for (int q = 0; q < 1 + (r % 4); q++) {
        byte[] qual = ("q" + q + (q == 3 ? "-a-longer-qualifier" : "")).getBytes(
          StandardCharsets.UTF_8);
        int versions = 1 + (r % 3);
        for (int v = 0; v < versions; v++) {
          long ts = (r % 17 == 0) ? 5 + v : 1_700_000_000_000L + r * 1000L + v * 7;
          byte[] value = (r % 5 == 0) ? "same".getBytes(StandardCharsets.UTF_8)
            : ("value-" + r + "-" + q + "-" + v).getBytes(StandardCharsets.UTF_8);
          List<Tag> tags = new ArrayList<>();
          if (r % 6 == 0) {
            tags.add(ttl);
          }
          if (r % 10 == 3) {
            tags.add(new ArrayBackedTag((byte) 1, ("acl-" + (r % 3)).getBytes(
              StandardCharsets.UTF_8)));
          }
          KeyValue kv = new KeyValue(row, 0, row.length, FAMILY, 0, FAMILY.length, qual, 0,
            qual.length, ts, KeyValue.Type.Put, value, 0, value.length, tags);
          kv.setSequenceId((r % 9 == 0) ? 0 : 1000 + r * 10L + v);
          cells.add(kv);
        }
      }
      long dts = 1_700_000_000_000L + r * 1000L + 50;
      switch (r % 11) {
        case 1:
          cells.add(new KeyValue(row, FAMILY, "q0".getBytes(StandardCharsets.UTF_8), dts,
            KeyValue.Type.Delete));
          break;
        case 2:
          cells.add(new KeyValue(row, FAMILY, "q1".getBytes(StandardCharsets.UTF_8), dts,
            KeyValue.Type.DeleteColumn));
          break;
        case 4:
          cells.add(new KeyValue(row, FAMILY, null, dts, KeyValue.Type.DeleteFamily));
          break;
        case 7:
          cells.add(new KeyValue(row, FAMILY, null, dts, KeyValue.Type.DeleteFamilyVersion));
          break;
        default:
          break;
      }
    }
    for (KeyValue kv : cells) {
      if (kv.getSequenceId() == 0 && kv.getTypeByte() != KeyValue.Type.Put.getCode()) {
        kv.setSequenceId(5);
      }
    }
    Collections.sort(cells, CellComparatorImpl.COMPARATOR);
    return cells;
  }

  /** Row keys: shared prefixes, binary bytes (0x00, 0xFF), lengths from 1 to 300. */
  static byte[] row(int r, Random rnd) {
    if (r % 97 == 0) {
      byte[] b = new byte[200 + (r % 100)];
      rnd.nextBytes(b);
      b[0] = (byte) 0xFF;
      return b;
    }
    if (r % 13 == 0) {
      return new byte[] { 0, (byte) r, (byte) (r >> 8) };
    }
    return String.format("user%08d", r * 7919 % 100_000_000).getBytes(StandardCharsets.UTF_8);
  }

  static void write(Configuration conf, FileSystem fs, Path dir, String name,
    DataBlockEncoding enc, Compression.Algorithm comp, boolean compressTags, List<KeyValue> cells)
    throws Exception {
    HFileContext ctx = new HFileContextBuilder().withBlockSize(2048).withCompression(comp)
      .withDataBlockEncoding(enc).withIncludesMvcc(true).withIncludesTags(true)
      .withCompressTags(compressTags && enc != DataBlockEncoding.NONE).build();
    Path path = new Path(dir, name + ".hfile");
    StoreFileWriter w = new StoreFileWriter.Builder(conf, CacheConfig.DISABLED, fs)
      .withFilePath(path).withBloomType(BloomType.ROW).withFileContext(ctx).build();
    long maxSeq = 0;
    for (KeyValue kv : cells) {
      w.append(kv);
      maxSeq = Math.max(maxSeq, kv.getSequenceId());
    }
    w.appendMetadata(maxSeq, false);
    w.appendTrackedTimestampsToMetadata();
    w.close();
    // What HBase's own reader reads back: the listing Cellar's reader must reproduce.
    List<String> got = new ArrayList<>();
    HFile.Reader r = HFile.createReader(fs, path, CacheConfig.DISABLED, true, conf);
    HFileScanner s = r.getScanner(conf, false, true);
    if (s.seekTo()) {
      do {
        got.add(line(s.getCell()));
      } while (s.next());
    }
    r.close();
    if (got.size() != cells.size()) {
      throw new IllegalStateException(name + ": wrote " + cells.size() + " cells, read "
        + got.size());
    }
    if (listing == null && !cells.isEmpty()) {
      listing = got;
      java.nio.file.Files.write(java.nio.file.Paths.get(dir.toUri().getPath(), "cells.txt"),
        got, StandardCharsets.UTF_8);
    } else if (!cells.isEmpty() && !got.equals(listing)) {
      throw new IllegalStateException(name + ": HBase reads it back differently from cells.txt");
    }
    System.out.println("wrote " + path + " (" + cells.size() + " cells, " + enc + ", "
      + comp.getName() + ")");
  }

  /** row family qualifier timestamp type value tags mvcc: bytes in hex, '-' when empty. */
  static String line(Cell c) {
    byte[] value = java.util.Arrays.copyOfRange(c.getValueArray(), c.getValueOffset(),
      c.getValueOffset() + c.getValueLength());
    String v = value.length <= 64 ? hex(value)
      : "len" + value.length + ":crc" + Long.toHexString(crc(value));
    byte[] tags = java.util.Arrays.copyOfRange(c.getTagsArray(), c.getTagsOffset(),
      c.getTagsOffset() + c.getTagsLength());
    return String.join(" ", hex(java.util.Arrays.copyOfRange(c.getRowArray(), c.getRowOffset(),
      c.getRowOffset() + c.getRowLength())),
      hex(java.util.Arrays.copyOfRange(c.getFamilyArray(), c.getFamilyOffset(),
        c.getFamilyOffset() + c.getFamilyLength())),
      hex(java.util.Arrays.copyOfRange(c.getQualifierArray(), c.getQualifierOffset(),
        c.getQualifierOffset() + c.getQualifierLength())),
      Long.toString(c.getTimestamp()), Integer.toString(c.getTypeByte() & 0xff), v, hex(tags),
      Long.toString(c.getSequenceId()));
  }

  static long crc(byte[] b) {
    CRC32 c = new CRC32();
    c.update(b);
    return c.getValue();
  }

  static String hex(byte[] b) {
    if (b.length == 0) {
      return "-";
    }
    StringBuilder s = new StringBuilder(b.length * 2);
    for (byte x : b) {
      s.append(String.format("%02x", x & 0xff));
    }
    return s.toString();
  }
}
