package org.cellar.hbasecompat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.hadoop.hbase.client.BufferedMutator;
import org.apache.hadoop.hbase.client.BufferedMutatorParams;
import org.apache.hadoop.hbase.client.Delete;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.regionserver.NoSuchColumnFamilyException;
import org.junit.jupiter.api.Test;

/** Client-side write buffering: many mutations sent in batches the client chooses. */
class BufferedMutatorTest extends CompatTest {
  private static final byte[][] SPLITS = {b("m100"), b("m200"), b("m300")};

  @Test
  void bufferedPutsAndDeletesAllArrive() throws Exception {
    try (TempTable t = TempTable.createSplit(connection, admin, "bm_basic", SPLITS, "f")) {
      List<String> keys = keys("m", 0, 400, 3);
      BufferedMutatorParams params = new BufferedMutatorParams(t.name()).writeBufferSize(4096);
      try (BufferedMutator mutator = connection.getBufferedMutator(params)) {
        for (String k : keys) {
          mutator.mutate(new Put(b(k)).addColumn(b("f"), b("q"), b("v-" + k)));
        }
        mutator.flush();
        assertEquals("v-m123", s(t.table().get(new Get(b("m123"))).getValue(b("f"), b("q"))),
            "visible after flush()");
        for (int i = 0; i < 400; i += 4) {
          mutator.mutate(new Delete(b(keys.get(i))));
        }
        mutator.mutate(new Put(b("m999")).addColumn(b("f"), b("q"), b("last")));
      }
      List<String> expected = new ArrayList<>();
      for (int i = 0; i < 400; i++) {
        if (i % 4 != 0) {
          expected.add(keys.get(i));
        }
      }
      expected.add("m999");
      assertEquals(expected, rows(t.table(), new Scan()), "close() flushed the rest");
      assertEquals("v-m399", s(t.table().get(new Get(b("m399"))).getValue(b("f"), b("q"))));
    }
  }

  @Test
  void failuresReachTheExceptionListener() throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "bm_errors", "f")) {
      List<Throwable> causes = new CopyOnWriteArrayList<>();
      List<String> failedRows = new CopyOnWriteArrayList<>();
      BufferedMutatorParams params = new BufferedMutatorParams(t.name()).listener((e, m) -> {
        for (int i = 0; i < e.getNumExceptions(); i++) {
          causes.add(e.getCause(i));
          failedRows.add(s(e.getRow(i).getRow()));
        }
      });
      try (BufferedMutator mutator = connection.getBufferedMutator(params)) {
        mutator.mutate(new Put(b("good1")).addColumn(b("f"), b("q"), b("1")));
        mutator.mutate(new Put(b("bad")).addColumn(b("nosuch"), b("q"), b("x")));
        mutator.mutate(new Put(b("good2")).addColumn(b("f"), b("q"), b("2")));
        mutator.flush();
      }
      assertEquals(List.of("bad"), failedRows);
      assertInstanceOf(NoSuchColumnFamilyException.class, causes.get(0));
      assertEquals(List.of("good1", "good2"), rows(t.table(), new Scan()));
      assertTrue(t.table().get(new Get(b("bad"))).isEmpty());
    }
  }
}
