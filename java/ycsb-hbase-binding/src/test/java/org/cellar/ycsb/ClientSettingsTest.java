package org.cellar.ycsb;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.util.Properties;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.client.Durability;
import org.apache.hadoop.hbase.util.Bytes;
import org.junit.Test;

public class ClientSettingsTest {
  @Test
  public void everyHbasePropertyReachesTheConfigurationAndNothingElse() {
    Properties props = new Properties();
    props.setProperty("hbase.client.registry.impl",
        "org.apache.hadoop.hbase.client.RpcConnectionRegistry");
    props.setProperty("hbase.client.bootstrap.servers", "127.0.0.1:16020");
    props.setProperty("hbase.zookeeper.quorum", "10.1.2.3");
    props.setProperty("recordcount", "1000");
    props.setProperty("xhbase.not.copied", "1");

    Configuration conf = ClientSettings.hbaseConfiguration(props);

    assertEquals("org.apache.hadoop.hbase.client.RpcConnectionRegistry",
        conf.get("hbase.client.registry.impl"));
    assertEquals("127.0.0.1:16020", conf.get("hbase.client.bootstrap.servers"));
    assertEquals("10.1.2.3", conf.get("hbase.zookeeper.quorum"));
    assertNull(conf.get("recordcount"));
    assertNull(conf.get("xhbase.not.copied"));
  }

  @Test
  public void defaultsAreFamilySyncWalAndNoBuffering() {
    ClientSettings s = ClientSettings.from(new Properties());
    assertArrayEquals(Bytes.toBytes("family"), s.family());
    assertEquals(Durability.SYNC_WAL, s.durability());
    assertFalse(s.clientBuffering());
  }

  @Test
  public void explicitValuesAreRead() {
    Properties props = new Properties();
    props.setProperty("columnfamily", "cf");
    props.setProperty("durability", "async_wal");
    props.setProperty("clientbuffering", "TRUE");
    ClientSettings s = ClientSettings.from(props);
    assertArrayEquals(Bytes.toBytes("cf"), s.family());
    assertEquals(Durability.ASYNC_WAL, s.durability());
    assertTrue(s.clientBuffering());
  }

  @Test
  public void badValuesNameTheProperty() {
    Properties durability = new Properties();
    durability.setProperty("durability", "sometimes");
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> ClientSettings.from(durability));
    assertTrue(e.getMessage(), e.getMessage().contains("durability=sometimes"));

    Properties buffering = new Properties();
    buffering.setProperty("clientbuffering", "yes");
    e = assertThrows(IllegalArgumentException.class, () -> ClientSettings.from(buffering));
    assertTrue(e.getMessage(), e.getMessage().contains("clientbuffering=yes"));

    Properties family = new Properties();
    family.setProperty("columnfamily", " ");
    e = assertThrows(IllegalArgumentException.class, () -> ClientSettings.from(family));
    assertTrue(e.getMessage(), e.getMessage().contains("columnfamily"));
  }
}
