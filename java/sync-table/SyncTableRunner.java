// HBase's own HashTable and SyncTable MapReduce jobs (org.apache.hadoop.hbase.mapreduce, HBase
// 2.6.4), run in Hadoop's local job runner (mapreduce.framework.name=local, file:// only; no
// YARN, no HDFS): HashTable hashes the source table into WORK/hash, then SyncTable scans the
// target table range by range, compares each range's hash with the source's, and re-reads the
// ranges that differ from both sides, cell by cell (and, without --dryrun, writes Puts and
// Deletes to the target so it matches the source). Both clusters are reached through
// ZooKeeper (HBase's cluster keys, HOST:PORT:/hbase); Cellar answers there when started with
// `cellar standalone --zk HOST:PORT`.
//
// Prints one line on stdout, SyncTable's job counters (SyncTable.SyncMapper.Counter):
//   synctable: hashes matched=A not-matched=B source-missing-rows=C target-missing-rows=D
//     source-missing-cells=E target-missing-cells=F different-cells=G rows-with-diffs=H
//     matching-rows=I matching-cells=J batches=K empty-batches=L dryrun=true|false
// (one line; wrapped here). The counter behind each field: HASHES_MATCHED, HASHES_NOT_MATCHED,
// SOURCEMISSINGROWS, TARGETMISSINGROWS, SOURCEMISSINGCELLS, TARGETMISSINGCELLS,
// DIFFERENTCELLVALUES, ROWSWITHDIFFS, MATCHINGROWS, MATCHINGCELLS, BATCHES, EMPTY_BATCHES. The
// tables are equal (for the cells hashed: --versions) when every field from source-missing-rows
// to different-cells is 0. Exit status: 0 when both jobs succeeded (whatever they found), 1 when
// a job failed, 2 on bad arguments. Logs go to WORK/logs/ (one file per run).
//
// Usage (scripts/lib/sync-table.sh's sync_table_run adds the classpath and JVM flags):
//   java -cp "LIB/*" SyncTableRunner.java --source-zk H:P:/hbase --target-zk H:P:/hbase
//     --table T [--target-table T2] --work DIR [--dryrun] [--reuse-hash]
//     [--versions N] [--batch-size BYTES] [--num-hash-files N] [--scan-batch N] [--caching N]
//     [--start-row HEX] [--stop-row HEX] [--start-time MS] [--end-time MS] [--families f,g]
//   --dryrun          count differences only; without it SyncTable writes to the target
//   --reuse-hash      keep WORK/hash from an earlier run (the source has not changed since);
//                     otherwise HashTable runs again and replaces it
//   --versions N      versions of each cell hashed and compared (default: all the families
//                     keep; HashTable's own default is 1, the newest only)
//   --batch-size      bytes of source data per hash (HashTable --batchsize, default 8000)
//   --num-hash-files  HashTable --numhashfiles (default: HashTable's choice)
//   --scan-batch      cells per Result in the scans (HashTable --scanbatch; default unset)
//   --caching N       rows per scanner call (hbase.client.scanner.caching; default HBase's)
//   --start-row, --stop-row, --start-time, --end-time, --families: only that part of the
//                     table (HashTable's options; rows in hex, times in ms, end exclusive)
import java.io.File;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileUtil;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.mapreduce.HashTable;
import org.apache.hadoop.hbase.mapreduce.SyncTable;
import org.apache.hadoop.mapreduce.Counters;

public class SyncTableRunner {
  static void usage(String error) {
    System.err.println("SyncTableRunner: " + error);
    System.err.println("usage: SyncTableRunner --source-zk H:P:/hbase --target-zk H:P:/hbase"
        + " --table T [--target-table T2] --work DIR [--dryrun] [--reuse-hash] [--versions N]"
        + " [--batch-size BYTES] [--num-hash-files N] [--scan-batch N] [--caching N]"
        + " [--start-row HEX] [--stop-row HEX] [--start-time MS] [--end-time MS] [--families f,g]");
    System.exit(2);
  }

