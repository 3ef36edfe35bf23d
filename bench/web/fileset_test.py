#!/usr/bin/env python3
"""Tests of bench/web/fileset.py (CTest: Bench.web.FilesetIsExactAndFollowsTheAccessModel).

Sizes and names exact for all 36 files; contents a pure function of (seed,
dir, class, file) and different between files and seeds; a set reused
without a rewrite (mtimes and inodes unchanged) and regenerated for another
seed, never left half made by an interrupted run; --check catching a changed
byte; and sample() against prob() by Pearson's chi-square goodness of fit
(200,000 draws, fixed RNG seed, so deterministic) for the class, the file
within its class, class x file and the directory, at alpha = 1e-6 per test
(critical values by the Wilson-Hilferty approximation, no scipy), plus a
check that the same test rejects a wrong model. Sets of 1-2 directories in a
temporary directory: a few seconds. Python 3 standard library only."""
import collections
import hashlib
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fileset  # noqa: E402

SCRIPT = os.path.join(HERE, "fileset.py")
ALPHA = 1e-6  # per chi-square test: a false failure is (with a fixed seed: would be) negligible
DRAWS = 200_000


def chi2_critical(df, alpha):
    """Upper-alpha critical value of chi-square with df degrees of freedom (Wilson-Hilferty)."""
    z = statistics.NormalDist().inv_cdf(1 - alpha)
    h = 2 / (9 * df)
    return df * (1 - h + z * h ** 0.5) ** 3


def chi2(counts, probs, n):
    """Pearson's statistic of observed counts (dict key -> n) against probabilities (dict key -> p)."""
    assert abs(sum(probs.values()) - 1) < 1e-12, sum(probs.values())
    assert set(counts) <= set(probs), set(counts) - set(probs)
    return sum((counts.get(k, 0) - n * p) ** 2 / (n * p) for k, p in probs.items())


class Names(unittest.TestCase):
    def test_sizes_are_exact(self):
        want = [[102, 204, 307, 409, 512, 614, 716, 819, 921],
                [1024, 2048, 3072, 4096, 5120, 6144, 7168, 8192, 9216],
                [10240, 20480, 30720, 40960, 51200, 61440, 71680, 81920, 92160],
                [102400, 204800, 307200, 409600, 512000, 614400, 716800, 819200, 921600]]
        for c in range(4):
            for i in range(9):
                self.assertEqual(fileset.file_size(c, i), want[c][i], (c, i))
                self.assertEqual(len(fileset.expected_bytes(7, 0, c, i)), want[c][i], (c, i))
        self.assertEqual(fileset.DIR_BYTES, sum(map(sum, want)))
        self.assertEqual(fileset.DIR_BYTES, 5_119_484)
        self.assertEqual(len({s for row in want for s in row}), 36)
        with self.assertRaises(ValueError):
            fileset.file_size(4, 0)
        with self.assertRaises(ValueError):
            fileset.file_size(0, 9)

    def test_dirs_for_size(self):
        self.assertEqual(fileset.dirs_for_size(0), 1)
        self.assertEqual(fileset.dirs_for_size(1), 1)
        self.assertEqual(fileset.dirs_for_size(fileset.DIR_BYTES), 1)
        self.assertEqual(fileset.dirs_for_size(fileset.DIR_BYTES + 1), 2)
        self.assertEqual(fileset.dirs_for_size(64 * 2**20), 14)  # ceil(67,108,864 / 5,119,484) = ceil(13.1)
        self.assertEqual(fileset.dirs_for_size(680 * fileset.DIR_BYTES), 680)  # the paper's 24,480 files

    def test_naming(self):
        self.assertEqual(fileset.rel_path(0, 0, 0), "dir00000/class0_0")
        self.assertEqual(fileset.rel_path(12, 3, 8), "dir00012/class3_8")
        self.assertEqual(fileset.rel_path(679, 2, 5), "dir00679/class2_5")
        self.assertEqual(fileset.parse_path("/dir00012/class3_8"), (12, 3, 8))
        self.assertEqual(fileset.parse_path("dir00000/class0_0"), (0, 0, 0))
        for bad in ["dir0001/class0_0", "dir00001/class4_0", "dir00001/class0_9", "dir00001/class0-0",
                    "dir00001", "x/dir00001/class0_0", "dirABCDE/class0_0"]:
            with self.assertRaises(ValueError, msg=bad):
                fileset.parse_path(bad)
        self.assertEqual(len(list(fileset.all_files(3))), 3 * 36)


