#!/usr/bin/env bash
# Moving a table in from HBase, three ways, timed end to end on the same data in one run:
#   import-hbase   `cellar import-hbase` of an HBase snapshot: HBase's store files read from its
#                  root and bulk loaded into Cellar's regions (docs/migration.md)
#   cellar         the scan-based Cellar route: `cellar export` of a Cellar copy of the table
#                  (imported once from the snapshot, untimed) to a file, then `cellar import`
#                  of that file into a new table
#   hbase-mr       HBase's own route: its Export MapReduce job (HBase table -> SequenceFiles in a
#                  local dir), then its Import job (-> a pre-created Cellar table, through
#                  Cellar's HBase port), both in Hadoop's local job runner
# Starts a ZooKeeper, Apache HBase 2.6.4 standalone (ports +--port-offset) and `cellar
# standalone --bulk-load-dir HBASE_ROOT --bulk-load-dir WORK --zk ZK` (HBase's Import task
# reads the target cluster's id from its ZooKeeper; the client itself talks to Cellar's HBase
# port through RpcConnectionRegistry), all on 127.0.0.1. On HBase: a table pre-split into
# --regions regions, --rows rows of --columns cells of --value-size random bytes (YCSB's record
# shape by default) written with a BufferedMutator, flushed, major-compacted, snapshotted.
# Every route's table is then compared with HBase's (`cellar verify-against`, every cell; or
# only its row count with --check count) and dropped. --passes passes, the order of the routes
# rotated each pass, both servers let go idle (under --idle-cpu % of a core over 3 s, at most
# --idle-wait s) before each route. MB/s = the snapshot's HFile bytes (10^6 bytes) / seconds.
#
# Writes a markdown report (medians over passes, import-hbase's ratio to each route, every
# pass's times, `uptime` before and after) to stdout and to --out (default
# docs/bench/move-in-DATE.md), and ends with one line
#   bench-move-in: import-hbase X MB/s; cellar export+import Y MB/s (Rx); HBase Export+Import Z MB/s (Sx)
# Every process it starts is stopped by its PID on exit.
#
# Usage: scripts/bench-move-in.sh [--rows N] [--columns N] [--value-size BYTES] [--regions N]
#          [--passes N] [--map-tasks N] [--check verify|count] [--out FILE] [--cellar BIN]
#          [--work DIR] [--keep] [--port-offset N] [--idle-cpu PCT] [--idle-wait S] [--timeout S]
#   --rows 200000 --columns 10 --value-size 100   the table: 200 MB of values, 289 MB of
#                         HFiles; the whole run takes 5-6 minutes on 2 shared cores
#   --regions 4           regions of the table (split at even hex prefixes of the row keys)
#   --passes 3            passes (each route once per pass; 3 puts each route once in each place)
#   --map-tasks 2         map tasks the local job runner runs at once (the machine's cores)
#   --check verify        `cellar verify-against` (every cell) or `count` (rows only)
#   --cellar BIN          default target/release/cellar (copied into the work dir at the start)
#   --port-offset 900     HBase's ports are 2181/16000-16030 plus this
#   --idle-cpu 5 --idle-wait 120   what idle means, and how long to wait for it
#   --timeout 1800        seconds any one step may take before the run fails
#   --work DIR            keep everything there (default: a temporary dir, removed after a run
#                         that succeeded unless --keep)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rows=200000
columns=10
value_size=100
regions=4
passes=3
map_tasks=2
check=verify
out=""
cellar_src="${CARGO_TARGET_DIR:-$repo/target}/release/cellar"
work=""
keep=0
offset=900
idle_cpu=5
idle_wait=120
step_timeout=1800

