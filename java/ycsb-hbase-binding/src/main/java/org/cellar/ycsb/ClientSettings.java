package org.cellar.ycsb;

import java.util.Locale;
import java.util.Properties;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.client.Durability;
import org.apache.hadoop.hbase.util.Bytes;

/**
 * The binding's settings, read once from YCSB's {@code -p} properties. Kept apart from the
 * client so the property handling can be checked without a server.
 */
final class ClientSettings {
  static final String FAMILY = "columnfamily";
  static final String DURABILITY = "durability";
  static final String CLIENT_BUFFERING = "clientbuffering";
  static final String DEFAULT_FAMILY = "family";
  /** HBase's own default for a table that says nothing: the WAL is written before the ack. */
  static final Durability DEFAULT_DURABILITY = Durability.SYNC_WAL;

  private final byte[] family;
  private final Durability durability;
  private final boolean clientBuffering;

  private ClientSettings(byte[] family, Durability durability, boolean clientBuffering) {
    this.family = family;
    this.durability = durability;
    this.clientBuffering = clientBuffering;
  }

  /** Reads the binding's own properties; a bad value is an error naming the property. */
  static ClientSettings from(Properties props) {
    String familyName = props.getProperty(FAMILY, DEFAULT_FAMILY).trim();
    if (familyName.isEmpty()) {
      throw new IllegalArgumentException("property " + FAMILY + " must not be empty");
    }
    return new ClientSettings(
        Bytes.toBytes(familyName),
        parseDurability(props.getProperty(DURABILITY)),
        parseBoolean(CLIENT_BUFFERING, props.getProperty(CLIENT_BUFFERING, "false")));
  }

  /**
   * Builds the HBase client configuration: HBase's defaults plus every YCSB property whose
   * name starts with {@code hbase.} (quorum, registry implementation, bootstrap servers...).
   */
  static Configuration hbaseConfiguration(Properties props) {
    Configuration conf = HBaseConfiguration.create();
    for (String name : props.stringPropertyNames()) {
      if (name.startsWith("hbase.")) {
        conf.set(name, props.getProperty(name));
      }
    }
    return conf;
  }

  static Durability parseDurability(String value) {
    if (value == null || value.isBlank()) {
      return DEFAULT_DURABILITY;
    }
    try {
      return Durability.valueOf(value.trim().toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(
          "property " + DURABILITY + "=" + value + " is not one of USE_DEFAULT, SKIP_WAL,"
              + " ASYNC_WAL, SYNC_WAL, FSYNC_WAL", e);
    }
  }

  static boolean parseBoolean(String name, String value) {
    switch (value.trim().toLowerCase(Locale.ROOT)) {
      case "true":
        return true;
      case "false":
        return false;
      default:
        throw new IllegalArgumentException(
            "property " + name + "=" + value + " must be true or false");
    }
  }

  byte[] family() {
    return family.clone();
  }

  Durability durability() {
    return durability;
  }

  boolean clientBuffering() {
    return clientBuffering;
  }
}