class Contents(unittest.TestCase):
    def test_deterministic_and_distinct(self):
        for c, i in [(0, 0), (1, 4), (3, 8)]:
            a = fileset.expected_bytes(1, 2, c, i)
            self.assertEqual(a, fileset.expected_bytes(1, 2, c, i))
            self.assertNotEqual(a, fileset.expected_bytes(2, 2, c, i))  # another seed
            self.assertNotEqual(a, fileset.expected_bytes(1, 3, c, i))  # another directory
            self.assertEqual(fileset.expected_sha256(1, 2, c, i), hashlib.sha256(a).hexdigest())
        # all 36 files of a directory differ, also in their first 102 bytes
        heads = {fileset.expected_bytes(1, 0, c, i)[:102] for c in range(4) for i in range(9)}
        self.assertEqual(len(heads), 36)

    def test_no_two_pages_alike(self):
        data = fileset.expected_bytes(5, 0, 3, 8)  # 921,600 B: 225 pages over a 64 KiB block
        pages = [data[o:o + 4096] for o in range(0, len(data), 4096)]
        self.assertEqual(len(set(pages)), len(pages))
        # and not trivially compressible (a pattern, not zeros)
        self.assertGreater(len(set(data[:4096])), 200)


class OnDisk(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="fileset_test.")
        self.root = os.path.join(self.tmp.name, "set")

    def tearDown(self):
        self.tmp.cleanup()

    def snapshot(self):
        out = {}
        for dirpath, _, files in os.walk(self.root):
            for f in files:
                st = os.stat(os.path.join(dirpath, f))
                out[os.path.relpath(os.path.join(dirpath, f), self.root)] = (st.st_ino, st.st_mtime_ns, st.st_size)
        return out

    def test_make_reuse_regenerate(self):
        m, reused = fileset.ensure(self.root, 2, seed=3, progress=False)
        self.assertFalse(reused)
        self.assertEqual((m["seed"], m["dirs"], m["version"]), (3, 2, fileset.VERSION))
        self.assertEqual(m["total_bytes"], 2 * 5_119_484)
        with open(os.path.join(self.root, "fileset.json")) as f:
            self.assertEqual(json.load(f)["total_bytes"], 2 * 5_119_484)
        want = {fileset.rel_path(d, c, i) for d, c, i in fileset.all_files(2)} | {"fileset.json"}
        before = self.snapshot()
        self.assertEqual(set(before), want)
        for d, c, i in fileset.all_files(2):
            with open(os.path.join(self.root, fileset.rel_path(d, c, i)), "rb") as f:
                self.assertEqual(f.read(), fileset.expected_bytes(3, d, c, i), (d, c, i))
        self.assertEqual(fileset.check(self.root, 3, 2, progress=False), [])

        m2, reused = fileset.ensure(self.root, 2, seed=3, progress=False)
        self.assertTrue(reused)
        self.assertEqual(m2, m)
        self.assertEqual(self.snapshot(), before)  # nothing rewritten: same inodes and mtimes

        m3, reused = fileset.ensure(self.root, 2, seed=4, progress=False)  # another seed: regenerated
        self.assertFalse(reused)
        self.assertEqual(m3["seed"], 4)
        self.assertEqual(fileset.check(self.root, 4, 2, progress=False), [])
        self.assertNotEqual(fileset.check(self.root, 3, 2, progress=False), [])
        m4, reused = fileset.ensure(self.root, 1, seed=4, progress=False)  # another size: regenerated
        self.assertFalse(reused)
        self.assertEqual(set(self.snapshot()), {fileset.rel_path(0, c, i) for _, c, i in fileset.all_files(1)}
                         | {"fileset.json"})
        self.assertEqual(sorted(os.listdir(self.tmp.name)), [".set.lock", "set"])  # no temporaries left

    def test_other_version_or_missing_file_regenerates(self):
        fileset.ensure(self.root, 1, seed=3, progress=False)
        path = os.path.join(self.root, "fileset.json")
        with open(path) as f:
            m = json.load(f)
        m["version"] = fileset.VERSION - 1
        with open(path, "w") as f:
            json.dump(m, f)
        self.assertFalse(fileset.ensure(self.root, 1, seed=3, progress=False)[1])
        os.remove(os.path.join(self.root, "dir00000", "class2_2"))
        self.assertFalse(fileset.ensure(self.root, 1, seed=3, progress=False)[1])
        self.assertEqual(fileset.check(self.root, 3, 1, progress=False), [])

    def test_interrupted_generation_leaves_the_old_set(self):
        fileset.ensure(self.root, 1, seed=3, progress=False)
        before = self.snapshot()
        calls = []
        real = fileset._write_file

        def failing(path, data):
            calls.append(path)
            if len(calls) == 20:
                raise KeyboardInterrupt
            real(path, data)

        with mock.patch.object(fileset, "_write_file", failing):
            with self.assertRaises(KeyboardInterrupt):
                fileset.ensure(self.root, 1, seed=9, progress=False)
        self.assertEqual(self.snapshot(), before)  # the old set, whole
        self.assertEqual(sorted(os.listdir(self.tmp.name)), [".set.lock", "set"])
        self.assertTrue(fileset.ensure(self.root, 1, seed=3, progress=False)[1])
        # and a fresh root interrupted leaves nothing that looks like a set
        other = os.path.join(self.tmp.name, "fresh")
        calls.clear()
        with mock.patch.object(fileset, "_write_file", failing):
            with self.assertRaises(KeyboardInterrupt):
                fileset.ensure(other, 1, seed=9, progress=False)
        self.assertFalse(os.path.exists(other))

    def test_refuses_to_replace_a_foreign_directory(self):
        os.makedirs(self.root)
        with open(os.path.join(self.root, "precious"), "w") as f:
            f.write("x")
        with self.assertRaises(OSError):
            fileset.ensure(self.root, 1, seed=3, progress=False)
        self.assertEqual(os.listdir(self.root), ["precious"])

    def run_cli(self, *args, env=None):
        return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=60,
                              env={**os.environ, **(env or {})})

    def test_cli(self):
        p = self.run_cli("--dir", self.root, "--size-mb", "1", "--seed", "5", "--check")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"^fileset: generated .*: 1 directories, 36 files, 5,119,484 bytes .*"
                                   r"seed 5.*check: all 36 files correct")
        p = self.run_cli("--size-mb", "1", "--seed", "5", env={"FILESET": self.root})  # $FILESET
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("fileset: reused", p.stdout)
        self.assertEqual(len(p.stdout.splitlines()), 1)
        # one byte changed (size kept): reused by the stat-only test, caught by --check
        path = os.path.join(self.root, "dir00000", "class3_8")
        with open(path, "r+b") as f:
            f.seek(500_000)
            b = f.read(1)
            f.seek(500_000)
            f.write(bytes([b[0] ^ 1]))
        p = self.run_cli("--dir", self.root, "--size-mb", "1", "--seed", "5", "--check")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("dir00000/class3_8: content differs from byte 500,000", p.stderr)
        # --sample: paths on stdout, summary on stderr
        p = self.run_cli("--dir", self.root, "--size-mb", "1", "--seed", "5", "--sample", "50")
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertEqual(len(lines), 50)
        for line in lines:
            self.assertTrue(os.path.isfile(os.path.join(self.root, line)), line)
        self.assertIn("fileset: reused", p.stderr)
        p = self.run_cli("--dir", self.root, "--dirs", "1", "--size-mb", "100", "--seed", "5")  # --dirs wins
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("fileset: reused", p.stdout)
        p = self.run_cli("--help")
        self.assertEqual(p.returncode, 0)
        for flag in ["--dir", "--dirs", "--size-mb", "--seed", "--check", "--sample", "FILESET"]:
            self.assertIn(flag, p.stdout)