die() { echo "bench-move-in: $*" >&2; exit 1; }
need_value() { [[ $# -ge 2 && -n "$2" ]] || die "option $1 needs a value"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rows) need_value "$@"; rows="$2"; shift 2 ;;
    --columns) need_value "$@"; columns="$2"; shift 2 ;;
    --value-size) need_value "$@"; value_size="$2"; shift 2 ;;
    --regions) need_value "$@"; regions="$2"; shift 2 ;;
    --passes) need_value "$@"; passes="$2"; shift 2 ;;
    --map-tasks) need_value "$@"; map_tasks="$2"; shift 2 ;;
    --check) need_value "$@"; check="$2"; shift 2 ;;
    --out) need_value "$@"; out="$2"; shift 2 ;;
    --cellar) need_value "$@"; cellar_src="$2"; shift 2 ;;
    --work) need_value "$@"; work="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    --port-offset) need_value "$@"; offset="$2"; shift 2 ;;
    --idle-cpu) need_value "$@"; idle_cpu="$2"; shift 2 ;;
    --idle-wait) need_value "$@"; idle_wait="$2"; shift 2 ;;
    --timeout) need_value "$@"; step_timeout="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
positive() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "$1: '$2' is not a positive whole number"; }
positive --rows "$rows"; positive --columns "$columns"; positive --value-size "$value_size"
positive --regions "$regions"; positive --passes "$passes"; positive --map-tasks "$map_tasks"
positive --idle-wait "$idle_wait"; positive --timeout "$step_timeout"
[[ "$idle_cpu" =~ ^[0-9]+$ ]] || die "--idle-cpu: '$idle_cpu' is not a whole number"
[[ "$offset" =~ ^[0-9]+$ ]] && (( offset < 40000 )) || die "--port-offset: '$offset' is not a number below 40000"
(( regions <= 256 )) || die "--regions: at most 256"
(( columns <= 1000 )) || die "--columns: at most 1000"
(( value_size <= 1048576 )) || die "--value-size: at most 1048576 bytes"
[[ "$check" == verify || "$check" == count ]] || die "--check: 'verify' or 'count', not '$check'"
for tool in java mvn python3 curl; do command -v "$tool" >/dev/null || die "$tool is required"; done

today="$(date +%F)"
out="${out:-$repo/docs/bench/move-in-$today.md}"
mkdir -p "$(dirname "$out")" || die "cannot create the directory of --out $out"
temp_work=0
if [[ -z "$work" ]]; then work="$(mktemp -d -t cellar-move-in-bench.XXXXXX)"; temp_work=1; fi
mkdir -p "$work/hbase/root" "$work/raw"
work="$(cd "$work" && pwd)"
echo "work dir: $work" >&2

