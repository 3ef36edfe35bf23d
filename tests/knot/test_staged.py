#!/usr/bin/env python3
"""weft-staged's own behaviour, beyond the shared HTTP suite (test_knot.py):
the block cache, the I/O aggregator's merged reads, the partitioned stages,
and the stage profile on the stats page and at shutdown.

    test_staged.py --server PATH [--vprocs N] [--sanitize] [unittest args]

Each test starts weft-staged on 127.0.0.1 with a free port over a fresh
document root, reads its counters from /.weft/stats, and stops it with
SIGTERM expecting exit 0. Standard library only; every wait is bounded.
"""

import argparse
import hashlib
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

BLOCK = 64 * 1024
SERVER, VPROCS, SLOW = None, 1, 1.0
STAGES = ["control", "network", "files", "blocks", "aggregator", "disk"]


class Staged:
    """A running weft-staged over `root`."""

    def __init__(self, root, flags=()):
        cmd = [SERVER, "--listen", "127.0.0.1:0", "--root", root, "--stats", "--vprocs", str(VPROCS), *flags]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = self.proc.stdout.readline().decode()
        m = re.match(r"weft-staged: serving .* on http://127\.0\.0\.1:(\d+)/ \(mode staged, (\d+) vprocs?", line)
        if not m:
            self.proc.kill()
            raise AssertionError(f"unexpected first line {line!r}: {self.proc.stderr.read().decode()}")
        self.port = int(m.group(1))
        assert int(m.group(2)) == VPROCS

    def get(self, path, headers=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30 * SLOW)
        try:
            c.request("GET", path, headers=headers or {})
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def stats(self):
        status, body = self.get("/.weft/stats")
        assert status == 200, status
        return json.loads(body)

    def stop(self):
        """SIGTERM: (exit status, the rest of stdout)."""
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=30 * SLOW)
        return self.proc.returncode, out.decode()


def sha(data):
    return hashlib.sha256(data).hexdigest()


class StagedTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="staged-test-")
        self.root = self.tmp.name
        self.server = None

    def tearDown(self):
        if self.server and self.server.proc.poll() is None:
            self.server.proc.kill()
            self.server.proc.wait()
        self.tmp.cleanup()

    def write(self, name, data):
        with open(os.path.join(self.root, name), "wb") as f:
            f.write(data)
        return data

    def start(self, flags=()):
        self.server = Staged(self.root, flags)
        return self.server

    def assertStops(self):
        status, out = self.server.stop()
        self.assertEqual(status, 0, out)
        return out

    def test_a_cold_file_is_read_in_merged_runs_then_served_from_memory(self):
        data = self.write("m.bin", os.urandom(16 * BLOCK))  # 1 MiB: 16 blocks, four windows
        s = self.start()
        status, body = s.get("/m.bin")
        self.assertEqual((status, sha(body)), (200, sha(data)))
        b = s.stats()["blocks"]
        self.assertEqual(b["blocks_read"], 16, b)
        self.assertEqual(b["misses"], 16, b)
        # A window's four blocks are asked for together and read as one run:
        # on one vproc always; on several, a window sent from the other vproc
        # may reach the aggregator over two visits (two runs).
        self.assertLessEqual(b["disk_reads"], 4 if VPROCS == 1 else 8, b)
        status, body = s.get("/m.bin")
        self.assertEqual((status, sha(body)), (200, sha(data)))
        b2 = s.stats()["blocks"]
        self.assertEqual(b2["blocks_read"], 16, "a kept file was read again")
        self.assertEqual(b2["hits"], b["hits"] + 16, b2)
        self.assertEqual(b2["bytes"], 16 * BLOCK, b2)
        self.assertStops()

    def test_a_file_too_big_to_keep_is_read_each_time(self):
        data = self.write("big.bin", os.urandom(40 * BLOCK + 123))  # 2.5 MiB > an eighth of 1 MiB
        s = self.start(["--cache-mb", "1"])
        for _ in range(2):
            status, body = s.get("/big.bin")
            self.assertEqual((status, sha(body)), (200, sha(data)))
        b = s.stats()["blocks"]
        self.assertEqual(b["blocks_read"], 2 * 41, b)
        self.assertEqual(b["bytes"], 0, b)
        self.assertStops()

    def test_a_range_spanning_blocks_is_exact(self):
        data = self.write("r.bin", os.urandom(10 * BLOCK))
        s = self.start()
        for first, last in ((0, 0), (BLOCK - 1, BLOCK), (3 * BLOCK + 7, 9 * BLOCK + 11), (10 * BLOCK - 5, 10 * BLOCK - 1)):
            status, body = s.get("/r.bin", {"Range": f"bytes={first}-{last}"})
            self.assertEqual(status, 206)
            self.assertEqual(body, data[first:last + 1], (first, last))
        self.assertStops()

    def test_an_edited_file_is_not_served_from_old_blocks(self):
        self.write("e.txt", b"A" * 5000)
        s = self.start()
        self.assertEqual(s.get("/e.txt"), (200, b"A" * 5000))
        time.sleep(1.2)  # past the file cache's revalidation interval (1 s)
        path = os.path.join(self.root, "e.txt")
        self.write("e.txt", b"B" * 5000)
        os.utime(path, ns=(time.time_ns(), time.time_ns() + 5_000_000_000))  # same size, another mtime
        self.assertEqual(s.get("/e.txt"), (200, b"B" * 5000))
        self.assertStops()

    def test_the_stats_page_carries_the_stage_profile(self):
        for i in range(24):
            self.write(f"f{i}.txt", f"file {i}\n".encode())
        s = self.start()
        for i in range(24):
            self.assertEqual(s.get(f"/f{i}.txt"), (200, f"file {i}\n".encode()))
        st = s.stats()
        prof = st["stages"]
        self.assertEqual([x["name"] for x in prof["stages"]], STAGES)
        self.assertEqual(prof["vprocs"], VPROCS)
        files = next(x for x in prof["stages"] if x["name"] == "files")
        started = [v["started"] for v in files["per_vproc"]]
        self.assertEqual(sum(started), 24, started)
        if VPROCS > 1:  # partitioned by the path's hash: 24 paths reach every partition
            self.assertTrue(all(n > 0 for n in started), started)
        control = next(x for x in prof["stages"] if x["name"] == "control")
        self.assertGreaterEqual(sum(v["started"] for v in control["per_vproc"]), 24)
        self.assertTrue(prof["arcs"], "no arcs between stages")
        status, text = s.get("/.weft/stages")
        self.assertEqual(status, 200)
        text = text.decode()
        self.assertTrue(text.startswith("stage"), text[:200])
        for name in STAGES:
            self.assertIn(name, text)
        self.assertIn("arc control/0 -> files/", text)
        self.assertStops()

    def test_profile_is_printed_at_shutdown(self):
        self.write("a.txt", b"aaa\n")
        s = self.start(["--profile"])
        self.assertEqual(s.get("/a.txt"), (200, b"aaa\n"))
        out = self.assertStops()
        self.assertRegex(out, r"(?m)^stage +vproc +avg queue")
        self.assertRegex(out, r"(?m)^files +0 ")
        self.assertRegex(out, r"weft-staged: stopped after \d+ connections, \d+ requests")


def main():
    global SERVER, VPROCS, SLOW
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", required=True)
    p.add_argument("--vprocs", type=int, default=1)
    p.add_argument("--sanitize", action="store_true", help="the server is a sanitizer build (slower)")
    args, rest = p.parse_known_args()
    SERVER, VPROCS, SLOW = os.path.abspath(args.server), args.vprocs, 3.0 if args.sanitize else 1.0
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)


if __name__ == "__main__":
    main()
