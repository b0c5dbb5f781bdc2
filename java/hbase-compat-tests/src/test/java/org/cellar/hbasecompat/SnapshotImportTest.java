package org.cellar.hbasecompat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.File;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.CompactionState;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.KeepDeletedCells;
import org.apache.hadoop.hbase.client.Delete;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.ResultScanner;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;
import org.apache.hadoop.hbase.io.compress.Compression;
import org.apache.hadoop.hbase.io.encoding.DataBlockEncoding;
import org.apache.hadoop.hbase.regionserver.BloomType;
import org.apache.hadoop.hbase.util.Bytes;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * An HBase table brought into Cellar from a snapshot with {@code cellar import-hbase}, reading
 * HBase's own files: every cell (raw: every version and every delete marker) must equal what
 * HBase itself serves from a clone of the same snapshot. Run by
 * scripts/hbase-snapshot-import.sh, which starts both servers and sets
 * -Dcellar.snapshot.source=HBASE_HOST:PORT, -Dcellar.snapshot.root=HBASE_ROOT_DIR,
 * -Dcellar.snapshot.cellar=CELLAR_BIN, -Dcellar.snapshot.native=CELLAR_NATIVE_ADDR and
 * -Dcellar.hbase.bootstrap=CELLAR_HOST:PORT; skipped without them.
 */
class SnapshotImportTest {
  static final byte[] F = Bytes.toBytes("f");
  static final byte[] G = Bytes.toBytes("g");
  static final byte[] H = Bytes.toBytes("h");
  static final byte[] I = Bytes.toBytes("i");
  static final byte[] J = Bytes.toBytes("j");
  static final long T0 = 1_700_000_000_000L;

  static Connection source;
  static Connection cellar;
  static Admin sourceAdmin;
  static Admin cellarAdmin;
  static String root;
  static String bin;
  static String nativeAddr;

  @BeforeAll
  static void connect() throws Exception {
    String sourceAddr = System.getProperty("cellar.snapshot.source");
    root = System.getProperty("cellar.snapshot.root");
    bin = System.getProperty("cellar.snapshot.cellar");
    nativeAddr = System.getProperty("cellar.snapshot.native");
    assumeTrue(sourceAddr != null && root != null && bin != null && nativeAddr != null,
        "no HBase given (scripts/hbase-snapshot-import.sh runs this)");
    Configuration conf = Cluster.configuration();
    conf.set("hbase.client.bootstrap.servers", sourceAddr.trim());
    conf.set("hbase.client.registry.impl", "org.apache.hadoop.hbase.client.RpcConnectionRegistry");
    source = ConnectionFactory.createConnection(conf);
    sourceAdmin = source.getAdmin();
    cellar = Cluster.connect();
    cellarAdmin = cellar.getAdmin();
  }

  @AfterAll
  static void disconnect() throws Exception {
    for (AutoCloseable c : new AutoCloseable[] {sourceAdmin, source, cellarAdmin, cellar}) {
      if (c != null) {
        c.close();
      }
    }
  }

