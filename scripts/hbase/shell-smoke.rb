# A smoke test for HBase's own shell (scripts/hbase-shell.sh scripts/hbase/shell-smoke.rb): a
# table with split points, puts, scan, count, list_regions, a merge of the first two regions by
# encoded name, scan again; then the snapshot commands: snapshot, list_snapshots, writes after
# the snapshot, clone_snapshot (the clone holds the snapshot's cells), restore_snapshot of the
# disabled table (it holds them again), delete_snapshot; then disable and drop of both tables.
# Each result a test compares is also printed on a marker line of its own (KEY=value at the
# start of a line, e.g. REGIONS_BEFORE=4): grep them with '^[A-Z_]*='. Encoded region names
# (MERGING=) and timestamps differ between servers; the other markers print row keys, cells
# (row/family:qualifier=value), region start keys and snapshot names instead, which must not.
# scripts/hbase-shell-parity.sh runs this file against Apache HBase and Cellar and compares them.
#
# Runs as the shell runs a file (`hbase shell -n FILE`): line by line in the shell's workspace,
# where the commands are methods and @shell / @hbase are the shell's own objects. Idempotent:
# tables and the snapshot left over from an interrupted run are removed first.

tn = org.apache.hadoop.hbase.TableName.valueOf('shell_smoke')
java_admin = @shell.admin.instance_variable_get(:@admin)
connection = @hbase.instance_variable_get(:@connection)
bytes = org.apache.hadoop.hbase.util.Bytes
cell_util = org.apache.hadoop.hbase.CellUtil
region_starts = lambda { java_admin.getRegions(tn).to_a.sort { |a, b| bytes.compareTo(a.getStartKey, b.getStartKey) } }
row_keys = lambda { t = connection.getTable(tn); s = t.getScanner(org.apache.hadoop.hbase.client.Scan.new); keys = s.to_a.map { |r| bytes.toString(r.getRow) }; s.close; t.close; keys.join(',') }
# Every cell of a table, in scan order, as row/family:qualifier=value joined by ','.
cells_of = lambda { |name| t = connection.getTable(org.apache.hadoop.hbase.TableName.valueOf(name)); s = t.getScanner(org.apache.hadoop.hbase.client.Scan.new); out = s.to_a.flat_map { |r| r.rawCells.to_a.map { |c| "#{bytes.toString(cell_util.cloneRow(c))}/#{bytes.toString(cell_util.cloneFamily(c))}:#{bytes.toString(cell_util.cloneQualifier(c))}=#{bytes.toString(cell_util.cloneValue(c))}" } }; s.close; t.close; out.join(',') }
starts_of = lambda { |name| java_admin.getRegions(org.apache.hadoop.hbase.TableName.valueOf(name)).to_a.map { |r| bytes.toString(r.getStartKey) }.sort.join(',') }
# The snapshots whose names start with shell_smoke, from the shell's list_snapshots (it prints
# its table, then returns the names), sorted and joined by ','.
smoke_snapshots = lambda { list_snapshots.to_a.select { |n| n.start_with?('shell_smoke') }.sort.join(',') }

# Left over from an interrupted run?
if @shell.admin.exists?('shell_smoke') then disable 'shell_smoke' if @shell.admin.enabled?('shell_smoke'); drop 'shell_smoke'; end
if @shell.admin.exists?('shell_smoke_clone') then disable 'shell_smoke_clone' if @shell.admin.enabled?('shell_smoke_clone'); drop 'shell_smoke_clone'; end
delete_snapshot 'shell_smoke_snap' if @shell.admin.list_snapshot('shell_smoke_snap').size > 0

create 'shell_smoke', 'f', SPLITS => ['g', 'n', 't']
put 'shell_smoke', 'a1', 'f:q', 'va1'
put 'shell_smoke', 'c2', 'f:q', 'vc2'
put 'shell_smoke', 'h1', 'f:q', 'vh1'
put 'shell_smoke', 'o1', 'f:q', 'vo1'
put 'shell_smoke', 'u1', 'f:q', 'vu1'
put 'shell_smoke', 'u1', 'f:r', 'vu1r'
scan 'shell_smoke'
puts "ROWS_BEFORE=#{row_keys.call}"
rows = count 'shell_smoke'
puts "COUNT_BEFORE=#{rows}"
list_regions 'shell_smoke'
regions = region_starts.call
puts "REGIONS_BEFORE=#{regions.size}"
puts "REGION_STARTS_BEFORE=#{regions.map { |r| bytes.toString(r.getStartKey) }.join(',')}"
puts "MERGING=#{regions[0].getEncodedName},#{regions[1].getEncodedName}"
merge_region regions[0].getEncodedName, regions[1].getEncodedName
regions = region_starts.call
puts "REGIONS_AFTER=#{regions.size}"
puts "REGION_STARTS_AFTER=#{regions.map { |r| bytes.toString(r.getStartKey) }.join(',')}"
scan 'shell_smoke'
puts "ROWS_AFTER=#{row_keys.call}"
rows = count 'shell_smoke'
puts "COUNT_AFTER=#{rows}"

# Snapshots: of the merged table, while it is enabled.
snapshot 'shell_smoke', 'shell_smoke_snap'
puts "SNAPSHOTS=#{smoke_snapshots.call}"
puts "SNAPSHOT_CELLS=#{cells_of.call('shell_smoke')}"
# Writes after the snapshot: an overwrite, a new row, a deleted row.
put 'shell_smoke', 'a1', 'f:q', 'va1-new'
put 'shell_smoke', 'p5', 'f:q', 'vp5'
deleteall 'shell_smoke', 'h1'
puts "ROWS_AFTER_SNAPSHOT=#{cells_of.call('shell_smoke')}"
# A clone is a new table with the snapshot's cells and regions.
clone_snapshot 'shell_smoke_snap', 'shell_smoke_clone'
scan 'shell_smoke_clone'
puts "CLONE_ROWS=#{cells_of.call('shell_smoke_clone')}"
puts "CLONE_REGION_STARTS=#{starts_of.call('shell_smoke_clone')}"
# A restore puts the disabled table back as it was at the snapshot.
disable 'shell_smoke'
restore_snapshot 'shell_smoke_snap'
enable 'shell_smoke'
scan 'shell_smoke'
puts "RESTORED_ROWS=#{cells_of.call('shell_smoke')}"
puts "RESTORED_REGION_STARTS=#{starts_of.call('shell_smoke')}"
rows = count 'shell_smoke'
puts "RESTORED_COUNT=#{rows}"
delete_snapshot 'shell_smoke_snap'
puts "SNAPSHOTS_AFTER_DELETE=#{smoke_snapshots.call}"
# The clone does not depend on the deleted snapshot.
puts "CLONE_ROWS_AFTER_DELETE=#{cells_of.call('shell_smoke_clone')}"
disable 'shell_smoke_clone'
drop 'shell_smoke_clone'
puts "CLONE_EXISTS_AFTER_DROP=#{@shell.admin.exists?('shell_smoke_clone')}"

disable 'shell_smoke'
drop 'shell_smoke'
puts "EXISTS_AFTER_DROP=#{@shell.admin.exists?('shell_smoke')}"
puts "SMOKE_DONE=ok"
