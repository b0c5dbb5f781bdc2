#!/usr/bin/env python3
"""Tests of summarize.py on YCSB output written the way YCSB 0.17 writes it:
`python3 -m unittest discover -s scripts/hbase`."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import summarize  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def ycsb_output(prefix, throughput, p50, p99, p999):
    """The text of one run phase of workload C, sections named with `prefix` ("" or "Hdr")."""
    return "\n".join([
        "[OVERALL], RunTime(ms), 20000",
        f"[OVERALL], Throughput(ops/sec), {throughput}",
        "[TOTAL_GCS_G1_Young_Generation], Count, 32",
        f"[{prefix}READ], Operations, 1000",
        f"[{prefix}READ], AverageLatency(us), 200.0",
        f"[{prefix}READ], 50thPercentileLatency(us), {p50}",
        f"[{prefix}READ], 99thPercentileLatency(us), {p99}",
        f"[{prefix}READ], 99.9PercentileLatency(us), {p999}",
        f"[{prefix}READ], Return=OK, 1000",
        "[RawREAD], Total Operations, 1000" if prefix else "",
        f"[{prefix}CLEANUP], Operations, 1",
        f"[{prefix}CLEANUP], 99thPercentileLatency(us), 4807",
    ]) + "\n"


def raw_output(warmup_us, steady_us):
    """1000 reads: the first 200 take `warmup_us`, then 790 take 100..889 us in turn and the
    last 10 take `steady_us`; timestamps rise by 1 ms per 10 reads. A CLEANUP line follows."""
    lines = ["RawREAD latency raw data: op, timestamp(ms), latency(us)"]
    latencies = [warmup_us] * 200 + list(range(100, 890)) + [steady_us] * 10
    for i, us in enumerate(latencies):
        lines.append(f"RawREAD,{1_000_000 + i // 10},{us}")
    lines += ["RawCLEANUP latency raw data: op, timestamp(ms), latency(us)",
              "RawCLEANUP,1000100,4807"]
    return "\n".join(lines) + "\n"


class SteadyPercentiles(unittest.TestCase):
    def test_the_first_fifth_of_each_operation_is_left_out(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "c.raw")
            with open(path, "w", encoding="utf-8") as f:
                f.write(raw_output(warmup_us=50_000, steady_us=5_000))
            steady = summarize.steady_percentiles(path)
        self.assertEqual(sorted(steady), ["READ"])
        read = steady["READ"]
        self.assertEqual(read["operations"], 800)
        # 800 kept: 790 of 100..889 and ten of 5000. The 400th is 499; the 792nd (99 %) and
        # the 800th (99.9 %) are among the ten slow ones; no 50 ms warm-up read is left.
        self.assertEqual(read["p50_us"], 499)
        self.assertEqual(read["p99_us"], 5_000)
        self.assertEqual(read["p999_us"], 5_000)

    def test_percentile_is_hdrhistograms_definition(self):
        values = list(range(1, 101))
        self.assertEqual(summarize.percentile(values, 0.50), 50)
        self.assertEqual(summarize.percentile(values, 0.99), 99)
        self.assertEqual(summarize.percentile(values, 0.999), 100)
        self.assertEqual(summarize.percentile([7], 0.99), 7)


class Summary(unittest.TestCase):
    def test_medians_and_ratios_use_whole_and_steady_percentiles(self):
        with tempfile.TemporaryDirectory() as d:
            phases = []
            # HBase and Cellar through the Java client (Hdr-prefixed sections, raw output);
            # Cellar's native bench (plain sections, no raw output).
            for sys_name, prefix, whole, warm, slow in [
                ("hbase", "Hdr", (400, 2000, 9000), 60_000, 3_000),
                ("cellar", "Hdr", (200, 1000, 4000), 40_000, 900),
                ("cellar-native", "", (150, 300, 800), None, None),
            ]:
                path = os.path.join(d, f"{sys_name}-c.txt")
                with open(path, "w", encoding="utf-8") as f:
                    f.write(ycsb_output(prefix, 5000.0, *whole))
                if warm is not None:
                    with open(path + ".raw", "w", encoding="utf-8") as f:
                        f.write(raw_output(warm, slow))
                phases.append(f"{sys_name}\tc\t1\t1\t100\t{path}")
            tsv = os.path.join(d, "phases.tsv")
            with open(tsv, "w", encoding="utf-8") as f:
                f.write("\n".join(phases) + "\n")
            out = os.path.join(d, "results.json")
            run = subprocess.run(
                [sys.executable, os.path.join(HERE, "summarize.py"), "--phases", tsv,
                 "--clk-tck", "100", "--workloads", "c", "--out", out,
                 "--meta", "floor_cpu_us_per_call=40.6", "floor_p50_us=130", "floor_p99_us=410",
                 "floor_p999_us=2055", "floor_one_cpu_cpu_us_per_call=14.0",
                 "floor_one_cpu_p99_us=66"],
                capture_output=True, text=True, check=False)
            self.assertEqual(run.returncode, 0, run.stderr)
            with open(out, encoding="utf-8") as f:
                result = json.load(f)
        row = result["medians"][0]
        hbase, cellar, native = row["hbase"], row["cellar"], row["cellar-native"]
        self.assertEqual(list(hbase["ops"]), ["READ"], "Hdr prefix not removed, or CLEANUP kept")
        self.assertEqual(hbase["ops"]["READ"]["p999_us"], 9000)
        self.assertEqual(hbase["ops"]["READ"]["steady"]["p99_us"], 3000)
        self.assertEqual(cellar["ops"]["READ"]["steady"]["p99_us"], 900)
        # No raw output: the steady figures are the whole phase's.
        self.assertEqual(native["ops"]["READ"]["steady"]["p99_us"], 300)
        ratios = row["cellar_over_hbase"]
        self.assertAlmostEqual(ratios["p99_us"]["READ"], 0.5)
        self.assertAlmostEqual(ratios["p999_us"]["READ"], 4000 / 9000)
        self.assertAlmostEqual(ratios["steady_p99_us"]["READ"], 0.3)
        self.assertAlmostEqual(row["cellar-native_over_hbase"]["steady_p99_us"]["READ"], 0.1)
        self.assertAlmostEqual(hbase["server_cpu_us_per_op"], 1000.0)
        self.assertIn("[3,000]", run.stdout)
        # The floor measured before the servers is kept and printed beside the table.
        self.assertEqual(result["meta"]["floor_p99_us"], "410")
        self.assertIn("p99 410", run.stdout)
        self.assertIn("14.0 us of CPU per call", run.stdout)


if __name__ == "__main__":
    unittest.main()