# --- processes we start, stopped by PID on any exit ------------------------------------------
# shellcheck source=lib/standalone.sh
. "$repo/scripts/lib/standalone.sh"
# shellcheck source=lib/java-flags.sh
. "$repo/scripts/lib/java-flags.sh"
succeeded=0
cleanup() {
  stop_standalone
  "$repo/scripts/hbase/stop.sh" "$work/hbase" >&2 || true
  "$repo/scripts/zookeeper.sh" stop "$work/zk" >&2 || true
  if (( succeeded && temp_work && ! keep )); then
    rm -rf "$work"
  else
    echo "bench-move-in: work dir kept: $work" >&2
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the Cellar binary: a copy, so that a rebuild of target/release during the run changes
# nothing (waiting up to 10 minutes for it to appear if a rebuild removed it) ---------------
for _ in $(seq 1 120); do [[ -x "$cellar_src" ]] && break; echo "waiting for $cellar_src..." >&2; sleep 5; done
[[ -x "$cellar_src" ]] || die "no Cellar binary at $cellar_src (cargo build --release -p cellar-cli, or --cellar BIN)"
cellar_built="$(date -r "$cellar_src" '+%F %T')"
cp "$cellar_src" "$work/cellar.bin" || die "cannot copy $cellar_src"
cellar="$work/cellar.bin"

lib="$("$repo/scripts/hbase/fetch.sh")" || die "fetching HBase's jars failed"
mrlib="$("$repo/scripts/hbase/fetch.sh" mapreduce)" || die "fetching HBase's MapReduce jars failed"

now_ms() { date +%s%3N; }
# cpu_ticks PID: user + system clock ticks of a process.
cpu_ticks() {
  local stat
  stat="$(cat "/proc/$1/stat")" || die "server pid $1 is gone"
  awk '{ print $12 + $13 }' <<<"${stat##*) }"
}
clk_tck="$(getconf CLK_TCK)"

# --- servers -----------------------------------------------------------------------------------
uptime_before="$(uptime)"
echo "starting ZooKeeper..." >&2
zk_line="$(timeout 120 "$repo/scripts/zookeeper.sh" start "$work/zk")" || die "starting ZooKeeper failed ($work/zk)"
zk_port="${zk_line##*:}"
echo "starting Apache HBase 2.6.4 (ports +$offset)..." >&2
hb_line="$(HBASE_HEAP=1g HBASE_PORT_OFFSET="$offset" HBASE_START_TIMEOUT=180 \
  timeout 300 "$repo/scripts/hbase/start.sh" "$work/hbase")" \
  || die "starting Apache HBase failed (logs in $work/hbase/logs)"
hbase_addr="${hb_line#listening hbase=}"
hbase_pid="$(cat "$work/hbase/hbase.pid")"
hbase_root="$work/hbase/root"
start_standalone "$cellar" "$work" --bulk-load-dir "$hbase_root" --bulk-load-dir "$work" \
  --zk "127.0.0.1:$zk_port" || die "cellar standalone did not start (log: $work/cellar.log)"
native="$(sed -n 's/^listening native=//p' "$work/cellar.out" | head -n1)"
echo "hbase pid $hbase_pid at $hbase_addr; cellar pid $cellar_pid at $cellar_addr (native $native); zookeeper 127.0.0.1:$zk_port" >&2

# wait_idle: until each server spends under idle_cpu % of a core over 3 s (flushes and
# compactions done), at most idle_wait s; prints the seconds waited.
wait_idle() {
  local started busy hb0 hb1 c0 c1 pct
  started=$SECONDS
  while :; do
    hb0="$(cpu_ticks "$hbase_pid")"; c0="$(cpu_ticks "$cellar_pid")"
    sleep 3
    hb1="$(cpu_ticks "$hbase_pid")"; c1="$(cpu_ticks "$cellar_pid")"
    busy=""
    pct=$(( (hb1 - hb0) * 100 / clk_tck / 3 )); (( pct >= idle_cpu )) && busy+=" hbase=${pct}%"
    pct=$(( (c1 - c0) * 100 / clk_tck / 3 )); (( pct >= idle_cpu )) && busy+=" cellar=${pct}%"
    if [[ -z "$busy" ]]; then echo $((SECONDS - started)); return 0; fi
    if (( SECONDS - started >= idle_wait )); then
      echo "  still busy after $((SECONDS - started)) s:$busy (going on)" >&2
      echo $((SECONDS - started)); return 0
    fi
  done
}

shell() { timeout 300 "$cellar" shell --connect "$native" -e "$1"; }
drop_table() { shell "disable '$1'; drop '$1'" >/dev/null 2>&1 || true; }

# --- the table on HBase, and its snapshot ------------------------------------------------------
# Split keys: REGIONS-1 even 4-hex-digit prefixes of the 16-hex-digit row keys.
splits=()
for ((i = 1; i < regions; i++)); do splits+=("$(printf '%04x' $(( i * 65536 / regions )))"); done
split_csv="$(IFS=,; echo "${splits[*]}")"
src=movein_src
snapshot=movein_snap
echo "loading $rows rows x $columns cells x $value_size bytes into $src on HBase ($regions regions)..." >&2
t0="$(now_ms)"
(cd "$work" && timeout "$step_timeout" java "${hbase_client_java_flags[@]}" -Xmx1g -cp "$lib/*" \
  "$repo/java/bench-move-in/MoveInBench.java" load "$hbase_addr" "$src" "$rows" "$columns" "$value_size" \
  "$split_csv" "$snapshot" >"$work/load.out" 2>"$work/load.log") \
  || { tail -n 30 "$work/load.log" >&2; die "loading HBase failed ($work/load.log)"; }
load_s="$(( ($(now_ms) - t0) / 1000 ))"
cat "$work/load.out" >&2
cells=$(( rows * columns ))
grep -q "^loaded $rows rows, $cells cells" "$work/load.out" || die "the loader did not report $rows rows ($work/load.out)"

# The snapshot's HFiles, as HBase's own SnapshotInfo lists them, sized on disk.
timeout 300 java "${hbase_client_java_flags[@]}" -Xmx512m -cp "$work/hbase/conf:$lib/*" \
  org.apache.hadoop.hbase.snapshot.SnapshotInfo -snapshot "$snapshot" -files \
  >"$work/snapshot-info.txt" 2>"$work/snapshot-info.log" \
  || { tail -n 20 "$work/snapshot-info.log" >&2; die "HBase's SnapshotInfo failed"; }
hfile_bytes=0
hfiles=0
while read -r path; do
  f=""
  for cand in "$hbase_root/data/default/$path" "$hbase_root/archive/data/default/$path"; do
    [[ -f "$cand" ]] && { f="$cand"; break; }
  done
  [[ -n "$f" ]] || die "the snapshot's file $path is neither in data/ nor archive/ of $hbase_root"
  hfile_bytes=$(( hfile_bytes + $(stat -c %s "$f") ))
  hfiles=$(( hfiles + 1 ))
done < <(awk -v t="$src/" '{ for (i = 1; i <= NF; i++) if (index($i, t) == 1) print $i }' "$work/snapshot-info.txt")
(( hfiles > 0 )) || die "SnapshotInfo listed no files ($work/snapshot-info.txt)"
echo "snapshot $snapshot: $hfiles HFiles, $hfile_bytes bytes" >&2

# The scan-based Cellar route needs the table in Cellar: a copy kept for every pass (imported
# once from the snapshot, untimed).
timeout "$step_timeout" "$cellar" import-hbase --snapshot "$snapshot" --hbase-root "$hbase_root" \
  --connect "$native" --table movein_copy >"$work/copy.out" 2>&1 \
  || { tail -n 20 "$work/copy.out" >&2; die "importing the copy for the cellar route failed"; }

# check_table TABLE: the Cellar table holds what HBase's does; prints "ROWS CELLS" (cells "-"
# with --check count).
check_table() {
  local t="$1" line r c
  if [[ "$check" == verify ]]; then
    line="$(timeout "$step_timeout" "$cellar" verify-against --hbase "$hbase_addr" --cellar "$cellar_addr" \
      --table "$src" --cellar-table "$t" --recheck 0 2>"$work/raw/verify-$t.log" | tee "$work/raw/verify-$t.txt" \
      | grep '^verify-against: ' || true)"
    [[ "$line" =~ ^verify-against:\ equal:\ ([0-9]+)\ rows,\ ([0-9]+)\ cells ]] \
      || { cat "$work/raw/verify-$t.txt" >&2; die "table $t is not equal to HBase's $src"; }
    r="${BASH_REMATCH[1]}"; c="${BASH_REMATCH[2]}"
  else
    r="$(shell "count '$t', INTERVAL => 1000000000" | sed -n 's/^\([0-9]*\) row(s).*/\1/p' | head -n1)"
    c=-
  fi
  [[ "$r" == "$rows" ]] || die "table $t holds ${r:-no} rows, not $rows"
  [[ "$c" == - || "$c" == "$cells" ]] || die "table $t holds $c cells, not $cells"
  echo "$r $c"
}
copy_check="$(check_table movein_copy)"
echo "cellar copy movein_copy: $copy_check (rows cells)" >&2

# --- the routes -----------------------------------------------------------------------------------
mr_props() { # the -D settings of a job in Hadoop's local runner, its files under $1
  printf '%s\n' -D mapreduce.framework.name=local -D fs.defaultFS=file:/// \
    -D "hadoop.tmp.dir=$1/tmp" -D "mapreduce.jobtracker.staging.root.dir=$1/staging" \
    -D "mapreduce.cluster.local.dir=$1/local" -D "mapreduce.local.map.tasks.maximum=$map_tasks" \
    -D hbase.client.registry.impl=org.apache.hadoop.hbase.client.RpcConnectionRegistry
}
# run_job CLASS LOGNAME ARGS...: one HBase MapReduce tool in the local runner, from $work/mr.
run_job() {
  local class="$1" name="$2"
  shift 2
  cat > "$work/mr/log4j2-$name.properties" <<PROPS
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = $work/raw/$name.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{ISO8601} %-5p [%t] %c{2}: %m%n
rootLogger = INFO,file
PROPS
  # In $work/mr: the local runner links its distributed cache into the working directory.
  (cd "$work/mr" && timeout "$step_timeout" java "${hbase_client_java_flags[@]}" -Xmx1g \
    "-Dlog4j2.configurationFile=file:$work/mr/log4j2-$name.properties" -cp "$mrlib/*" \
    "org.apache.hadoop.hbase.mapreduce.$class" "$@" >"$work/raw/$name.out" 2>&1) \
    || { grep -E 'ERROR|Exception' "$work/raw/$name.log" | head -n 20 >&2; die "HBase's $class failed ($work/raw/$name.log)"; }
  grep -q 'completed successfully' "$work/raw/$name.log" || die "HBase's $class did not complete ($work/raw/$name.log)"
}

: > "$work/results.tsv"
# route NAME PASS: runs one route, checks and drops its table; appends to results.tsv
#   pass route step1_ms step2_ms total_ms settle_s rows cells
route() {
  local name="$1" pass="$2" t="movein_${1//-/_}_p$2" s1=0 s2=0 t0 t1 t2 settle checked line
  echo "pass $pass: $name" >&2
  drop_table "$t"
  case "$name" in
    import-hbase)
      # Its progress lines (stderr) stamped with the time they came: step 1 ends with the line
      # saying every block of every file was checked, step 2 (the bulk loads) with the command.
      t0="$(now_ms)"
      { timeout "$step_timeout" "$cellar" import-hbase --snapshot "$snapshot" --hbase-root "$hbase_root" \
          --connect "$native" --table "$t" 2>&1 >"$work/raw/$t.out" \
          | while IFS= read -r line; do printf '%s %s\n' "$(now_ms)" "$line"; done >"$work/raw/$t.err"; } \
        || { tail -n 20 "$work/raw/$t.err" >&2; die "import-hbase failed"; }
      t2="$(now_ms)"
      # (after any "\rchecked N/M files" progress it printed on the same line)
      t1="$(sed -n 's/^\([0-9]*\) .*checked [0-9]* HBase files .*every block reads$/\1/p' "$work/raw/$t.err" | head -n1)"
      [[ -n "$t1" ]] || die "import-hbase printed no 'checked ... every block reads' line ($work/raw/$t.err)"
      s1=$(( t1 - t0 )); s2=$(( t2 - t1 ))
      echo "  $(cat "$work/raw/$t.out")" >&2
      ;;
    cellar)
      rm -f "$work/export.cellar"
      t0="$(now_ms)"
      timeout "$step_timeout" "$cellar" export --connect "$native" --table movein_copy \
        --out "$work/export.cellar" >"$work/raw/$t-export.out" 2>&1 \
        || { tail -n 20 "$work/raw/$t-export.out" >&2; die "cellar export failed"; }
      t1="$(now_ms)"
      timeout "$step_timeout" "$cellar" import --connect "$native" --in "$work/export.cellar" --table "$t" \
        >"$work/raw/$t-import.out" 2>&1 \
        || { tail -n 20 "$work/raw/$t-import.out" >&2; die "cellar import failed"; }
      s1=$(( t1 - t0 )); s2=$(( $(now_ms) - t1 ))
      echo "  $(tail -n1 "$work/raw/$t-export.out"); $(stat -c %s "$work/export.cellar") bytes" >&2
      echo "  $(tail -n1 "$work/raw/$t-import.out")" >&2
      rm -f "$work/export.cellar"
      ;;
    hbase-mr)
      rm -rf "$work/mr"; mkdir -p "$work/mr"
      local quoted="'${split_csv//,/\', \'}'"
      shell "create '$t', 'f', {SPLITS => [$quoted]}" >/dev/null || die "creating $t on Cellar failed"
      local props
      mapfile -t props < <(mr_props "$work/mr/job")
      t0="$(now_ms)"
      run_job Export "$t-export" "${props[@]}" -D "hbase.client.bootstrap.servers=$hbase_addr" \
        "$src" "file://$work/mr/export"
      t1="$(now_ms)"
      run_job Import "$t-import" "${props[@]}" -D "hbase.client.bootstrap.servers=$cellar_addr" \
        -D hbase.zookeeper.quorum=127.0.0.1 -D "hbase.zookeeper.property.clientPort=$zk_port" \
        "$t" "file://$work/mr/export"
      s1=$(( t1 - t0 )); s2=$(( $(now_ms) - t1 ))
      echo "  Export: $(du -sb "$work/mr/export" | cut -f1) bytes of SequenceFiles" >&2
      rm -rf "$work/mr"
      ;;
  esac
  settle="$(wait_idle)"
  checked="$(check_table "$t")"
  echo "  ${s1} + ${s2} ms; idle again after ${settle} s; checked: $checked (rows cells)" >&2
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$pass" "$name" "$s1" "$s2" $(( s1 + s2 )) "$settle" \
    ${checked% *} ${checked#* } >> "$work/results.tsv"
  drop_table "$t"
}

