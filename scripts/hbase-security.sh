#!/usr/bin/env bash
# The unmodified HBase 2.6 Java client over TLS, and with access control, against Cellar (HBase's own settings:
# hbase.client.netty.tls.enabled, PEM trust and key stores). Certificates come from
# `cellar cert`; each case is one TlsProbe run (java/hbase-compat-tests) that must succeed or
# fail the way it says:
#   - a client certificate signed by the server's client CA: works;
#   - no client certificate where one is required, a trust store with another CA, an expired
#     client certificate, a plaintext client: refused (the plaintext one told that the port
#     serves only TLS);
#   - a server certificate for another host: the client refuses the server;
#   - client certificates optional: a client without one works.
# Then access control (AclProbe, users named by HADOOP_USER_NAME, HBase's SIMPLE
# authentication, on a server with security.authorization on): AccessControlClient.grant and
# getUserPermissions as a superuser; the granted user reads only its family and gets
# AccessDeniedException for the rest; revoke; everything refused afterwards.
# Ends with one line
#   hbase-security: N passed, M failed
# and exits non-zero on a failure. Called by scripts/hbase-compat.sh.
#
# Usage: scripts/hbase-security.sh --cellar BIN --classpath CP --work DIR
set -uo pipefail

cellar_bin=""
classpath=""
work=""
fail() { echo "hbase-security: $*" >&2; echo "hbase-security: 0 passed, 1 failed"; exit 1; }
need_value() { [[ $# -ge 2 && -n "$2" ]] || fail "option $1 needs a value"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cellar) need_value "$@"; cellar_bin="$2"; shift 2 ;;
    --classpath) need_value "$@"; classpath="$2"; shift 2 ;;
    --work) need_value "$@"; work="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) fail "unknown option '$1' (see --help)" ;;
  esac
done
[[ -x "$cellar_bin" ]] || fail "no Cellar binary at '$cellar_bin' (--cellar BIN)"
[[ -n "$classpath" ]] || fail "--classpath is needed (test-classes and the hbase-shaded-client jars)"
[[ -n "$work" ]] || fail "--work DIR is needed"
command -v java >/dev/null 2>&1 || fail "java (17+) is not installed"
# shellcheck source=lib/java-flags.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/java-flags.sh"
java_flags=("${hbase_client_java_flags[@]}")

rm -rf "$work"
mkdir -p "$work"
certs="$work/certs"
other="$work/other"
"$cellar_bin" cert create --dir "$certs" --user alice >"$work/cert.log" 2>&1 || fail "cellar cert create failed ($work/cert.log)"
"$cellar_bin" cert client old --dir "$certs" --expired >>"$work/cert.log" 2>&1 || fail "cellar cert client --expired failed"
"$cellar_bin" cert server --dir "$certs" --only-hosts --host db.example.com --name elsewhere >>"$work/cert.log" 2>&1 \
  || fail "cellar cert server failed"
"$cellar_bin" cert create --dir "$other" --user mallory >>"$work/cert.log" 2>&1 || fail "cellar cert create (other CA) failed"

server_pid=""
stop_server() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$server_pid" 2>/dev/null || true
  fi
  server_pid=""
}
trap stop_server EXIT
trap 'exit 130' INT TERM

# start_server NAME ARGS...: a standalone server with TLS; sets $addr to its HBase address.
start_server() {
  local name="$1"; shift
  mkdir -p "$work/$name"
  "$cellar_bin" standalone --data-dir "$work/$name/data" --listen 127.0.0.1:0 \
    --http-listen 127.0.0.1:0 --hbase-listen 127.0.0.1:0 "$@" \
    >"$work/$name/cellar.out" 2>"$work/$name/cellar.log" &
  server_pid=$!
  addr=""
  for _ in $(seq 1 120); do
    addr="$(sed -n 's/^listening hbase=//p' "$work/$name/cellar.out" | head -n1)"
    [[ -n "$addr" ]] && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.5
  done
  tail -n 20 "$work/$name/cellar.log" >&2
  return 1
}

