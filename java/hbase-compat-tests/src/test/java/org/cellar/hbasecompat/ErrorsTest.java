package org.cellar.hbasecompat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.TableNotFoundException;
import org.apache.hadoop.hbase.client.Delete;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.Put;
import org.apache.hadoop.hbase.client.ResultScanner;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.client.Table;
import org.apache.hadoop.hbase.regionserver.NoSuchColumnFamilyException;
import org.junit.jupiter.api.Test;

/** The errors a caller must be able to catch by type: missing tables and missing families. */
class ErrorsTest extends CompatTest {

  @Test
  void dataCallsOnAMissingTableThrowTableNotFound() throws Exception {
    TableName missing = TempTable.uniqueName("errors_missing");
    try (Table tbl = connection.getTable(missing)) {
      assertThrows(TableNotFoundException.class, () -> tbl.get(new Get(b("r"))));
      assertThrows(TableNotFoundException.class,
          () -> tbl.put(new Put(b("r")).addColumn(b("f"), b("q"), b("v"))));
      assertThrows(TableNotFoundException.class, () -> tbl.delete(new Delete(b("r"))));
      assertThrows(TableNotFoundException.class, () -> {
        try (ResultScanner scanner = tbl.getScanner(new Scan())) {
          scanner.next();
        }
      });
    }
  }

  @Test
  void adminCallsOnAMissingTableThrowTableNotFound() throws Exception {
    TableName missing = TempTable.uniqueName("errors_missing_admin");
    assertThrows(TableNotFoundException.class, () -> admin.getDescriptor(missing));
    assertThrows(TableNotFoundException.class, () -> admin.disableTable(missing));
    assertThrows(TableNotFoundException.class, () -> admin.enableTable(missing));
    assertThrows(TableNotFoundException.class, () -> admin.deleteTable(missing));
  }

  @Test
  void missingFamilyThrowsNoSuchColumnFamily() throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "errors_family", "f")) {
      Table tbl = t.table();
      tbl.put(new Put(b("r")).addColumn(b("f"), b("q"), b("v")));
      assertThrows(NoSuchColumnFamilyException.class,
          () -> tbl.put(new Put(b("r")).addColumn(b("nosuch"), b("q"), b("v"))));
      assertThrows(NoSuchColumnFamilyException.class,
          () -> tbl.get(new Get(b("r")).addFamily(b("nosuch"))));
      assertThrows(NoSuchColumnFamilyException.class,
          () -> tbl.delete(new Delete(b("r")).addFamily(b("nosuch"))));
      assertThrows(NoSuchColumnFamilyException.class, () -> {
        try (ResultScanner scanner = tbl.getScanner(new Scan().addFamily(b("nosuch")))) {
          scanner.next();
        }
      });
      // The failed calls changed nothing.
      assertEquals(List.of("f:q=v"), cells(tbl.get(new Get(b("r")))));
    }
  }

  @Test
  void missingBootstrapPropertyIsAClearError() {
    String saved = System.getProperty(Cluster.BOOTSTRAP_PROPERTY);
    System.clearProperty(Cluster.BOOTSTRAP_PROPERTY);
    try {
      IllegalStateException e = assertThrows(IllegalStateException.class, Cluster::bootstrap);
      assertTrue(e.getMessage().contains("cellar.hbase.bootstrap"));
    } finally {
      if (saved != null) {
        System.setProperty(Cluster.BOOTSTRAP_PROPERTY, saved);
      }
    }
  }
}