  public static void main(String[] args) throws Exception {
    String sourceZk = null, targetZk = null, table = null, targetTable = null, work = null;
    boolean dryRun = false, reuseHash = false;
    String versions = String.valueOf(Integer.MAX_VALUE), batchSize = null, numHashFiles = null,
        scanBatch = null, caching = null;
    List<String> hashOptions = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      if (a.equals("--dryrun")) { dryRun = true; continue; }
      if (a.equals("--reuse-hash")) { reuseHash = true; continue; }
      if (i + 1 >= args.length) usage("option " + a + " needs a value (or is unknown)");
      String v = args[++i];
      switch (a) {
        case "--source-zk": sourceZk = v; break;
        case "--target-zk": targetZk = v; break;
        case "--table": table = v; break;
        case "--target-table": targetTable = v; break;
        case "--work": work = v; break;
        case "--versions": versions = number(a, v); break;
        case "--batch-size": batchSize = number(a, v); break;
        case "--num-hash-files": numHashFiles = number(a, v); break;
        case "--scan-batch": scanBatch = number(a, v); break;
        case "--caching": caching = number(a, v); break;
        case "--start-row": hashOptions.add("--startrow=" + hex(a, v)); break;
        case "--stop-row": hashOptions.add("--stoprow=" + hex(a, v)); break;
        case "--start-time": hashOptions.add("--starttime=" + number(a, v)); break;
        case "--end-time": hashOptions.add("--endtime=" + number(a, v)); break;
        case "--families": hashOptions.add("--families=" + v); break;
        default: usage("unknown option " + a);
      }
    }
    if (sourceZk == null || targetZk == null || table == null || work == null) {
      usage("--source-zk, --target-zk, --table and --work are required");
    }
    for (String key : new String[] {sourceZk, targetZk}) {
      if (!key.matches("[^:]+:[0-9]+:/.*")) usage("'" + key + "' is not a cluster key HOST:PORT:/ZNODE");
    }
    if (targetTable == null) targetTable = table;

    File workDir = new File(work).getAbsoluteFile();
    File logs = new File(workDir, "logs");
    logs.mkdirs();
    String runName = (dryRun ? "synctable-dryrun-" : "synctable-") + System.currentTimeMillis();
    File log = new File(logs, runName + ".log");
    configureLogging(workDir, log);
    // Hadoop's and HBase's own progress lines (job.waitForCompletion(true)) go to the log, not
    // to the caller's stdout, which carries the one result line.
    PrintStream stdout = System.out;
    PrintStream logStream = new PrintStream(new java.io.FileOutputStream(log, true), true, "UTF-8");
    System.setOut(logStream);

    Configuration base = HBaseConfiguration.create();
    base.set("mapreduce.framework.name", "local");
    base.set("fs.defaultFS", "file:///");
    base.set("hadoop.tmp.dir", new File(workDir, "hadoop-tmp").getPath());
    base.setInt("mapreduce.local.map.tasks.maximum", 2);
    base.setInt("mapreduce.local.reduce.tasks.maximum", 2);
    // A server that stops answering fails the job within minutes instead of retrying for hours.
    base.setInt("hbase.client.retries.number", 10);
    base.setInt("hbase.rpc.timeout", 30_000);
    base.setInt("hbase.client.operation.timeout", 120_000);
    base.setInt("hbase.client.scanner.timeout.period", 120_000);
    base.setInt("zookeeper.recovery.retry", 3);
    if (caching != null) base.set("hbase.client.scanner.caching", caching);

    File hash = new File(workDir, "hash");
    boolean haveHash = new File(hash, "manifest").isFile();
    if (!reuseHash || !haveHash) {
      if (hash.exists()) FileUtil.fullyDelete(hash);
      // HashTable reads the table of the job's own cluster: the source's.
      Configuration hashConf = HBaseConfiguration.createClusterConf(base, sourceZk);
      List<String> hashArgs = new ArrayList<>();
      hashArgs.add("--versions=" + versions);
      if (batchSize != null) hashArgs.add("--batchsize=" + batchSize);
      if (numHashFiles != null) hashArgs.add("--numhashfiles=" + numHashFiles);
      if (scanBatch != null) hashArgs.add("--scanbatch=" + scanBatch);
      hashArgs.addAll(hashOptions);
      hashArgs.add(table);
      hashArgs.add(hash.toURI().toString());
      System.err.println("hashtable: " + table + " on " + sourceZk + " into " + hash + " (log " + log + ")");
      int rc = new HashTable(hashConf).run(hashArgs.toArray(new String[0]));
      if (rc != 0 || !new File(hash, "manifest").isFile()) {
        System.err.println("SyncTableRunner: HashTable failed (exit " + rc + "); log " + log);
        System.exit(1);
      }
    } else {
      System.err.println("hashtable: reusing " + hash);
    }

