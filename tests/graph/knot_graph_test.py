#!/usr/bin/env python3
"""weft-knot's live blocking graph: /.weft/graph.{json,dot,svg} with --stats.

With WEFT_GRAPH=1 the pages show the graph of the requests just served:
a connection thread's read site, the acceptor's edge that opens a
descriptor and creates a thread, and the exit that closes it. Without the
graph the pages say how to turn it on (404); without --stats they are
ordinary missing files.
"""
import argparse
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

ARGS = None


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Knot:
    def __init__(self, root, env_extra, stats=True):
        self.port = free_port()
        env = dict(os.environ)
        env.pop("WEFT_GRAPH", None)
        env.update(env_extra)
        cmd = [ARGS.knot, "--root", root, "--listen", "127.0.0.1:%d" % self.port]
        if stats:
            cmd.append("--stats")
        self.p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise AssertionError("weft-knot did not start")

    def get(self, path, conn=None):
        c = conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        if conn is None:
            c.close()
        return r.status, r.getheader("Content-Type"), body

    def stop(self):
        self.p.terminate()
        try:
            self.p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.communicate()


class KnotGraph(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="weft-knot-graph-")
        with open(os.path.join(cls.root, "index.html"), "w") as f:
            f.write("hello\n" * 100)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def test_live_graph_of_the_requests_served(self):
        k = Knot(self.root, {"WEFT_GRAPH": "1"})
        try:
            for _ in range(5):
                c = http.client.HTTPConnection("127.0.0.1", k.port, timeout=30)
                for _ in range(4):
                    self.assertEqual(k.get("/index.html", c)[0], 200)
                c.close()
            time.sleep(0.2)  # the connection threads see the closes and exit
            status, ctype, body = k.get("/.weft/graph.json")
            self.assertEqual((status, ctype), (200, "application/json"))
            g = json.loads(body)
            labels = {n["id"]: n["label"] for n in g["nodes"]}
            # The request loop's read: the busiest I/O node of serve_connection,
            # labelled with the weft call it parks in.
            reads = sorted((n for n in g["nodes"] if n["reason"] == "io"
                            and n["label"].endswith(" @ knot::serve_connection")), key=lambda n: -n["visits"])
            self.assertTrue(reads, sorted(labels.values()))
            self.assertTrue(reads[0]["label"].startswith("weft_"), reads[0]["label"])
            self.assertGreaterEqual(reads[0]["visits"], 20)
            accepts = [e for e in g["edges"] if "accept" in labels[e["from"]] and e["from"] == e["to"]]
            self.assertTrue(accepts, g["edges"])
            # One descriptor and one thread per connection accepted (a
            # segment may accept several that wait together).
            self.assertGreaterEqual(accepts[0]["fds"], 0.99)
            self.assertAlmostEqual(accepts[0]["threads"], accepts[0]["fds"], places=2)
            # The five connections end after a read that finds them closed
            # (the start-up probe may end before its thread ever parks).
            exits = [e for e in g["edges"] if labels[e["to"]] == "exit knot::connection_thread"
                     and e["from"] == reads[0]["id"]]
            self.assertEqual(len(exits), 1, g["edges"])
            self.assertGreaterEqual(exits[0]["count"], 5)
            self.assertAlmostEqual(exits[0]["fds"], -1.0, places=2)

            status, ctype, body = k.get("/.weft/graph.dot")
            self.assertEqual((status, ctype), (200, "text/vnd.graphviz"))
            self.assertTrue(body.startswith(b"digraph"))
            status, ctype, body = k.get("/.weft/graph.svg")
            if shutil.which("dot"):
                self.assertEqual((status, ctype), (200, "image/svg+xml"), body[:200])
                self.assertIn(b"<svg", body)
                self.assertIn(b"serve_connection", body)
            else:
                self.assertEqual(status, 503)
                self.assertIn(b"Graphviz is not installed", body)
        finally:
            k.stop()

    def test_graph_off_says_how_to_turn_it_on(self):
        k = Knot(self.root, {})
        try:
            for page in ("/.weft/graph.json", "/.weft/graph.dot", "/.weft/graph.svg"):
                status, ctype, body = k.get(page)
                self.assertEqual((status, ctype), (404, "text/plain"), page)
                self.assertIn(b"WEFT_GRAPH=1", body)
        finally:
            k.stop()

    def test_without_stats_the_pages_are_plain_missing_files(self):
        k = Knot(self.root, {"WEFT_GRAPH": "1"}, stats=False)
        try:
            status, _, body = k.get("/.weft/graph.json")
            self.assertEqual(status, 404)
            self.assertNotIn(b"blocking graph", body)
        finally:
            k.stop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--knot", required=True)
    ARGS, rest = ap.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