class Model(unittest.TestCase):
    DIRS = 40

    @classmethod
    def setUpClass(cls):
        cls.model = fileset.AccessModel(cls.DIRS, seed=1)
        rng = random.Random(20070321)
        cls.draws = [cls.model.sample(rng) for _ in range(DRAWS)]
        cls.keys = [fileset.parse_path(p) for p, _ in cls.draws]

    def marginal(self, pick):
        probs = collections.defaultdict(float)
        for d, c, i in fileset.all_files(self.DIRS):
            probs[pick(d, c, i)] += self.model.prob(d, c, i)
        counts = collections.Counter(pick(d, c, i) for d, c, i in self.keys)
        return counts, dict(probs)

    def assertFits(self, pick, df):
        counts, probs = self.marginal(pick)
        self.assertEqual(len(probs) - 1, df)
        self.assertGreater(min(probs.values()) * DRAWS, 5)  # the chi-square approximation holds
        stat, crit = chi2(counts, probs, DRAWS), chi2_critical(df, ALPHA)
        print(f"chi-square {stat:.1f} < {crit:.1f} (df {df}, alpha {ALPHA:g}) ... ", end="", file=sys.stderr)
        self.assertLess(stat, crit, f"chi-square {stat:.1f} >= {crit:.1f} (df {df})")
        return stat

    def test_probabilities(self):
        m = self.model
        total = sum(m.prob(d, c, i) for d, c, i in fileset.all_files(self.DIRS))
        self.assertAlmostEqual(total, 1.0, places=12)
        self.assertAlmostEqual(sum(m.prob_file(i) for i in range(9)), 1.0, places=15)
        self.assertAlmostEqual(m.prob_file(4), 35.3 / 99.9, places=15)
        self.assertEqual([m.prob_class(c) for c in range(4)], [0.35, 0.5, 0.14, 0.01])
        h = sum(1 / (k + 1) for k in range(self.DIRS))
        self.assertAlmostEqual(m.prob(0, 1, 4), (1 / h) * 0.5 * 35.3 / 99.9, places=15)
        self.assertAlmostEqual(m.prob(9, 0, 0) * 10, m.prob(0, 0, 0), places=15)  # Zipf, alpha 1
        self.assertEqual(m.prob(self.DIRS, 0, 0), 0.0)
        self.assertEqual(fileset.AccessModel(1).prob_dir(0), 1.0)

    def test_sizes_match_paths(self):
        for path, size in self.draws[:1000]:
            d, c, i = fileset.parse_path(path)
            self.assertLess(d, self.DIRS)
            self.assertEqual(size, fileset.file_size(c, i))

    def test_classes(self):
        self.assertFits(lambda d, c, i: c, 3)

    def test_files_within_class(self):
        self.assertFits(lambda d, c, i: i, 8)

    def test_class_and_file(self):
        self.assertFits(lambda d, c, i: (c, i), 35)

    def test_directories(self):
        self.assertFits(lambda d, c, i: d, self.DIRS - 1)

    def test_chi_square_rejects_a_wrong_model(self):
        counts, _ = self.marginal(lambda d, c, i: d)
        uniform = {d: 1 / self.DIRS for d in range(self.DIRS)}
        self.assertGreater(chi2(counts, uniform, DRAWS), chi2_critical(self.DIRS - 1, ALPHA))
        counts, _ = self.marginal(lambda d, c, i: i)
        wrong = {i: fileset.AccessModel.prob_file(i) for i in range(9)}
        wrong[4] -= 0.01  # one point moved from the most popular file to the next: caught
        wrong[3] += 0.01
        self.assertGreater(chi2(counts, wrong, DRAWS), chi2_critical(8, ALPHA))

    def test_wilson_hilferty(self):
        # textbook critical values (alpha 0.05 and 0.001): the approximation is within 2 % (it is
        # worst, and on the safe side, at few degrees of freedom and small alpha)
        for df, alpha, table in [(3, 0.05, 7.815), (8, 0.05, 15.507), (35, 0.05, 49.802),
                                 (3, 0.001, 16.266), (8, 0.001, 26.124), (39, 0.001, 72.055)]:
            self.assertAlmostEqual(chi2_critical(df, alpha) / table, 1, delta=0.02, msg=(df, alpha))
        # at ALPHA itself, df 3 (the class test): the exact tail, erfc(sqrt(x/2)) + sqrt(2x/pi) e^(-x/2),
        # shows the real false-failure probability is at most ALPHA (WH is conservative there)
        x = chi2_critical(3, ALPHA)
        tail = math.erfc(math.sqrt(x / 2)) + math.sqrt(2 * x / math.pi) * math.exp(-x / 2)
        self.assertTrue(ALPHA / 10 < tail <= ALPHA, tail)

    def test_reproducible(self):
        a = fileset.AccessModel(self.DIRS, seed=4)
        b = fileset.AccessModel(self.DIRS, seed=4)
        self.assertEqual([a.sample() for _ in range(100)], [b.sample() for _ in range(100)])
        rng1, rng2 = random.Random(1), random.Random(1)
        self.assertEqual([a.sample(rng1) for _ in range(100)], [b.sample(rng2) for _ in range(100)])


if __name__ == "__main__":
    unittest.main(verbosity=2)
