#!/usr/bin/env python3
"""fig7.py on call graphs compiled here (two stackcheck fixtures): the sweep
has every MaxPath, its counts agree with stackcheck's own, and the JSON and
(with matplotlib) the PNG are written. Exit 77 without gcc."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fig7  # noqa: E402

FIXTURES = os.path.join(fig7.ROOT, "tests", "stackcheck", "fixtures")


class Fig7(unittest.TestCase):
    def test_sweep_from_compiled_graphs(self):
        with tempfile.TemporaryDirectory() as tmp:
            for name in ("chain.c", "diamond.c"):
                subprocess.run(["gcc", "-c", "-O0", "-fcallgraph-info=su", os.path.join(FIXTURES, name),
                                "-o", os.path.join(tmp, name + ".o")], check=True, cwd=tmp)
            out = os.path.join(tmp, "out")
            self.assertEqual(fig7.main(["--ci", tmp, "--out-dir", out]), 0)
            with open(os.path.join(out, "stacks_fig7.json")) as f:
                data = json.load(f)
            rows = data["sweep"]
            self.assertEqual([r["max_path"] for r in rows], fig7.SWEEP)
            direct = fig7.sweep([tmp])["sweep"]
            self.assertEqual([r["instrumented"] for r in rows], [r["instrumented"] for r in direct])
            self.assertTrue(all(r["call_sites"] == rows[0]["call_sites"] > 0 for r in rows))
            self.assertGreater(rows[0]["instrumented"], rows[-1]["instrumented"])  # 512 B needs more than 16 KiB
            try:
                import matplotlib  # noqa: F401
            except ImportError:
                return
            self.assertGreater(os.path.getsize(os.path.join(out, "stacks_fig7.png")), 1000)

    def test_bad_input_is_an_error_not_a_traceback(self):
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "bad.ci"), "w") as f:
                f.write("graph: { this is not vcg")
            self.assertEqual(fig7.main(["--ci", os.path.join(tmp, "bad.ci"), "--out-dir", tmp]), 1)


if __name__ == "__main__":
    if not shutil.which("gcc"):
        print("gcc not found: skipped")
        sys.exit(77)
    unittest.main()