passed=0
failed=0
# probe CASE TRUST KEY EXPECT: one TlsProbe run against $addr.
probe() {
  local what="$1" trust="$2" key="$3" expect="$4" out
  timeout 180 java "${java_flags[@]}" -cp "$classpath" org.cellar.hbasecompat.TlsProbe \
    "$addr" "$trust" "$key" "$expect" >"$work/probe-$what.out" 2>"$work/probe-$what.log"
  out="$(grep '^tls-probe:' "$work/probe-$what.out" | tail -n1)"
  if [[ "$out" == "tls-probe: passed"* ]]; then
    passed=$((passed + 1))
    echo "hbase-security: $what: ${out#tls-probe: }" | cut -c1-300 >&2
  else
    failed=$((failed + 1))
    echo "hbase-security: $what FAILED: ${out:-no result (log: $work/probe-$what.log)}" >&2
    tail -n 5 "$work/probe-$what.log" >&2
  fi
}

tls=(--tls-cert "$certs/server.pem" --tls-key "$certs/server.key")
if start_server required "${tls[@]}" --tls-client-ca "$certs/ca.pem"; then
  probe client-certificate "$certs/ca.pem" "$certs/alice.keystore.pem" ok
  probe no-client-certificate "$certs/ca.pem" - "alert: certificate_required"
  probe untrusted-server-ca "$other/ca.pem" "$certs/alice.keystore.pem" "PKIX path validation failed"
  probe expired-client-certificate "$certs/ca.pem" "$certs/old.keystore.pem" "alert: certificate_expired"
  # JDK 17.0.21 names the alert before its text ("(decrypt_error) Received fatal alert"), 17.0.15 did not.
  probe client-ca-not-trusted "$certs/ca.pem" "$other/mallory.keystore.pem" "Received fatal alert"
  probe plaintext-client plain - "serves only TLS"
  grep -q "plaintext client on the HBase TLS port" "$work/required/cellar.log" \
    && passed=$((passed + 1)) \
    || { failed=$((failed + 1)); echo "hbase-security: the server logged no line for the plaintext client" >&2; }
else
  failed=$((failed + 1)); echo "hbase-security: the TLS server did not start" >&2
fi
stop_server

if start_server elsewhere --tls-cert "$certs/elsewhere.pem" --tls-key "$certs/elsewhere.key"; then
  probe server-certificate-for-another-host "$certs/ca.pem" - "Failed to verify both host address and host name"
else
  failed=$((failed + 1)); echo "hbase-security: the server with another host's certificate did not start" >&2
fi
stop_server

printf '[tls]\nclient_auth = "optional"\n' >"$work/optional.toml"
if start_server optional "${tls[@]}" --tls-client-ca "$certs/ca.pem" --config "$work/optional.toml"; then
  probe optional-without-certificate "$certs/ca.pem" - ok
  probe optional-with-certificate "$certs/ca.pem" "$certs/alice.keystore.pem" ok
else
  failed=$((failed + 1)); echo "hbase-security: the optional-certificate server did not start" >&2
fi
stop_server

# acl MODE USER: one AclProbe run as USER against $addr.
acl() {
  local mode="$1" user="$2" out
  HADOOP_USER_NAME="$user" timeout 180 java "${java_flags[@]}" -cp "$classpath" \
    org.cellar.hbasecompat.AclProbe "$mode" "$addr" >"$work/acl-$mode.out" 2>"$work/acl-$mode.log"
  out="$(grep '^acl-probe:' "$work/acl-$mode.out" | tail -n1)"
  if [[ "$out" == "acl-probe: passed"* ]]; then
    passed=$((passed + 1))
    echo "hbase-security: acl $mode as $user: passed" >&2
  else
    failed=$((failed + 1))
    echo "hbase-security: acl $mode as $user FAILED: ${out:-no result (log: $work/acl-$mode.log)}" | cut -c1-2000 >&2
    tail -n 5 "$work/acl-$mode.log" >&2
  fi
}
printf '[security]\nauthorization = true\nsuperusers = ["admin"]\n' >"$work/acl.toml"
if start_server acl --config "$work/acl.toml"; then
  acl grant admin
  acl user bob
  acl revoke admin
  acl denied bob
  grep -q '"user":"bob"' "$work/acl/data/audit.log" 2>/dev/null \
    && passed=$((passed + 1)) \
    || { failed=$((failed + 1)); echo "hbase-security: the audit log has no line for bob's denied calls" >&2; }
else
  failed=$((failed + 1)); echo "hbase-security: the server with access control did not start" >&2
fi
stop_server

echo "hbase-security: ${passed} passed, ${failed} failed"
(( failed == 0 ))
