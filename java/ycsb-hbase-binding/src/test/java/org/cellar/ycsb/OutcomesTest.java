package org.cellar.ycsb;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.KeyValue;
import org.apache.hadoop.hbase.client.Result;
import org.apache.hadoop.hbase.util.Bytes;
import org.junit.Test;
import site.ycsb.ByteIterator;
import site.ycsb.Status;

public class OutcomesTest {
  private static Cell cell(String qualifier, String value) {
    return new KeyValue(Bytes.toBytes("user1"), Bytes.toBytes("family"),
        Bytes.toBytes(qualifier), Bytes.toBytes(value));
  }

  @Test
  public void missingRowIsNotFound() {
    Map<String, ByteIterator> out = new HashMap<>();
    assertEquals(Status.NOT_FOUND, Outcomes.fillRow(Result.EMPTY_RESULT, null, out));
    assertEquals(Status.NOT_FOUND, Outcomes.fillRow(null, null, out));
    assertTrue(out.isEmpty());
  }

  @Test
  public void rowCellsBecomeFieldsFilteredByTheRequestedSet() {
    Result row = Result.create(List.of(cell("field0", "a"), cell("field1", "bb")));
    Map<String, ByteIterator> all = new HashMap<>();
    assertEquals(Status.OK, Outcomes.fillRow(row, null, all));
    assertEquals(2, all.size());
    assertEquals("bb", all.get("field1").toString());

    Map<String, ByteIterator> one = new HashMap<>();
    assertEquals(Status.OK, Outcomes.fillRow(row, Set.of("field0"), one));
    assertEquals(Set.of("field0"), one.keySet());
    assertEquals("a", one.get("field0").toString());
  }

  @Test
  public void bufferedWritesAreBatchedNotAcknowledged() {
    assertEquals(Status.BATCHED_OK, Outcomes.written(true));
    assertEquals(Status.OK, Outcomes.written(false));
  }
}
