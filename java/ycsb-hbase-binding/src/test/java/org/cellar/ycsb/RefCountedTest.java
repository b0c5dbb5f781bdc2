package org.cellar.ycsb;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotSame;
import static org.junit.Assert.assertSame;
import static org.junit.Assert.assertThrows;

import java.io.Closeable;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.Test;

public class RefCountedTest {
  private static final class Probe implements Closeable {
    final AtomicInteger closes;

    Probe(AtomicInteger closes) {
      this.closes = closes;
    }

    @Override
    public void close() {
      closes.incrementAndGet();
    }
  }

  @Test
  public void firstAcquireOpensLastReleaseCloses() throws Exception {
    AtomicInteger opens = new AtomicInteger();
    AtomicInteger closes = new AtomicInteger();
    RefCounted<Probe> shared = new RefCounted<>(() -> {
      opens.incrementAndGet();
      return new Probe(closes);
    });

    Probe a = shared.acquire();
    Probe b = shared.acquire();
    assertSame(a, b);
    assertEquals(1, opens.get());
    shared.release();
    assertEquals("still one user", 0, closes.get());
    shared.release();
    assertEquals(1, closes.get());

    Probe c = shared.acquire();
    assertNotSame("reopened after the last release", a, c);
    assertEquals(2, opens.get());
    shared.release();
    assertThrows(IllegalStateException.class, shared::release);
  }
}