    // SyncTable's input format scans the target table on the job's own cluster, so the job's
    // configuration is the target's; the source is named by --sourcezkcluster.
    Configuration syncConf = HBaseConfiguration.createClusterConf(base, targetZk);
    SyncTable sync = new SyncTable(syncConf);
    String[] syncArgs = {
      "--sourcezkcluster=" + sourceZk, "--targetzkcluster=" + targetZk, "--dryrun=" + dryRun,
      hash.toURI().toString(), table, targetTable
    };
    System.err.println("synctable: " + table + " on " + sourceZk + " -> " + targetTable + " on "
        + targetZk + (dryRun ? " (dry run)" : "") + " (log " + log + ")");
    int rc = sync.run(syncArgs);
    Counters counters = countersOf(sync);
    if (rc != 0 || counters == null) {
      System.err.println("SyncTableRunner: SyncTable failed (exit " + rc + "); log " + log);
      System.exit(1);
    }
    stdout.println("synctable: hashes"
        + " matched=" + get(counters, SyncTable.SyncMapper.Counter.HASHES_MATCHED)
        + " not-matched=" + get(counters, SyncTable.SyncMapper.Counter.HASHES_NOT_MATCHED)
        + " source-missing-rows=" + get(counters, SyncTable.SyncMapper.Counter.SOURCEMISSINGROWS)
        + " target-missing-rows=" + get(counters, SyncTable.SyncMapper.Counter.TARGETMISSINGROWS)
        + " source-missing-cells=" + get(counters, SyncTable.SyncMapper.Counter.SOURCEMISSINGCELLS)
        + " target-missing-cells=" + get(counters, SyncTable.SyncMapper.Counter.TARGETMISSINGCELLS)
        + " different-cells=" + get(counters, SyncTable.SyncMapper.Counter.DIFFERENTCELLVALUES)
        + " rows-with-diffs=" + get(counters, SyncTable.SyncMapper.Counter.ROWSWITHDIFFS)
        + " matching-rows=" + get(counters, SyncTable.SyncMapper.Counter.MATCHINGROWS)
        + " matching-cells=" + get(counters, SyncTable.SyncMapper.Counter.MATCHINGCELLS)
        + " batches=" + get(counters, SyncTable.SyncMapper.Counter.BATCHES)
        + " empty-batches=" + get(counters, SyncTable.SyncMapper.Counter.EMPTY_BATCHES)
        + " dryrun=" + dryRun);
    stdout.flush();
    // The local runner leaves non-daemon threads (HBase connections' pools) behind.
    System.exit(0);
  }

  static String number(String option, String v) {
    if (!v.matches("[0-9]+")) usage(option + ": '" + v + "' is not a number");
    return v;
  }

  static String hex(String option, String v) {
    if (!v.matches("([0-9a-fA-F]{2})+")) usage(option + ": '" + v + "' is not hex bytes (e.g. 00ff)");
    return v;
  }

  static long get(Counters counters, Enum<?> counter) {
    return counters.findCounter(counter).getValue();
  }

  // SyncTable.run keeps the finished job's counters in a package-private field (what HBase's
  // own TestSyncTable reads); nothing public returns them.
  static Counters countersOf(SyncTable sync) throws Exception {
    Field f = SyncTable.class.getDeclaredField("counters");
    f.setAccessible(true);
    return (Counters) f.get(sync);
  }

  // Before any Hadoop or HBase class logs: everything to the run's log file, WARN and above.
  static void configureLogging(File workDir, File log) throws IOException {
    File props = new File(workDir, "logs/log4j2-" + log.getName() + ".properties");
    String text = String.join("\n",
        "status = warn",
        "appender.file.type = File",
        "appender.file.name = file",
        "appender.file.fileName = " + log.getPath(),
        "appender.file.layout.type = PatternLayout",
        "appender.file.layout.pattern = %d{ISO8601} %-5p [%t] %c{2}: %m%n",
        "rootLogger = INFO,file",
        "logger.zk.name = org.apache.zookeeper",
        "logger.zk.level = WARN",
        "");
    Files.write(props.toPath(), text.getBytes(StandardCharsets.UTF_8));
    System.setProperty("log4j2.configurationFile", props.toURI().toString());
    System.setProperty("hbase.log.dir", workDir.getPath());
  }
}
