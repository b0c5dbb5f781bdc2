package org.cellar.hbasecompat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.hbase.DoNotRetryIOException;
import org.apache.hadoop.hbase.client.Append;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Increment;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.util.Bytes;
import org.junit.jupiter.api.Test;

/** Server-side read-modify-write: Increment and Append. */
class IncrementAppendTest extends CompatTest {

  @Test
  void incrementCreatesAndAddsToEightByteCounters() throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "incr_basic", "f", "g")) {
      Table tbl = t.table();
      assertEquals(5L, tbl.incrementColumnValue(b("r"), b("f"), b("c"), 5L));
      assertEquals(12L, tbl.incrementColumnValue(b("r"), b("f"), b("c"), 7L));
      assertEquals(2L, tbl.incrementColumnValue(b("r"), b("f"), b("c"), -10L));
      assertEquals(2L, tbl.incrementColumnValue(b("r"), b("f"), b("c"), 0L), "adding 0 reads the counter");

      Result r = tbl.increment(new Increment(b("r")).addColumn(b("f"), b("c"), 100L)
          .addColumn(b("f"), b("d"), 1L).addColumn(b("g"), b("e"), -1L));
      assertEquals(102L, Bytes.toLong(r.getValue(b("f"), b("c"))));
      assertEquals(1L, Bytes.toLong(r.getValue(b("f"), b("d"))));
      assertEquals(-1L, Bytes.toLong(r.getValue(b("g"), b("e"))));
      Result stored = tbl.get(new Get(b("r")));
      assertEquals(3, stored.size());
      assertEquals(102L, Bytes.toLong(stored.getValue(b("f"), b("c"))));
      assertEquals(8, stored.getValue(b("f"), b("c")).length, "counters are 8-byte big-endian longs");

      // A counter may start from a value written by a Put, if it is 8 bytes.
      tbl.put(new Put(b("p")).addColumn(b("f"), b("c"), Bytes.toBytes(40L)));
      assertEquals(42L, tbl.incrementColumnValue(b("p"), b("f"), b("c"), 2L));
    }
  }

  @Test
  void incrementOfANonCounterFails() throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "incr_bad", "f")) {
      t.table().put(new Put(b("r")).addColumn(b("f"), b("s"), b("text")));
      assertThrows(DoNotRetryIOException.class,
          () -> t.table().incrementColumnValue(b("r"), b("f"), b("s"), 1L));
      assertEquals("text", s(t.table().get(new Get(b("r"))).getValue(b("f"), b("s"))), "value unchanged");
    }
  }

  @Test
  void concurrentIncrementsAreAtomic() throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "incr_concurrent", "f")) {
      ExecutorService pool = Executors.newFixedThreadPool(4);
      try {
        List<Future<?>> done = new ArrayList<>();
        for (int w = 0; w < 4; w++) {
          done.add(pool.submit(() -> {
            try (Table tbl = connection.getTable(t.name())) {
              for (int i = 0; i < 50; i++) {
                tbl.incrementColumnValue(b("hot"), b("f"), b("n"), 1L);
              }
            }
            return null;
          }));
        }
        for (Future<?> f : done) {
          f.get(120, TimeUnit.SECONDS);
        }
      } finally {
        pool.shutdownNow();
      }
      assertEquals(200L, Bytes.toLong(t.table().get(new Get(b("hot"))).getValue(b("f"), b("n"))));
    }
  }

  @Test
  void appendConcatenatesAndCreatesMissingCells() throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "append_basic", "f")) {
      Table tbl = t.table();
      Result r = tbl.append(new Append(b("r")).addColumn(b("f"), b("log"), b("a")));
      assertEquals("a", s(r.getValue(b("f"), b("log"))));
      r = tbl.append(new Append(b("r")).addColumn(b("f"), b("log"), b("bc")).addColumn(b("f"), b("other"), b("x")));
      assertEquals("abc", s(r.getValue(b("f"), b("log"))));
      assertEquals("x", s(r.getValue(b("f"), b("other"))));
      tbl.put(new Put(b("r")).addColumn(b("f"), b("p"), b("put-")));
      tbl.append(new Append(b("r")).addColumn(b("f"), b("p"), b("then-append")));
      assertEquals(List.of("f:log=abc", "f:other=x", "f:p=put-then-append"), cells(tbl.get(new Get(b("r")))));
    }
  }
}
