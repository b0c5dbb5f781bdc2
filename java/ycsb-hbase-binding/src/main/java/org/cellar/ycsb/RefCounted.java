package org.cellar.ycsb;

import java.io.Closeable;
import java.io.IOException;

/**
 * One resource shared by every YCSB thread of the JVM: opened by the first {@link #acquire},
 * closed by the {@link #release} that drops the last user. YCSB creates one DB instance per
 * thread, so this is how the threads share a single HBase connection.
 */
final class RefCounted<T extends Closeable> {
  /** Opens the shared resource; called at most once per open period. */
  interface Opener<T> {
    T open() throws IOException;
  }

  private final Opener<T> opener;
  private T resource;
  private int users;

  RefCounted(Opener<T> opener) {
    this.opener = opener;
  }

  synchronized T acquire() throws IOException {
    if (resource == null) {
      resource = opener.open();
    }
    users++;
    return resource;
  }

  synchronized void release() throws IOException {
    if (users == 0) {
      throw new IllegalStateException("shared connection released more often than acquired");
    }
    users--;
    if (users == 0) {
      T last = resource;
      resource = null;
      last.close();
    }
  }

  synchronized int users() {
    return users;
  }
}
