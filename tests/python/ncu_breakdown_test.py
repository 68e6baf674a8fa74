#!/usr/bin/env python3
"""tools/bench/ncu_breakdown.py sums a profiled step's kernels by kind from ncu's raw CSV.

A CSV in the layout of `ncu --csv --page raw` (profiler lines first, the header, a units row,
durations with thousands separators) gives the kinds, launches and milliseconds expected; a file
that is not such a CSV is refused with the reason.

Usage: ncu_breakdown_test.py TANDEM [unittest arguments...]
Exit:  0 every check passed, 1 a check failed, 2 usage error.
"""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "bench", "ncu_breakdown.py")

CSV = '''==PROF== Connected to process 4242
"ID","Process ID","Process Name","Kernel Name","Context","Stream","gpu__time_duration.sum"
"","","","","","","usecond"
"0","4242","tandem","nvjet_tst_192x128_64x4_1x2_h_bz_coopA_NNT","1","7","1,251.00"
"1","4242","tandem","void tandem::gpu::ops::cuda::rmsnorm_forward_vec_kernel<bf16, 32, 8>(...)","1","7","4.50"
"2","4242","tandem","void tandem::gpu::ops::cuda::attn::mma::forward_kernel<256, paged_keys>(...)","1","7","80.00"
"3","4242","tandem","void tandem::gpu::ops::cuda::residual_norm_vec_kernel<bf16, 32, 8>(...)","1","7","5.50"
"4","4242","tandem","void tandem::gpu::ops::cuda::sampling_kernel(...)","1","7","600.00"
"5","4242","tandem","void tandem::gpu::ops::cuda::map_kernel<add_op>(...)","1","7","3.00"
'''


class NcuBreakdownTest(unittest.TestCase):
    def run_on(self, text):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "ncu.csv")
            with open(path, "w") as f:
                f.write(text)
            return subprocess.run([sys.executable, SCRIPT, path, "--top", "3"], capture_output=True, text=True)

    def test_kernels_are_summed_by_kind_in_milliseconds(self):
        r = self.run_on(CSV)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout
        self.assertIn("6 kernels, 1.944 ms of device time", out)
        lines = {l.split()[0] + (" " + l.split()[1] if l.split()[0] == "matrix" else ""): l for l in out.splitlines()[2:8]}
        self.assertRegex(lines["matrix products"], r"matrix products\s+1\s+1\.251\s+64\.4%")
        self.assertRegex(lines["norm"], r"norm\s+2\s+0\.010\s+0\.5%")
        self.assertRegex(lines["attention"], r"attention\s+1\s+0\.080\s+4\.1%")
        self.assertRegex(lines["sampler"], r"sampler\s+1\s+0\.600\s+30\.9%")
        self.assertRegex(lines["element-wise"], r"element-wise\s+1\s+0\.003\s+0\.2%")
        self.assertIn("the 3 kernels that take the most time:", out)

    def test_a_file_without_the_header_is_refused_with_the_reason(self):
        r = self.run_on("not a csv of ncu\n")
        self.assertEqual(r.returncode, 1)
        self.assertIn("no header row starting with \"ID\"", r.stderr)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    unittest.main(argv=[sys.argv[0]] + sys.argv[2:])
