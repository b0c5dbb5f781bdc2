# Sourced by the scripts that run the HBase 2.6 Java client (hbase-compat.sh, hbase-kill.sh,
# bench-vs-hbase.sh, bench-cluster.sh): the JVM flags its shaded Netty needs on Java 17.
# shellcheck disable=SC2034
hbase_client_java_flags=(
  -Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true
  --add-modules jdk.unsupported
  --add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/sun.nio.ch=ALL-UNNAMED
  --add-opens java.base/java.lang=ALL-UNNAMED --add-opens java.base/java.util=ALL-UNNAMED
  --add-opens java.base/java.util.concurrent=ALL-UNNAMED --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
  --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
)