routes=(import-hbase cellar hbase-mr)
orders=()
for pass in $(seq 1 "$passes"); do
  order=()
  for ((i = 0; i < ${#routes[@]}; i++)); do order+=("${routes[$(( (i + pass - 1) % ${#routes[@]} ))]}"); done
  orders+=("$(IFS=,; echo "${order[*]}")")
  for name in "${order[@]}"; do
    waited="$(wait_idle)"
    echo "pass $pass: servers idle after ${waited} s" >&2
    route "$name" "$pass"
  done
done
uptime_after="$(uptime)"

# --- the report -------------------------------------------------------------------------------------
commit="$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
dirty=""
[[ -n "$(git -C "$repo" status --porcelain --untracked-files=no -- crates Cargo.toml Cargo.lock 2>/dev/null)" ]] \
  && dirty=" (with uncommitted changes under crates/)"
args="--rows $rows --columns $columns --value-size $value_size --regions $regions --passes $passes --map-tasks $map_tasks --check $check"
mem_gib="$(awk '/MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo)"
M_TODAY="$today" M_ARGS="$args" M_COMMIT="$commit$dirty" M_BUILT="$cellar_built" M_MAP_TASKS="$map_tasks" \
M_CPUS="$(nproc)" M_MEM_GIB="$mem_gib" M_SRC="$src" M_SNAPSHOT="$snapshot" M_REGIONS="$regions" \
M_ROWS="$rows" M_COLUMNS="$columns" M_VALUE_SIZE="$value_size" M_HFILES="$hfiles" \
M_HFILE_BYTES="$hfile_bytes" M_CHECK="$check" M_UPTIME_BEFORE="$uptime_before" \
M_UPTIME_AFTER="$uptime_after" M_LOAD_S="$load_s" \
python3 - "$work/results.tsv" "$out" <<'PY'
import os, statistics, sys
m = {k[2:].lower(): v for k, v in os.environ.items() if k.startswith("M_")}
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
hfile_bytes = int(m["hfile_bytes"])
mb = hfile_bytes / 1e6
names = {"import-hbase": "`cellar import-hbase` (snapshot)",
         "cellar": "`cellar export` + `cellar import`",
         "hbase-mr": "HBase Export + Import (MapReduce, local runner)"}
steps = {"import-hbase": ("check", "bulk load"), "cellar": ("export", "import"),
         "hbase-mr": ("Export", "Import")}
by = {}
for p, r, s1, s2, tot, settle, nr, nc in rows:
    by.setdefault(r, []).append(dict(p=int(p), s1=int(s1) / 1000, s2=int(s2) / 1000,
                                     tot=int(tot) / 1000, settle=int(settle), rows=nr, cells=nc))
med = {r: statistics.median(mb / x["tot"] for x in v) for r, v in by.items()}
a = med["import-hbase"]
n_rows, n_cols = int(m["rows"]), int(m["columns"])
L = [f"# Moving a table in: `cellar import-hbase` beside the scan-based routes ({m['today']})", ""]
L.append(f"`scripts/bench-move-in.sh {m['args']}`: Cellar at HEAD {m['commit']}, binary built "
         f"{m['built']}; Apache HBase 2.6.4 standalone (1 GiB heap); Hadoop 3.4.2's local job "
         f"runner ({m['map_tasks']} map tasks at once, 1 GiB heap); {m['cpus']} vCPUs, "
         f"{m['mem_gib']} GiB, shared with other work.")
L.append("")
L.append(f"Data: table `{m['src']}` on HBase, {m['regions']} regions, {n_rows:,} rows × {n_cols} "
         f"cells × {m['value_size']} bytes ({n_rows * n_cols:,} cells, random values), written in "
         f"{m['load_s']} s, flushed and major-compacted; snapshot `{m['snapshot']}`: {m['hfiles']} "
         f"HFiles, {hfile_bytes:,} bytes ({mb:.1f} MB). MB/s = these HFile bytes (10^6) / the "
         f"route's seconds end to end (both steps for the two-step routes). Every imported table "
         f"was checked against HBase's ({m['check']}).")
L.append("")
L.append(f"Load before: `{m['uptime_before'].strip()}`  ")
L.append(f"Load after: `{m['uptime_after'].strip()}`")
L.append("")
L.append(f"| route | seconds (median of {len(by['import-hbase'])}) | MB/s (median) | "
         f"import-hbase ÷ route | MB/s per pass |")
L.append("|---|---:|---:|---:|---|")
for r in ("import-hbase", "cellar", "hbase-mr"):
    v = by[r]
    s1, s2 = steps[r]
    secs = statistics.median(x["tot"] for x in v)
    secs_s = (f"{secs:.1f} ({s1} {statistics.median(x['s1'] for x in v):.1f} + "
              f"{s2} {statistics.median(x['s2'] for x in v):.1f})")
    ratio = "" if r == "import-hbase" else f"**{a / med[r]:.1f}×**"
    per = ", ".join(f"{mb / x['tot']:.1f}" for x in sorted(v, key=lambda x: x["p"]))
    L.append(f"| {names[r]} | {secs_s} | {med[r]:.1f} | {ratio} | {per} |")
L.append("")
L.append("Every pass, in the order run. Steps: import-hbase's check of every block of every "
         "HBase file (until it says so), then its bulk loads; export, then import. *idle after*: "
         "seconds until both servers were idle again (3 at least), the background work the route "
         "left, not in its time.")
L.append("")
L.append("| pass | route | step 1 s | step 2 s | total s | MB/s | idle after s | rows | cells |")
L.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
for p, r, *_ in rows:
    x = next(x for x in by[r] if x["p"] == int(p))
    s2 = f"{x['s2']:.1f}"
    L.append(f"| {x['p']} | {r} | {x['s1']:.1f} | {s2} | {x['tot']:.1f} | {mb / x['tot']:.1f} | "
             f"{x['settle']} | {x['rows']} | {x['cells']} |")
L.append("")
L.append("Cellar runs with `--zk` on a ZooKeeper of its own: HBase's Import task reads the target "
         "cluster's id from ZooKeeper (its client talks to Cellar's HBase port through "
         "RpcConnectionRegistry). Every copy of the data fits in the page cache many times over "
         "and no cache is dropped: the routes read from memory. The two-step routes include a "
         "JVM's or a process's start per step, as a user running them pays it.")
L.append("")
short = [r for r in ("cellar", "hbase-mr") if a / med[r] < 5]
if short:
    L.append("Goal (import-hbase ≥ 5× each scan-based route, medians): **not met** for "
             + ", ".join(f"{r} ({a / med[r]:.1f}×)" for r in short) + ".")
else:
    L.append("Goal (import-hbase ≥ 5× each scan-based route, medians): met.")
text = "\n".join(L) + "\n"
open(sys.argv[2], "w").write(text)
sys.stdout.write(text)
print(f"bench-move-in: import-hbase {a:.1f} MB/s; cellar export+import {med['cellar']:.1f} MB/s "
      f"({a / med['cellar']:.1f}x); HBase Export+Import {med['hbase-mr']:.1f} MB/s "
      f"({a / med['hbase-mr']:.1f}x)")
PY
echo "report: $out" >&2
succeeded=1