  /** Runs cellar import-hbase; its exit code, then its output. */
  static Object[] importSnapshot(String snapshot, String into) throws Exception {
    Process p = new ProcessBuilder(bin, "import-hbase", "--snapshot", snapshot, "--hbase-root",
        root, "--connect", nativeAddr, "--table", into).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(600, TimeUnit.SECONDS), "import-hbase did not finish");
    System.out.println(out);
    return new Object[] {p.exitValue(), out};
  }

  static byte[] row(int i) {
    if (i % 50 == 0) {
      return new byte[] {(byte) ('a' + i % 26), 0, (byte) 0xff, (byte) (i >> 8), (byte) i};
    }
    return Bytes.toBytes(String.format("%c%06d", (char) ('a' + i % 26), i));
  }

  /** Every cell of a raw scan of every version, one line each (values as length and hash). */
  static List<String> dump(Connection c, TableName t, boolean raw) throws Exception {
    List<String> out = new ArrayList<>();
    try (Table table = c.getTable(t);
        ResultScanner s = table.getScanner(new Scan().setRaw(raw).readAllVersions())) {
      for (Result r : s) {
        for (Cell cell : r.rawCells()) {
          byte[] v = CellUtil.cloneValue(cell);
          out.add(Bytes.toStringBinary(CellUtil.cloneRow(cell)) + "/"
              + Bytes.toString(CellUtil.cloneFamily(cell)) + ":"
              + Bytes.toStringBinary(CellUtil.cloneQualifier(cell)) + "/" + cell.getTimestamp()
              + "/" + cell.getType() + "/" + v.length + "/" + Arrays.hashCode(v));
        }
      }
    }
    return out;
  }

  static void waitForRegions(TableName t, int n) throws Exception {
    long deadline = System.currentTimeMillis() + 120_000;
    while (sourceAdmin.getRegions(t).size() < n) {
      assertTrue(System.currentTimeMillis() < deadline, "the split did not finish");
      Thread.sleep(500);
    }
  }

  @Test
  void aSnapshotWithVersionsDeletesAndASplitImportsCellForCell() throws Exception {
    TableName t = TableName.valueOf("snapsrc");
    sourceAdmin.createTable(TableDescriptorBuilder.newBuilder(t)
        // Compactions off: the daughters of the split below keep reading their parent's files
        // through references, which the import must resolve.
        .setCompactionEnabled(false)
        .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(F).setMaxVersions(3)
            .setCompressionType(Compression.Algorithm.GZ)
            .setDataBlockEncoding(DataBlockEncoding.FAST_DIFF).setBloomFilterType(BloomType.ROWCOL)
            .build())
        .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(G).setMaxVersions(1)
            .setCompressionType(Compression.Algorithm.SNAPPY)
            .setDataBlockEncoding(DataBlockEncoding.PREFIX).build())
        // The other encodings and compressions HBase writes, one family each.
        .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(H).setMaxVersions(2)
            .setCompressionType(Compression.Algorithm.LZ4)
            .setDataBlockEncoding(DataBlockEncoding.DIFF).build())
        .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(I).setMaxVersions(2)
            .setCompressionType(Compression.Algorithm.ZSTD)
            .setDataBlockEncoding(DataBlockEncoding.ROW_INDEX_V1).build())
        .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(J).setMaxVersions(2).build())
        .build(), new byte[][] {Bytes.toBytes("g"), Bytes.toBytes("p")});
    try (Table table = source.getTable(t)) {
      List<Put> puts = new ArrayList<>();
      for (int i = 0; i < 3000; i++) {
        Put p = new Put(row(i));
        for (int v = 0; v < 3; v++) {
          p.addColumn(F, Bytes.toBytes("q" + (i % 3)), T0 + i + v, Bytes.toBytes("v" + i + "." + v));
        }
        p.addColumn(G, Bytes.toBytes("a"), T0 + i, Bytes.toBytes("g" + i));
        for (byte[] fam : new byte[][] {H, I, J}) {
          p.addColumn(fam, Bytes.toBytes("c" + (i % 5)), T0 + i, Bytes.toBytes("x" + i));
          p.addColumn(fam, Bytes.toBytes("c" + (i % 5)), T0 + i + 1, Bytes.toBytes("y" + i));
        }
        puts.add(p);
      }
      table.put(puts);
      table.put(new Put(Bytes.toBytes("m-large")).addColumn(F, Bytes.toBytes("big"), T0,
          new byte[6 << 20]));
      sourceAdmin.flush(t);
      List<Delete> deletes = new ArrayList<>();
      for (int i = 0; i < 3000; i += 7) {
        Delete d = new Delete(row(i));
        switch (i % 4) {
          case 0: d.addColumn(F, Bytes.toBytes("q" + (i % 3)), T0 + i + 1); break;
          case 1: d.addColumns(F, Bytes.toBytes("q" + (i % 3)), T0 + i + 1); break;
          case 2: d.addFamily(G, T0 + i); break;
          default: d.addFamilyVersion(F, T0 + i + 2); break;
        }
        deletes.add(d);
      }
      table.delete(deletes);
      for (int i = 0; i < 3000; i += 5) {
        table.put(new Put(row(i)).addColumn(F, Bytes.toBytes("q" + (i % 3)), T0 + i + 10,
            Bytes.toBytes("newer" + i)));
      }
      sourceAdmin.flush(t);
      sourceAdmin.split(t, Bytes.toBytes("k"));
      waitForRegions(t, 4);
      for (int i = 0; i < 100; i++) {
        table.put(new Put(Bytes.toBytes(String.format("k%06d", i))).addColumn(G,
            Bytes.toBytes("after-split"), T0, Bytes.toBytes(i)));
      }
      sourceAdmin.flush(t);
      sourceAdmin.snapshot("snap1", t);
      // Written after the snapshot: not imported.
      table.put(new Put(Bytes.toBytes("after-snapshot")).addColumn(G, Bytes.toBytes("a"), T0,
          Bytes.toBytes("no")));
    }
    Object[] result = importSnapshot("snap1", "snapimport");
    assertEquals(0, result[0], (String) result[1]);
    assertTrue(((String) result[1]).contains("imported snapshot 'snap1' of snapsrc"),
        (String) result[1]);
    TableName clone = TableName.valueOf("snapclone");
    sourceAdmin.cloneSnapshot("snap1", clone);
    TableName imported = TableName.valueOf("snapimport");
    // What a reader sees, every version: equal, cell for cell.
    List<String> expected = dump(source, clone, false);
    List<String> got = dump(cellar, imported, false);
    assertTrue(expected.size() > 9000, "HBase's clone holds " + expected.size() + " cells");
    for (int i = 0; i < Math.min(expected.size(), got.size()); i++) {
      assertEquals(expected.get(i), got.get(i), "cell " + i);
    }
    assertEquals(expected.size(), got.size(), "cells");
    // Raw, delete markers and the cells they mask included: Cellar compacts the imported
    // stores as HBase would (a compaction of all of a store's files drops markers and what
    // they mask), and HBase's table has compactions off, so Cellar may hold fewer; never a
    // cell HBase does not have, and every marker of a store it has not compacted.
    List<String> rawExpected = dump(source, clone, true);
    List<String> rawGot = dump(cellar, imported, true);
    java.util.Set<String> rawAll = new java.util.HashSet<>(rawExpected);
    for (String cell : rawGot) {
      assertTrue(rawAll.contains(cell), "Cellar holds a cell HBase's clone does not: " + cell);
    }
    assertTrue(rawGot.size() > expected.size(), "raw scans return delete markers");
    System.out.println("snapshot-import: " + expected.size() + " cells compared (raw: "
        + rawGot.size() + " of HBase's " + rawExpected.size() + ")");
    // The families came over with HBase's settings.
    assertEquals(3, cellarAdmin.getDescriptor(imported).getColumnFamily(F).getMaxVersions());
    assertEquals(BloomType.ROWCOL,
        cellarAdmin.getDescriptor(imported).getColumnFamily(F).getBloomFilterType());
    assertEquals(4, cellarAdmin.getRegions(imported).size(), "the snapshot's regions");
  }

  @Test
  void aDamagedOrMissingFileIsRefusedBeforeAnythingIsCreated() throws Exception {
    // The files are damaged in place with java.nio, so on a local root only (the same reader
    // checks files on HDFS).
    assumeTrue(!root.startsWith("hdfs://"), "the HBase root is on HDFS");
    TableName t = TableName.valueOf("snapbad");
    sourceAdmin.createTable(TableDescriptorBuilder.newBuilder(t)
        .setColumnFamily(ColumnFamilyDescriptorBuilder.of(F)).build());
    try (Table table = source.getTable(t)) {
      for (int i = 0; i < 2000; i++) {
        table.put(new Put(row(i)).addColumn(F, Bytes.toBytes("q"), T0, Bytes.toBytes("v" + i)));
      }
    }
    sourceAdmin.flush(t);
    sourceAdmin.snapshot("snapbad1", t);
    // A clone shares the table's file through an HFileLink; its snapshot names the link.
    sourceAdmin.cloneSnapshot("snapbad1", TableName.valueOf("snapbadclone"));
    sourceAdmin.snapshot("snapbadclone1", TableName.valueOf("snapbadclone"));
    Path family;
    try (Stream<Path> dirs = Files.walk(Paths.get(root, "data", "default", "snapbad"))) {
      family = dirs.filter(p -> p.getFileName().toString().equals("f") && Files.isDirectory(p))
          .findFirst().orElseThrow();
    }
    List<Path> files;
    try (Stream<Path> s = Files.list(family)) {
      files = s.filter(Files::isRegularFile).collect(Collectors.toList());
    }
    assertEquals(1, files.size(), "one store file: " + files);
    Path hfile = files.get(0);
    byte[] original = Files.readAllBytes(hfile);
    try (RandomAccessFile f = new RandomAccessFile(hfile.toFile(), "rw")) {
      f.seek(200);
      int b = f.read();
      f.seek(200);
      f.write(b ^ 0x10);
    }
    Object[] damaged = importSnapshot("snapbad1", "snapbadimport");
    assertNotEquals(0, damaged[0]);
    String out = (String) damaged[1];
    assertTrue(out.contains(hfile.getFileName().toString()) && out.contains("damaged HFile"), out);
    assertFalse(cellarAdmin.tableExists(TableName.valueOf("snapbadimport")),
        "nothing is created for a snapshot that cannot be read");
    // The file gone from both the data directory and the archive.
    Files.delete(hfile);
    Object[] missing = importSnapshot("snapbad1", "snapbadimport");
    assertNotEquals(0, missing[0]);
    assertTrue(((String) missing[1]).contains("in neither the data directory nor the archive"),
        (String) missing[1]);
    assertFalse(cellarAdmin.tableExists(TableName.valueOf("snapbadimport")));
    // The link's target gone: the clone's snapshot is refused, naming the link.
    Object[] link = importSnapshot("snapbadclone1", "snapbadimport");
    assertNotEquals(0, link[0]);
    String linkOut = (String) link[1];
    assertTrue(linkOut.contains("snapbad=") && linkOut.contains(hfile.getFileName().toString())
        && linkOut.contains("in neither the data directory nor the archive"), linkOut);
    assertFalse(cellarAdmin.tableExists(TableName.valueOf("snapbadimport")));
    Files.write(hfile, original);
    assertTrue(new File(hfile.toString()).isFile());
  }

  /**
   * A MOB family: its store files hold references to HBase's MOB files, which are not
   * imported, so the import refuses it, naming the family and HBase's own way out of MOB
   * (MOB_THRESHOLD above every value, a major compaction, IS_MOB off); once that is done, the
   * next snapshot imports cell for cell, the large values included.
   */
  @Test
  void aMobFamilyIsRefusedUntilItsValuesAreBackInTheStoreFiles() throws Exception {
    TableName t = TableName.valueOf("snapmob");
    sourceAdmin.createTable(TableDescriptorBuilder.newBuilder(t)
        .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(F).setMobEnabled(true)
            .setMobThreshold(1000).build())
        .build());
    try (Table table = source.getTable(t)) {
      for (int i = 0; i < 200; i++) {
        byte[] big = new byte[2000 + i];
        Arrays.fill(big, (byte) i);
        table.put(new Put(row(i)).addColumn(F, Bytes.toBytes("big"), T0, big)
            .addColumn(F, Bytes.toBytes("small"), T0, Bytes.toBytes("s" + i)));
      }
    }
    sourceAdmin.flush(t);
    sourceAdmin.snapshot("snapmob1", t);
    Object[] refused = importSnapshot("snapmob1", "snapmobimport");
    assertNotEquals(0, refused[0], (String) refused[1]);
    String out = (String) refused[1];
    assertTrue(out.contains("family 'f'") && out.contains("MOB") && out.contains("MOB_THRESHOLD"),
        out);
    assertFalse(cellarAdmin.tableExists(TableName.valueOf("snapmobimport")),
        "nothing is created for a MOB family");

    // MOB turned off without moving the values: the schema no longer says MOB, the store files
    // still hold references, and the import finds them.
    sourceAdmin.modifyColumnFamily(t, ColumnFamilyDescriptorBuilder
        .newBuilder(sourceAdmin.getDescriptor(t).getColumnFamily(F)).setMobEnabled(false)
        .build());
    sourceAdmin.snapshot("snapmob1b", t);
    Object[] references = importSnapshot("snapmob1b", "snapmobimport");
    assertNotEquals(0, references[0], (String) references[1]);
    assertTrue(((String) references[1]).contains("a MOB reference cell"), (String) references[1]);
    assertFalse(cellarAdmin.tableExists(TableName.valueOf("snapmobimport")));

    // HBase's steps out of MOB: every value under the threshold, a major compaction that writes
    // them back into the store files, then MOB off.
    sourceAdmin.modifyColumnFamily(t, ColumnFamilyDescriptorBuilder
        .newBuilder(sourceAdmin.getDescriptor(t).getColumnFamily(F)).setMobEnabled(true)
        .setMobThreshold(Integer.MAX_VALUE).build());
    sourceAdmin.majorCompact(t);
    Thread.sleep(2000);
    long deadline = System.currentTimeMillis() + 120_000;
    while (sourceAdmin.getCompactionState(t) != CompactionState.NONE) {
      assertTrue(System.currentTimeMillis() < deadline, "the major compaction did not finish");
      Thread.sleep(500);
    }
    sourceAdmin.modifyColumnFamily(t, ColumnFamilyDescriptorBuilder
        .newBuilder(sourceAdmin.getDescriptor(t).getColumnFamily(F)).setMobEnabled(false)
        .build());
    sourceAdmin.snapshot("snapmob2", t);
    Object[] result = importSnapshot("snapmob2", "snapmobimport");
    assertEquals(0, result[0], (String) result[1]);
    TableName imported = TableName.valueOf("snapmobimport");
    List<String> expected = dump(source, t, false);
    List<String> got = dump(cellar, imported, false);
    assertEquals(400, expected.size(), "HBase's table");
    assertEquals(expected, got, "every cell, the large values included");
    System.out.println("snapshot-import: MOB family refused, then " + got.size()
        + " cells imported after HBase's steps out of MOB");
  }

  /** Every cell a scan returns, one line each, as {@link #dump} writes them. */
  static List<String> dumpScan(Connection c, TableName t, Scan scan) throws Exception {
    List<String> out = new ArrayList<>();
    try (Table table = c.getTable(t); ResultScanner s = table.getScanner(scan)) {
      for (Result r : s) {
        for (Cell cell : r.rawCells()) {
          out.add(Bytes.toStringBinary(CellUtil.cloneRow(cell)) + "/"
              + Bytes.toString(CellUtil.cloneFamily(cell)) + ":"
              + Bytes.toStringBinary(CellUtil.cloneQualifier(cell)) + "/" + cell.getTimestamp()
              + "/" + Bytes.toStringBinary(CellUtil.cloneValue(cell)));
        }
      }
    }
    return out;
  }

  /**
   * A family's TTL and another's KEEP_DELETED_CELLS come over with their effects: cells past
   * the TTL stay hidden, and cells a delete masks stay readable by a time range that ends
   * before the delete, on Cellar as on HBase.
   */
  @Test
  void ttlAndKeepDeletedCellsComeOverWithTheirEffects() throws Exception {
    TableName t = TableName.valueOf("snapttl");
    sourceAdmin.createTable(TableDescriptorBuilder.newBuilder(t)
        .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(F).setTimeToLive(3600)
            .setMaxVersions(5).build())
        .setColumnFamily(ColumnFamilyDescriptorBuilder.newBuilder(G)
            .setKeepDeletedCells(KeepDeletedCells.TRUE).setMaxVersions(5).build())
        .build());
    long now = System.currentTimeMillis();
    try (Table table = source.getTable(t)) {
      for (int i = 0; i < 300; i++) {
        table.put(new Put(row(i))
            .addColumn(F, Bytes.toBytes("live"), now - 60_000, Bytes.toBytes("live" + i))
            .addColumn(F, Bytes.toBytes("old"), now - 7_200_000, Bytes.toBytes("expired" + i))
            .addColumn(G, Bytes.toBytes("a"), now - 50_000, Bytes.toBytes("kept" + i))
            .addColumn(G, Bytes.toBytes("a"), now - 40_000, Bytes.toBytes("newer" + i)));
      }
      for (int i = 0; i < 300; i += 3) {
        table.delete(new Delete(row(i)).addColumns(G, Bytes.toBytes("a"), now - 20_000));
      }
    }
    sourceAdmin.flush(t);
    sourceAdmin.snapshot("snapttl1", t);
    Object[] result = importSnapshot("snapttl1", "snapttlimport");
    assertEquals(0, result[0], (String) result[1]);
    TableName imported = TableName.valueOf("snapttlimport");
    List<String> expected = dump(source, t, false);
    assertEquals(expected, dump(cellar, imported, false), "what a reader sees");
    assertTrue(expected.stream().noneMatch(c -> c.contains(":old/")), "HBase hides expired");
    Scan before = new Scan().setTimeRange(0, now - 30_000).readAllVersions();
    List<String> kept = dumpScan(source, t, before);
    assertEquals(kept, dumpScan(cellar, imported, before), "deleted cells kept");
    assertTrue(kept.stream().anyMatch(c -> c.startsWith("d000003/g:a/")),
        "a deleted row's cells read before its delete: " + kept.size());
    assertEquals(3600, cellarAdmin.getDescriptor(imported).getColumnFamily(F).getTimeToLive());
    assertEquals(KeepDeletedCells.TRUE,
        cellarAdmin.getDescriptor(imported).getColumnFamily(G).getKeepDeletedCells());
    System.out.println("snapshot-import: TTL and KEEP_DELETED_CELLS: " + expected.size()
        + " cells and " + kept.size() + " kept cells equal");
  }
}
