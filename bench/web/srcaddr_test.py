#!/usr/bin/env python3
"""Tests of weft-srcaddr.so (bench/web/srcaddr.c), the LD_PRELOAD that gives
httperf's loopback connections chosen source addresses. A listener on
127.0.0.1 reports the peer address of each connection that a child process,
run under the preload, makes to it.

usage: srcaddr_test.py PATH/TO/weft-srcaddr.so"""
import os
import shutil
import socket
import subprocess
import sys
import unittest

MODULE = None


def peers_of(client_code, spec, count, extra_env=None):
    """Run `client_code` (Python, {port} substituted) under the preload with
    WEFT_SRCADDR=spec; return (the peer addresses of its first `count`
    connections, its stderr)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        s.settimeout(10)
        port = s.getsockname()[1]
        env = dict(os.environ, LD_PRELOAD=MODULE)
        if spec is not None:
            env["WEFT_SRCADDR"] = spec
        env.update(extra_env or {})
        p = subprocess.Popen([sys.executable, "-c", client_code.format(port=port)], env=env,
                             stderr=subprocess.PIPE, text=True)
        peers = []
        try:
            for _ in range(count):
                c, addr = s.accept()
                peers.append(addr[0])
                c.close()
        finally:
            _, err = p.communicate(timeout=10)
        return peers, err


CONNECT_N = "import socket\nfor _ in range({n}): socket.create_connection(('127.0.0.1', {{port}})).close()"


class SourceAddresses(unittest.TestCase):
    def test_one_address(self):
        peers, err = peers_of(CONNECT_N.format(n=3), "127.0.0.7", 3)
        self.assertEqual(peers, ["127.0.0.7"] * 3, err)

    def test_a_range_is_used_round_robin(self):
        peers, err = peers_of(CONNECT_N.format(n=6), "127.0.0.20-127.0.0.22", 6)
        self.assertEqual(peers, ["127.0.0.20", "127.0.0.21", "127.0.0.22"] * 2, err)

    def test_unset_leaves_the_default(self):
        peers, err = peers_of(CONNECT_N.format(n=2), None, 2)
        self.assertEqual(peers, ["127.0.0.1"] * 2, err)

    def test_a_bad_spec_is_reported_and_ignored(self):
        for spec in ("10.0.0.1", "127.0.0.9-127.0.0.3", "not-an-address", "127.0.0.300"):
            with self.subTest(spec=spec):
                peers, err = peers_of(CONNECT_N.format(n=2), spec, 2)
                self.assertEqual(peers, ["127.0.0.1"] * 2)
                self.assertIn("WEFT_SRCADDR", err)
                self.assertEqual(err.count("weft-srcaddr"), 1, err)  # once, not per connection

    def test_a_socket_the_program_bound_is_left_alone(self):
        code = ("import socket\ns = socket.socket()\ns.bind(('127.0.0.5', 0))\n"
                "s.connect(('127.0.0.1', {port}))\ns.close()")
        peers, err = peers_of(code, "127.0.0.7", 1)
        self.assertEqual(peers, ["127.0.0.5"], err)

    def test_connect_errors_still_reach_the_program(self):
        with socket.socket() as probe:  # a port with no listener
            probe.bind(("127.0.0.1", 0))
            dead = probe.getsockname()[1]
        code = ("import socket, sys\ntry:\n    socket.create_connection(('127.0.0.1', %d), timeout=5)\n"
                "except ConnectionRefusedError:\n    print('refused', file=sys.stderr)\n"
                "socket.create_connection(('127.0.0.1', {port})).close()" % dead)
        peers, err = peers_of(code, "127.0.0.7", 1)
        self.assertEqual(peers, ["127.0.0.7"])
        self.assertIn("refused", err)

    @unittest.skipUnless(shutil.which("httperf"), "httperf is not installed")
    def test_httperf_connects_from_the_address(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(8)
            s.settimeout(10)
            port = s.getsockname()[1]
            env = dict(os.environ, LD_PRELOAD=MODULE, WEFT_SRCADDR="127.0.0.9")
            p = subprocess.Popen(["httperf", "--server", "127.0.0.1", "--port", str(port), "--num-conns", "2",
                                  "--timeout", "1"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                addrs = []
                for _ in range(2):
                    c, addr = s.accept()
                    addrs.append(addr[0])
                    c.close()
            finally:
                p.wait(timeout=20)
            self.assertEqual(addrs, ["127.0.0.9"] * 2)


if __name__ == "__main__":
    if len(sys.argv) < 2 or not os.path.exists(sys.argv[1]):
        sys.exit(__doc__)
    MODULE = os.path.abspath(sys.argv.pop(1))
    unittest.main()
