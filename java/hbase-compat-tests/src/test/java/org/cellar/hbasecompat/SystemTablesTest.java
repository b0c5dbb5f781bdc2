package org.cellar.hbasecompat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Pattern;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptor;
import org.apache.hadoop.hbase.client.TableDescriptor;
import org.junit.jupiter.api.Test;

/**
 * System tables through the master's table listings: GetTableDescriptors naming hbase:meta
 * (`describe 'hbase:meta'`), and GetTableNames / GetTableDescriptors with include_sys_tables.
 */
class SystemTablesTest extends CompatTest {

  private static Set<String> families(TableDescriptor d) {
    Set<String> out = new TreeSet<>();
    for (ColumnFamilyDescriptor f : d.getColumnFamilies()) {
      out.add(f.getNameAsString());
    }
    return out;
  }

  /** The system tables among names, as strings. */
  private static Set<String> system(List<TableName> names) {
    Set<String> out = new TreeSet<>();
    for (TableName n : names) {
      if (n.isSystemTable()) {
        out.add(n.getNameAsString());
      }
    }
    return out;
  }

  @Test
  void describeMetaAnswersItsDescriptor() throws Exception {
    TableDescriptor meta = admin.getDescriptor(TableName.META_TABLE_NAME);
    System.out.println("hbase:meta descriptor: " + meta);
    assertEquals(TableName.META_TABLE_NAME, meta.getTableName());
    assertTrue(families(meta).containsAll(Set.of("info", "table")), families(meta).toString());
    assertEquals(3, meta.getColumnFamily(b("info")).getMaxVersions(), "info keeps 3 versions");
    assertTrue(meta.getColumnFamily(b("info")).isInMemory());
    // Named with a user table: both descriptors.
    try (TempTable t = TempTable.create(connection, admin, "sys_named", "f")) {
      List<TableDescriptor> both =
          admin.listTableDescriptors(List.of(TableName.META_TABLE_NAME, t.name()));
      List<TableName> names = new ArrayList<>();
      for (TableDescriptor d : both) {
        names.add(d.getTableName());
      }
      assertTrue(names.contains(TableName.META_TABLE_NAME), names.toString());
      assertTrue(names.contains(t.name()), names.toString());
    }
  }

  @Test
  void listingsAddSystemTablesOnlyWhenAsked() throws Exception {
    try (TempTable t = TempTable.create(connection, admin, "sys_list", "f")) {
      List<TableName> withSys = List.of(admin.listTableNames(Pattern.compile(".*"), true));
      List<TableName> without = List.of(admin.listTableNames(Pattern.compile(".*"), false));
      System.out.println("system tables listed: " + system(withSys));
      assertTrue(system(withSys).contains("hbase:meta"), withSys.toString());
      assertTrue(system(without).isEmpty(), without.toString());
      assertTrue(withSys.contains(t.name()) && without.contains(t.name()));

      List<TableName> described = new ArrayList<>();
      for (TableDescriptor d : admin.listTableDescriptors(Pattern.compile(".*"), true)) {
        described.add(d.getTableName());
      }
      assertEquals(system(withSys), system(described), "names and descriptors list the same");
      assertTrue(described.contains(t.name()));

      // The regex applies to system tables too.
      List<TableName> onlyMeta = List.of(admin.listTableNames(Pattern.compile("hbase:meta"), true));
      assertEquals(List.of(TableName.META_TABLE_NAME), onlyMeta);
      assertFalse(List.of(admin.listTableNames(Pattern.compile("hbase:.*"), false))
          .contains(TableName.META_TABLE_NAME));
      // The namespace "hbase" with system tables: its tables.
      List<TableName> inHbase = new ArrayList<>();
      for (TableDescriptor d : admin.listTableDescriptorsByNamespace(b("hbase"))) {
        inHbase.add(d.getTableName());
      }
      System.out.println("tables of namespace hbase: " + inHbase);
    }
  }
}
