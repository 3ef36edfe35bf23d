#!/usr/bin/env python3
"""Integration tests of weft's static-file servers: weft-knot (a weft thread
per connection), and on the same suite the µserver (weft-userver) and
WatPipe (weft-watpipe), which share its HTTP core.

    test_knot.py --server PATH [--mode c|nb|b|uring] [--args "FLAGS"] [--group G]
                 [--wrapper "CMD"] [--sanitize] [unittest args]

--mode is weft-knot's (required for it); --args are more flags for every
server started (a µserver configuration: "--procs 4 --shared"). The few
tests of one server's own features (weft-knot's modes, accept models and
access log) are skipped for the others, with a message.

--wrapper runs every server started under a command (split like --args):
weft-pool, a plain pthread program, is tested both on NPTL and as
`--wrapper "build/posix/weft-run"` on weft threads (docs/pool.md).

Each test class (or, where the test must stop the server itself, each test)
starts its own weft-knot on 127.0.0.1 with a free port over a fresh document
root in a temporary directory, talks to it over raw sockets (and curl, where
a real client matters), and stops it with SIGTERM, asserting a graceful exit
(status 0). Next to every root lies a secret file that no response may ever
contain, unless --follow-symlinks is asked for.

--group picks the tests, so that CTest can run the heavy ones as entries of
their own:
    core   everything quick (the default CTest entry)
    large  100 MiB files: byte identity, and SIGTERM during a big download
    many   10,000 concurrent keep-alive connections from another process
    all    the three
--sanitize says the server is an ASan/UBSan build: waits are stretched
(the 10,000 connections stay: an ASan server handles them in seconds).

The same file is the client of the "many" test: run as
`test_knot.py --many-client ...` it opens the connections from its own
process with one selector loop and prints a JSON summary.

Standard library only. All traffic goes to 127.0.0.1; every loop is bounded
in count and time.
"""

import argparse
import collections
import concurrent.futures
import email.utils
import errno
import hashlib
import json
import os
import re
import resource
import select
import selectors
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HOST = "127.0.0.1"
MODES = ("c", "nb", "b", "uring")
GROUPS = ("core", "large", "many", "all")

# Every served file gets this mtime, so Last-Modified and ETag are exact.
MTIME_NS = 1_700_000_000_123_456_789
LAST_MODIFIED = "Tue, 14 Nov 2023 22:13:20 GMT"

# The content of files placed OUTSIDE every document root.
SECRET = b"SECRET-" + os.urandom(8).hex().encode() + b"\n"
SECRET2 = b"SECRET2-" + os.urandom(8).hex().encode() + b"\n"

KIB, MIB = 1024, 1024 * 1024
BIG_SIZE = 100 * MIB

DATE_RE = re.compile(r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d "
                     r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT")
HEADERS_200 = {"server", "content-type", "content-length", "last-modified", "etag",
               "accept-ranges", "date", "connection"}


class Config:
    server = None     # path of the server
    prog = "weft-knot"  # its name: weft-knot, weft-userver, weft-watpipe
    mode = None       # weft-knot's c, nb, b, uring
    extra = []        # --args
    wrapper = []      # --wrapper: the command every server runs under (weft-run)
    group = "all"
    sanitize = False  # an ASan build: about 3x slower


CFG = Config()


def is_knot():
    return CFG.prog == "weft-knot"


def knot_only(what):
    """Skip a test (or a class's tests) of a weft-knot feature for the other
    servers. Decided when the test runs: the server is known only then."""
    def decorate(obj):
        if isinstance(obj, type):
            setup = obj.setUp

            def setUp(self):
                if not is_knot():
                    self.skipTest(f"{what} is weft-knot's own")
                setup(self)
            obj.setUp = setUp
            return obj

        def test(self, *a, **kw):
            if not is_knot():
                self.skipTest(f"{what} is weft-knot's own")
            return obj(self, *a, **kw)
        test.__name__, test.__doc__ = obj.__name__, obj.__doc__
        return test
    return decorate


def config_args():
    """The flags that select the configuration under test."""
    return (["--mode", CFG.mode] if is_knot() else []) + list(CFG.extra)


def server_args(root, port=0, flags=()):
    """The server's arguments (without the program and --wrapper)."""
    return ["--listen", f"{HOST}:{port}", "--root", root, *config_args(), *flags]


def server_cmd(root, port=0, flags=()):
    return [*CFG.wrapper, CFG.server, *server_args(root, port, flags)]


def slow(seconds):
    """A wait bound, stretched for a sanitizer build."""
    return seconds * 3 if CFG.sanitize else seconds


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def etag_of(size, mtime_ns=MTIME_NS):
    return '"%x-%x"' % (mtime_ns, size)


# ---------------------------------------------------------------------------
# Document roots
# ---------------------------------------------------------------------------

def write_file(root, rel, data, mtime_ns=MTIME_NS):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    os.utime(path, ns=(mtime_ns, mtime_ns))
    return path


def make_root(tmpdir):
    """tmpdir/root, with tmpdir/secret.txt and tmpdir/outside/secret2.txt next to it."""
    with open(os.path.join(tmpdir, "secret.txt"), "wb") as f:
        f.write(SECRET)
    os.makedirs(os.path.join(tmpdir, "outside"))
    with open(os.path.join(tmpdir, "outside", "secret2.txt"), "wb") as f:
        f.write(SECRET2)
    root = os.path.join(tmpdir, "root")
    os.makedirs(root)
    return root


class BigFile:
    """One 100 MiB file per process, hard-linked into the roots that need it.

    A random block of a prime length (1,000,003 bytes) repeated: an offset
    off by any power of two (a page, a chunk, a MiB) shows in the hash."""
    _dir = None
    _path = None
    _sha = None

    @classmethod
    def link_into(cls, root, name="big.bin"):
        if cls._path is None:
            cls._dir = tempfile.mkdtemp(prefix="knot-big-")
            cls._path = os.path.join(cls._dir, "big.bin")
            block = os.urandom(1_000_003)
            h = hashlib.sha256()
            with open(cls._path, "wb") as f:
                left = BIG_SIZE
                while left:
                    piece = block[:left]
                    f.write(piece)
                    h.update(piece)
                    left -= len(piece)
            os.utime(cls._path, ns=(MTIME_NS, MTIME_NS))
            cls._sha = h.hexdigest()
        dst = os.path.join(root, name)
        try:
            os.link(cls._path, dst)
        except OSError:
            shutil.copyfile(cls._path, dst)
            os.utime(dst, ns=(MTIME_NS, MTIME_NS))
        return cls._sha

    @classmethod
    def slice(cls, first, last):
        with open(cls._path, "rb") as f:
            f.seek(first)
            return f.read(last - first + 1)

    @classmethod
    def cleanup(cls):
        if cls._dir:
            shutil.rmtree(cls._dir, ignore_errors=True)
            cls._dir = cls._path = None


# ---------------------------------------------------------------------------
# The server process
# ---------------------------------------------------------------------------

def read_line(fd, timeout):
    """The first line on a pipe, within timeout seconds: (line, what followed)."""
    data = b""
    deadline = time.monotonic() + timeout
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no line within {timeout} s (got {data!r})")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                raise EOFError(f"the server closed its stdout before a whole line (got {data!r})")
            data += chunk
    line, _, rest = data.partition(b"\n")
    return line.decode(errors="replace"), rest


def nofile_limiter(soft):
    """preexec_fn: RLIMIT_NOFILE soft limit to `soft` (None: the hard limit)."""
    def apply():
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = hard if soft is None else min(soft, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return apply


class KnotServer:
    """One server on 127.0.0.1:<a free port>; start() returns it serving."""

    BANNER = re.compile(r"([\w-]+): serving (.*) on http://127\.0\.0\.1:(\d+)/ \(mode ([\w-]+), .*\)")

    def __init__(self, root, flags=(), nofile=None, raise_nofile=False):
        self.root = root
        self.flags = list(flags)
        self.nofile = nofile              # a low soft RLIMIT_NOFILE for the server
        self.raise_nofile = raise_nofile  # the soft limit up to the hard one
        self.proc = None
        self.port = None
        self.stdout = b""                 # after the banner, complete once stopped
        self._stderr = None
        self._stderr_text = ""

    def start(self):
        cmd = server_cmd(self.root, 0, self.flags)
        preexec = nofile_limiter(self.nofile) if (self.nofile or self.raise_nofile) else None
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=self._stderr, preexec_fn=preexec)
        try:
            line, self.stdout = read_line(self.proc.stdout.fileno(), slow(15))
        except (TimeoutError, EOFError) as e:
            self.kill()
            raise AssertionError(f"{' '.join(cmd)}: {e}; stderr: {self.stderr()}") from None
        m = self.BANNER.fullmatch(line)
        if not m or m.group(1) != CFG.prog or m.group(2) != self.root or (is_knot() and m.group(4) != CFG.mode):
            self.kill()
            raise AssertionError(f"unexpected first line {line!r}; stderr: {self.stderr()}")
        self.port = int(m.group(3))
        return self

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def wait_output(self, pattern, timeout):
        """Read stdout into .stdout until it matches pattern (a regex), within
        timeout seconds: the match, or None."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while True:
            m = re.search(pattern, self.stdout.decode(errors="replace"))
            left = deadline - time.monotonic()
            if m or left <= 0:
                return m
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    return re.search(pattern, self.stdout.decode(errors="replace"))
                self.stdout += chunk

    def stop(self, timeout=None):
        """SIGTERM and wait: the exit status (the rest of stdout in .stdout)."""
        timeout = timeout or slow(30)
        self.proc.send_signal(signal.SIGTERM)
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{CFG.prog} did not exit within {timeout} s of SIGTERM; "
                                 f"stderr: {self.stderr()}") from None
        self.stdout += out or b""
        return self.proc.returncode

    def kill(self):
        """Kill it if still running, and let go of its pipes (idempotent)."""
        if self.alive():
            self.proc.kill()
            self.proc.wait()
        if self.proc and self.proc.stdout:
            self.proc.stdout.close()
        if self._stderr:
            self._stderr_text = self.stderr()
            self._stderr.close()
            self._stderr = None

    def stderr(self):
        """What it wrote on stderr so far (the last 4,000 characters)."""
        if not self._stderr:
            return self._stderr_text
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-4000:]


# ---------------------------------------------------------------------------
# The client side: raw requests and responses
# ---------------------------------------------------------------------------

def request(target, method="GET", version="HTTP/1.1", host="knot", headers=()):
    """Request bytes: the request line, Host (unless None), more headers, the blank line."""
    lines = [f"{method} {target} {version}"]
    if host is not None:
        lines.append(f"Host: {host}")
    lines += [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class Response:
    def __init__(self, status, reason, header_list, head):
        self.status = status
        self.reason = reason
        self.header_list = header_list                         # [(name, value)] as sent
        self.headers = {k.lower(): v for k, v in header_list}  # lower-case name -> value
        self.head = head
        self.body = b""
        self.body_len = 0
        self.body_sha = None

    def __repr__(self):
        return f"<Response {self.status} {self.headers} body {self.body[:80]!r}>"


class Conn:
    """A client connection: send bytes, read responses exactly by Content-Length.

    Every body read is checked for the secret files that lie outside the
    roots (unless a test that serves them on purpose sets secret_allowed)."""

    secret_allowed = False

    def __init__(self, port, timeout=None, rcvbuf=None):
        self.timeout = timeout or slow(10)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self.sock.connect((HOST, port))
        except OSError:
            self.sock.close()
            raise
        self.buf = b""
        self.eof = False
        self.reset = False
        self.received = 0  # bytes, all told

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.sock.close()

    def send(self, data):
        """Send all of data; a server that already closed is not an error here."""
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _recv(self, deadline, size=1 << 20):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no data from the server in time")
        self.sock.settimeout(left)
        try:
            data = self.sock.recv(size)
        except ConnectionResetError:
            data = b""
            self.reset = True
        except socket.timeout:
            raise TimeoutError("no data from the server in time") from None
        if not data:
            self.eof = True
        self.received += len(data)
        return data

    def read_response(self, head_request=False, sink=None, timeout=None):
        """The next response, or None if the server closed before sending any byte of it.

        The body is read exactly by Content-Length (none for a HEAD request,
        204 or 304). With sink(bytes), the body is streamed to it instead of
        kept; body_len and body_sha are set either way."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while b"\r\n\r\n" not in self.buf:
            if self.eof:
                if not self.buf:
                    return None
                raise AssertionError(f"the server closed in the middle of a head: {self.buf[:200]!r}")
            if len(self.buf) > 64 * KIB:
                raise AssertionError(f"a response head over 64 KiB: {self.buf[:200]!r}")
            self.buf += self._recv(deadline)
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        m = re.fullmatch(r"HTTP/1\.1 (\d{3}) (.+)", lines[0])
        if not m:
            raise AssertionError(f"bad status line {lines[0]!r}")
        header_list = []
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name):
                raise AssertionError(f"bad header line {line!r}")
            header_list.append((name, value.strip()))
        r = Response(int(m.group(1)), m.group(2), header_list, head)
        if head_request or r.status in (204, 304):
            return r
        if "content-length" not in r.headers:
            raise AssertionError(f"a {r.status} response without Content-Length: {head!r}")
        left = int(r.headers["content-length"])
        h = hashlib.sha256()
        parts = []
        while left > 0:
            if not self.buf:
                if self.eof:
                    raise AssertionError(f"the server closed with {left} bytes of the body unsent")
                self.buf = self._recv(deadline)
                continue
            piece, self.buf = self.buf[:left], self.buf[left:]
            left -= len(piece)
            r.body_len += len(piece)
            h.update(piece)
            if sink:
                sink(piece)
            else:
                parts.append(piece)
        r.body = b"".join(parts)
        r.body_sha = h.hexdigest()
        if not Conn.secret_allowed and (SECRET in r.body or SECRET2 in r.body):
            raise AssertionError(f"a {r.status} response carried a file from outside the root: {r.body[:200]!r}")
        return r

    def exchange(self, data, **kw):
        self.send(data)
        return self.read_response(head_request=data.startswith(b"HEAD "), **kw)

    def wait_closed(self, timeout):
        """True if the server closes within timeout seconds. Bytes that come
        meanwhile are kept in .buf (after a whole response, that is a bug)."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            try:
                self.buf += self._recv(deadline)
            except TimeoutError:
                return False
        return True


def send_raw(port, data, close_wait=None):
    """Send data on a new connection and read one response.

    Returns (status, headers, body, closed): status None if the server
    closed without a response; closed if the server closed the connection
    after it (waited for up to close_wait seconds when the response says
    Connection: close; 0.1 s otherwise, as a server that wrongly closes does
    so at once). Bytes after the response fail."""
    with Conn(port) as c:
        c.send(data)
        r = c.read_response(head_request=data.startswith(b"HEAD "))
        if r is None:
            return None, {}, b"", True
        says_close = r.headers.get("connection", "").lower() == "close"
        closed = c.wait_closed(close_wait or (slow(5) if says_close else 0.1))
        if c.buf:
            raise AssertionError(f"bytes after the {r.status} response: {c.buf[:200]!r}")
        return r.status, r.headers, r.body, closed


def get(port, target, **kw):
    return send_raw(port, request(target, **kw))


def curl(port, target, out_path, timeout=120):
    """curl -s -o out_path: (HTTP status, bytes downloaded)."""
    res = subprocess.run(["curl", "-s", "--max-time", str(timeout), "-o", out_path,
                          "-w", "%{http_code} %{size_download}", f"http://{HOST}:{port}{target}"],
                         capture_output=True, timeout=timeout + 10)
    code, size = res.stdout.decode().split()
    return int(code), int(float(size))


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def file_sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(MIB), b""):
            h.update(chunk)
    return h.hexdigest()


def wait_for(predicate, timeout, interval=0.1):
    """Poll predicate() until it is true or timeout seconds pass: its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


# ---------------------------------------------------------------------------
# Test bases
# ---------------------------------------------------------------------------

class KnotTestCase(unittest.TestCase):
    """A server per class over a root that populate() fills."""
    group = "core"
    flags = ()
    nofile = None
    raise_nofile = False

    @classmethod
    def setUpClass(cls):
        tmp = tempfile.TemporaryDirectory(prefix="knot-test-")
        cls.addClassCleanup(tmp.cleanup)
        cls.tmp = tmp.name
        cls.root = make_root(cls.tmp)
        cls.populate(cls.root)
        cls.server = KnotServer(cls.root, cls.flags, cls.nofile, cls.raise_nofile)
        cls.addClassCleanup(cls.server.kill)
        cls.server.start()
        cls.port = cls.server.port

    @classmethod
    def tearDownClass(cls):
        status = cls.server.stop()
        if status != 0:
            raise AssertionError(f"{CFG.prog} exited with {status} after SIGTERM; stderr: {cls.server.stderr()}")

    @classmethod
    def populate(cls, root):
        pass

    def setUp(self):
        if not self.server.alive():
            self.fail(f"{CFG.prog} died in an earlier test (status {self.server.proc.returncode})")

    def tearDown(self):
        if not self.server.alive():
            self.fail(f"{CFG.prog} died during this test (status {self.server.proc.returncode}); "
                      f"stderr: {self.server.stderr()}")

    # helpers for the tests

    def assertNoSecret(self, body):
        self.assertNotIn(SECRET, body)
        self.assertNotIn(SECRET2, body)

    def assertHttpDateNow(self, value):
        self.assertRegex(value, f"^{DATE_RE.pattern}$")
        when = email.utils.parsedate_to_datetime(value).timestamp()
        self.assertLess(abs(when - time.time()), 120, value)

    def assertErrorPage(self, status, headers, body, reason):
        """The server's HTML error page for `status`."""
        self.assertEqual(headers["content-type"], "text/html; charset=utf-8")
        self.assertEqual(int(headers["content-length"]), len(body))
        self.assertIn(f"<h1>{status} {reason}</h1>".encode(), body)

    def assertClosedWith(self, data, status, reason):
        """Malformed input: `status` with its page, Connection: close, then the server closes."""
        got, headers, body, closed = send_raw(self.port, data)
        self.assertEqual(got, status, f"request {data[:120]!r}: {headers} {body[:200]!r}")
        self.assertErrorPage(status, headers, body, reason)
        self.assertEqual(headers["connection"], "close")
        self.assertTrue(closed, "the server kept the connection open after a malformed request")
        return headers, body


class PerTestServerCase(unittest.TestCase):
    """Tests that stop their own server (shutdown, the access log, the command line)."""
    group = "core"

    def setUp(self):
        tmp = tempfile.TemporaryDirectory(prefix="knot-test-")
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name
        self.root = make_root(self.tmp)

    def start_server(self, flags=(), **kw):
        srv = KnotServer(self.root, flags, **kw)
        self.addCleanup(srv.kill)
        return srv.start()

    def assertGracefulStop(self, srv):
        status = srv.stop()
        self.assertEqual(status, 0, f"exit status after SIGTERM; stderr: {srv.stderr()}")
        return srv.stdout.decode(errors="replace")


# ---------------------------------------------------------------------------
# Serving files
# ---------------------------------------------------------------------------

TYPED_FILES = {
    "page.html": "text/html; charset=utf-8",
    "page.htm": "text/html; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "data.json": "application/json",
    "notes.txt": "text/plain; charset=utf-8",
    "pic.png": "image/png",
    "PIC2.PNG": "image/png",
    "photo.jpg": "image/jpeg",
    "anim.gif": "image/gif",
    "logo.svg": "image/svg+xml",
    "doc.pdf": "application/pdf",
    "blob.unknownext": "application/octet-stream",
    "noextension": "application/octet-stream",
    "dir.d/noext": "application/octet-stream",
}


class ServeFilesTest(KnotTestCase):
    @classmethod
    def populate(cls, root):
        cls.files = {}
        for name in TYPED_FILES:
            cls.files[name] = os.urandom(100 + len(name)) + name.encode()
            write_file(root, name, cls.files[name])
        cls.files["a.txt"] = b"hello from a\n"
        write_file(root, "a.txt", cls.files["a.txt"])
        write_file(root, "hello world.txt", b"spaces\n")
        write_file(root, "index.html", b"<p>root index</p>\n")
        write_file(root, "sub/index.html", b"<p>sub index</p>\n")
        write_file(root, "sub/deeper/x.txt", b"x\n")
        write_file(root, "noindex/file.txt", b"not an index\n")
        write_file(root, "changing.txt", b"version one\n")

    def test_get_each_type(self):
        for name, ctype in TYPED_FILES.items():
            with self.subTest(name=name):
                with Conn(self.port) as c:
                    r = c.exchange(request("/" + name))
                    self.assertEqual(r.status, 200)
                    self.assertEqual(r.reason, "OK")
                    self.assertEqual(r.body, self.files[name])
                    self.assertEqual(set(r.headers), HEADERS_200, r.header_list)
                    self.assertEqual(len(r.header_list), len(HEADERS_200), "a header sent twice")
                    self.assertEqual(r.headers["content-type"], ctype)
                    self.assertEqual(r.headers["content-length"], str(len(self.files[name])))
                    self.assertEqual(r.headers["last-modified"], LAST_MODIFIED)
                    self.assertEqual(r.headers["etag"], etag_of(len(self.files[name])))
                    self.assertEqual(r.headers["accept-ranges"], "bytes")
                    self.assertEqual(r.headers["server"], CFG.prog)
                    self.assertEqual(r.headers["connection"], "keep-alive")
                    self.assertHttpDateNow(r.headers["date"])

    def test_head_has_the_headers_and_no_body(self):
        body = self.files["pic.png"]
        with Conn(self.port) as c:
            h = c.exchange(request("/pic.png", method="HEAD"))
            self.assertEqual(h.status, 200)
            self.assertEqual(set(h.headers), HEADERS_200)
            self.assertEqual(h.headers["content-length"], str(len(body)))
            self.assertEqual(h.headers["content-type"], "image/png")
            self.assertEqual(h.headers["etag"], etag_of(len(body)))
            self.assertEqual(h.headers["last-modified"], LAST_MODIFIED)
            self.assertFalse(c.wait_closed(0.3))
            self.assertEqual(c.buf, b"", "HEAD response followed by body bytes")
            g = c.exchange(request("/pic.png"))  # the connection is still in step
            self.assertEqual(g.status, 200)
            self.assertEqual(g.body, body)

    def test_head_of_missing_file_has_no_body(self):
        with Conn(self.port) as c:
            r = c.exchange(request("/nope.txt", method="HEAD"))
            self.assertEqual(r.status, 404)
            self.assertGreater(int(r.headers["content-length"]), 0)
            self.assertFalse(c.wait_closed(0.3))
            self.assertEqual(c.buf, b"")

    def test_query_is_ignored(self):
        status, headers, body, _ = get(self.port, "/a.txt?v=1&x=%2F..")
        self.assertEqual((status, body), (200, self.files["a.txt"]))

    def test_percent_encoded_name(self):
        status, _, body, _ = get(self.port, "/hello%20world.txt")
        self.assertEqual((status, body), (200, b"spaces\n"))
        status, _, body, _ = get(self.port, "/%61.txt")  # %61 = 'a'
        self.assertEqual((status, body), (200, self.files["a.txt"]))

    def test_absolute_form_target_without_host_header(self):
        status, _, body, _ = send_raw(self.port, request("http://example.test/a.txt", host=None))
        self.assertEqual((status, body), (200, self.files["a.txt"]))

    def test_bare_lf_line_ends(self):
        status, _, body, _ = send_raw(self.port, b"GET /a.txt HTTP/1.1\nHost: knot\n\n")
        self.assertEqual((status, body), (200, self.files["a.txt"]))

    def test_empty_lines_before_request_line(self):
        status, _, body, _ = send_raw(self.port, b"\r\n\r\n" + request("/a.txt"))
        self.assertEqual((status, body), (200, self.files["a.txt"]))

    def test_root_serves_index_html(self):
        status, headers, body, _ = get(self.port, "/")
        self.assertEqual((status, body), (200, b"<p>root index</p>\n"))
        self.assertEqual(headers["content-type"], "text/html; charset=utf-8")

    def test_directory_serves_its_index_html(self):
        status, _, body, _ = get(self.port, "/sub/")
        self.assertEqual((status, body), (200, b"<p>sub index</p>\n"))

    def test_directory_without_slash_redirects(self):
        for target, location in (("/sub", "/sub/"), ("/sub?x=1", "/sub/?x=1"),
                                 ("/sub/deeper", "/sub/deeper/"), ("/noindex", "/noindex/")):
            with self.subTest(target=target):
                status, headers, body, closed = get(self.port, target)
                self.assertEqual(status, 301)
                self.assertEqual(headers["location"], location)
                self.assertErrorPage(301, headers, body, "Moved Permanently")
                self.assertEqual(headers["connection"], "keep-alive")
                self.assertFalse(closed)

    def test_directory_without_index_is_forbidden(self):
        for target in ("/noindex/", "/sub/deeper/"):
            with self.subTest(target=target):
                status, headers, body, closed = get(self.port, target)
                self.assertEqual(status, 403)
                self.assertErrorPage(403, headers, body, "Forbidden")
                self.assertFalse(closed)

    def test_missing_is_404(self):
        for target in ("/missing.txt", "/missing/", "/nodir/file.txt", "/a.txt/", "/a.txt/x"):
            with self.subTest(target=target):
                status, headers, body, closed = get(self.port, target)
                self.assertEqual(status, 404)
                self.assertErrorPage(404, headers, body, "Not Found")
                self.assertEqual(headers["connection"], "keep-alive")
                self.assertFalse(closed)

    def test_stats_page_is_off_by_default(self):
        status, _, _, _ = get(self.port, "/.weft/stats")
        self.assertEqual(status, 404)

    def test_changed_file_is_served_anew(self):
        status, headers, body, _ = get(self.port, "/changing.txt")
        self.assertEqual((status, body), (200, b"version one\n"))
        new = b"version two, longer\n"
        write_file(self.root, "changing.txt.tmp", new, mtime_ns=MTIME_NS + 5_000_000_000)
        os.replace(os.path.join(self.root, "changing.txt.tmp"), os.path.join(self.root, "changing.txt"))
        # The cache trusts an entry for a second, then checks the file. (The
        # ETag is checked on the response that brought the new body: in
        # SYMPED each process has its own cache, so another connection may
        # reach one that has not looked yet.)
        seen = []
        got = wait_for(lambda: seen.append(get(self.port, "/changing.txt")) or seen[-1][2] == new, slow(5), 0.25)
        self.assertTrue(got, "the replaced file was not served within 5 s")
        self.assertEqual(seen[-1][1]["etag"], etag_of(len(new), MTIME_NS + 5_000_000_000))


class ConditionalTest(KnotTestCase):
    BODY = b"conditional body\n" * 10

    @classmethod
    def populate(cls, root):
        write_file(root, "c.txt", cls.BODY)

    def exchange(self, headers, method="GET"):
        with Conn(self.port) as c:
            r = c.exchange(request("/c.txt", method=method, headers=headers))
            # Whatever the status, the connection stays usable: no stray body bytes.
            again = c.exchange(request("/c.txt"))
            self.assertEqual((again.status, again.body), (200, self.BODY))
            return r

    def assertNotModified(self, r):
        self.assertEqual(r.status, 304)
        self.assertEqual(r.reason, "Not Modified")
        self.assertEqual(r.headers["etag"], etag_of(len(self.BODY)))
        self.assertEqual(r.headers["last-modified"], LAST_MODIFIED)
        self.assertNotIn("content-length", r.headers)
        self.assertEqual(r.body, b"")

    def test_if_none_match_with_the_etag(self):
        self.assertNotModified(self.exchange([("If-None-Match", etag_of(len(self.BODY)))]))

    def test_if_none_match_star(self):
        self.assertNotModified(self.exchange([("If-None-Match", "*")]))

    def test_if_none_match_weak_and_in_a_list(self):
        tag = etag_of(len(self.BODY))
        self.assertNotModified(self.exchange([("If-None-Match", "W/" + tag)]))
        self.assertNotModified(self.exchange([("If-None-Match", f'"other", {tag}')]))

    def test_if_none_match_head(self):
        self.assertNotModified(self.exchange([("If-None-Match", etag_of(len(self.BODY)))], method="HEAD"))

    def test_if_none_match_other_tag_is_200(self):
        r = self.exchange([("If-None-Match", '"0-0"')])
        self.assertEqual((r.status, r.body), (200, self.BODY))

    def test_if_modified_since_last_modified(self):
        self.assertNotModified(self.exchange([("If-Modified-Since", LAST_MODIFIED)]))

    def test_if_modified_since_later_date(self):
        self.assertNotModified(self.exchange([("If-Modified-Since", "Fri, 01 Jan 2100 00:00:00 GMT")]))

    def test_if_modified_since_older_date_is_200(self):
        r = self.exchange([("If-Modified-Since", "Sat, 01 Jan 2000 00:00:00 GMT")])
        self.assertEqual((r.status, r.body), (200, self.BODY))
        r = self.exchange([("If-Modified-Since", "Tue, 14 Nov 2023 22:13:19 GMT")])  # a second before
        self.assertEqual(r.status, 200)

    def test_if_modified_since_garbage_is_200(self):
        r = self.exchange([("If-Modified-Since", "yesterday")])
        self.assertEqual((r.status, r.body), (200, self.BODY))

    def test_if_none_match_wins_over_if_modified_since(self):
        r = self.exchange([("If-None-Match", '"nope"'), ("If-Modified-Since", LAST_MODIFIED)])
        self.assertEqual((r.status, r.body), (200, self.BODY))


class RangeTest(KnotTestCase):
    SIZE = 1000
    MID_SIZE = MIB + 7  # over the knot-c content cache's 1 MiB object limit

    @classmethod
    def populate(cls, root):
        cls.body = os.urandom(cls.SIZE)
        cls.mid = os.urandom(cls.MID_SIZE)
        write_file(root, "r.bin", cls.body)
        write_file(root, "mid.bin", cls.mid)
        write_file(root, "empty.bin", b"")

    def range_get(self, value, target="/r.bin", method="GET", extra=()):
        with Conn(self.port) as c:
            r = c.exchange(request(target, method=method, headers=[("Range", value), *extra]))
            again = c.exchange(request("/r.bin"))  # still in step
            self.assertEqual((again.status, again.body), (200, self.body))
            return r

    def assertPartial(self, r, first, last, data, size):
        self.assertEqual(r.status, 206)
        self.assertEqual(r.reason, "Partial Content")
        self.assertEqual(r.headers["content-range"], f"bytes {first}-{last}/{size}")
        self.assertEqual(r.headers["content-length"], str(last - first + 1))
        self.assertEqual(r.headers["etag"], etag_of(size))
        self.assertEqual(r.body, data[first:last + 1])

    def test_first_ten_bytes(self):
        self.assertPartial(self.range_get("bytes=0-9"), 0, 9, self.body, self.SIZE)

    def test_suffix(self):
        self.assertPartial(self.range_get("bytes=-5"), 995, 999, self.body, self.SIZE)
        self.assertPartial(self.range_get("bytes=-5000"), 0, 999, self.body, self.SIZE)

    def test_open_ended(self):
        self.assertPartial(self.range_get("bytes=10-"), 10, 999, self.body, self.SIZE)

    def test_last_clamped_to_the_size(self):
        self.assertPartial(self.range_get("bytes=990-2000"), 990, 999, self.body, self.SIZE)

    def test_single_byte(self):
        self.assertPartial(self.range_get("bytes=999-999"), 999, 999, self.body, self.SIZE)

    def test_unsatisfiable(self):
        for value in ("bytes=999999-", "bytes=1000-", "bytes=-0"):
            with self.subTest(value=value):
                r = self.range_get(value)
                self.assertEqual(r.status, 416)
                self.assertEqual(r.headers["content-range"], f"bytes */{self.SIZE}")
                self.assertErrorPage(416, r.headers, r.body, "Range Not Satisfiable")

    def test_range_of_an_empty_file_is_unsatisfiable(self):
        r = self.range_get("bytes=0-0", target="/empty.bin")
        self.assertEqual(r.status, 416)
        self.assertEqual(r.headers["content-range"], "bytes */0")

    def test_several_ranges_send_the_whole_file(self):
        r = self.range_get("bytes=0-1,5-6")
        self.assertEqual((r.status, r.body), (200, self.body))
        self.assertNotIn("content-range", r.headers)

    def test_ignored_range_headers(self):
        for value in ("bytes=5-1", "items=0-1", "bytes=x-y", "bytes 0-1"):
            with self.subTest(value=value):
                r = self.range_get(value)
                self.assertEqual((r.status, r.body), (200, self.body))

    def test_if_range(self):
        tag = etag_of(self.SIZE)
        self.assertPartial(self.range_get("bytes=0-9", extra=[("If-Range", tag)]), 0, 9, self.body, self.SIZE)
        self.assertPartial(self.range_get("bytes=0-9", extra=[("If-Range", LAST_MODIFIED)]),
                           0, 9, self.body, self.SIZE)
        r = self.range_get("bytes=0-9", extra=[("If-Range", '"stale"')])
        self.assertEqual((r.status, r.body), (200, self.body))

    def test_head_with_range(self):
        r = self.range_get("bytes=0-9", method="HEAD")
        self.assertEqual(r.status, 206)
        self.assertEqual(r.headers["content-range"], f"bytes 0-9/{self.SIZE}")
        self.assertEqual(r.headers["content-length"], "10")
        self.assertEqual(r.body, b"")

    def test_ranges_of_a_file_over_a_mib(self):
        for first, last in ((0, 0), (600_000, 700_000), (MIB - 3, MIB + 6), (65_535, 65_536 * 3)):
            with self.subTest(first=first, last=last):
                r = self.range_get(f"bytes={first}-{last}", target="/mid.bin")
                self.assertPartial(r, first, last, self.mid, self.MID_SIZE)
        r = self.range_get("bytes=-7", target="/mid.bin")
        self.assertPartial(r, MIB, MIB + 6, self.mid, self.MID_SIZE)


# ---------------------------------------------------------------------------
# File sizes and byte identity
# ---------------------------------------------------------------------------

class FileSizesTest(KnotTestCase):
    SIZES = (0, 1, 4 * KIB, 100 * KIB, MIB + 7)

    @classmethod
    def populate(cls, root):
        cls.data = {}
        for size in cls.SIZES:
            cls.data[size] = os.urandom(size)
            write_file(root, f"f{size}.bin", cls.data[size])

    def test_raw_socket_bytes_identical(self):
        with Conn(self.port) as c:
            for _ in range(2):  # the second time from the cache (knot-c: from memory)
                for size in self.SIZES:
                    with self.subTest(size=size):
                        r = c.exchange(request(f"/f{size}.bin"))
                        self.assertEqual(r.status, 200)
                        self.assertEqual(r.headers["content-length"], str(size))
                        self.assertEqual(r.body_sha, sha256(self.data[size]))

    @unittest.skipUnless(shutil.which("curl"), "curl is not installed")
    def test_curl_bytes_identical(self):
        for size in self.SIZES:
            with self.subTest(size=size):
                out = os.path.join(self.tmp, f"curl-{size}.out")
                code, got = curl(self.port, f"/f{size}.bin", out)
                self.assertEqual((code, got), (200, size))
                self.assertEqual(file_sha(out), sha256(self.data[size]))

    def test_concurrent_downloads(self):
        """Eight keep-alive connections at once, each fetching the two biggest
        files in turn, ten times. Up to three attempts: an interleaving of two
        transfers is a race, each attempt a fresh chance to catch it."""
        sizes = (100 * KIB, MIB + 7)
        for attempt in range(3):
            results, lock = [], threading.Lock()

            def client():
                try:
                    with Conn(self.port, timeout=slow(30)) as c:
                        for _ in range(10):
                            for size in sizes:
                                r = c.exchange(request(f"/f{size}.bin"))
                                ok = r.status == 200 and r.body_sha == sha256(self.data[size])
                                with lock:
                                    results.append(ok or f"{size}-byte file: status {r.status}, other bytes")
                except Exception as e:  # reported by the main thread
                    with lock:
                        results.append(repr(e))

            threads = [threading.Thread(target=client) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(slow(60))
            self.assertFalse(any(t.is_alive() for t in threads), "a download did not finish in time")
            wrong = [r for r in results if r is not True]
            if wrong:
                self.fail(f"attempt {attempt + 1}: {len(wrong)} of {len(results)} downloads wrong: {wrong[:4]}")
            self.assertEqual(len(results), 8 * 10 * len(sizes))


class DescriptorChurnTest(KnotTestCase):
    """Short connections for many small files with a file cache of four:
    connection sockets and the cache's files trade descriptor numbers all
    the time, on every vproc. Every body must arrive whole. (A number's state
    reset by a close on another vproc once cut bodies off here, about one
    in 100,000: docs/knot.md.)"""
    flags = ("--fd-cache", "4")
    FILES = 64

    @classmethod
    def populate(cls, root):
        cls.sizes = {}
        for i in range(cls.FILES):
            size = 1 + (i * 37) % 300
            cls.sizes[f"c{i}"] = size
            write_file(root, f"c{i}", bytes([65 + i % 26]) * size)

    def test_every_body_arrives_whole(self):
        deadline = time.monotonic() + slow(2)
        results, lock = [], threading.Lock()

        def client(seed):
            n, bad = 0, []
            while time.monotonic() < deadline and n < 20000:
                name = f"c{(seed * 7919 + n * 31) % self.FILES}"
                try:
                    with socket.create_connection((HOST, self.port), timeout=slow(10)) as s:
                        s.sendall(f"GET /{name} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
                        data = b""
                        while chunk := s.recv(65536):
                            data += chunk
                except OSError as e:
                    bad.append(f"{name}: {e!r}")
                    break
                head, _, body = data.partition(b"\r\n\r\n")
                if not head.startswith(b"HTTP/1.1 200 ") or len(body) != self.sizes[name]:
                    bad.append(f"{name}: {head[:40]!r}..., {len(body)} of {self.sizes[name]} body bytes")
                n += 1
            with lock:
                results.append((n, bad))

        threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(slow(30))
        self.assertFalse(any(t.is_alive() for t in threads))
        bad = [b for _, bs in results for b in bs]
        total = sum(n for n, _ in results)
        self.assertEqual(bad, [], f"{len(bad)} of {total} responses cut short")
        self.assertGreater(total, 100)


class SlowClientTest(KnotTestCase):
    """Clients that stop reading stall their own downloads, nobody else's.

    In mode b every transfer holds an offload worker until it ends (the
    study's knot-b: blocking sendfile in a worker), so there the pool is
    sized above the stalled clients, as docs/knot.md tells users to."""
    STALLED = 16 * MIB
    STALLERS = 5  # more than the offload pool's default 4 workers

    @classmethod
    def setUpClass(cls):
        cls.flags = ("--workers", "16") if is_knot() and CFG.mode == "b" else ()
        super().setUpClass()

    @classmethod
    def populate(cls, root):
        cls.small = os.urandom(16 * KIB)
        write_file(root, "stalled.bin", os.urandom(cls.STALLED))
        write_file(root, "small.bin", cls.small)

    def test_stalled_downloads_do_not_hold_up_another(self):
        stalled = []
        try:
            for _ in range(self.STALLERS):
                c = Conn(self.port, rcvbuf=64 * KIB, timeout=slow(30))
                stalled.append(c)
                c.send(request("/stalled.bin"))
            time.sleep(0.5)  # their socket buffers fill; the server waits for room
            with Conn(self.port, timeout=slow(5)) as other:
                try:
                    r = other.exchange(request("/small.bin"))
                except TimeoutError:
                    self.fail(f"no whole response for a 16 KiB file within {slow(5)} s while {self.STALLERS} "
                              f"other clients do not read: {other.received} bytes received")
                self.assertEqual(r.status, 200)
                self.assertEqual(r.body, self.small)
            # The stalled ones complete once read.
            for c in stalled:
                r = c.read_response(sink=lambda piece: None)
                self.assertEqual((r.status, r.body_len), (200, self.STALLED))
        finally:
            for c in stalled:
                c.close()


class HeldRepliesTest(KnotTestCase):
    """Clients that pipeline and do not read make the server wait with a
    reply head half sent, on several connections at once: each head that
    finally goes must still be its own request's. (A server that builds
    heads in a buffer its connections share, as weft-vtserver does, must
    move a head out before it waits; with the move taken out this test
    fails.) HEAD replies are all head, so they fill the socket buffers
    with heads."""
    flags = ("--max-requests", "100000")
    CONNS = 6
    REQUESTS = 12000  # HEAD replies per connection: some MB, beyond the socket buffers

    @classmethod
    def populate(cls, root):
        cls.targets = [f"/h{i}.bin" for i in range(8)]
        for i, target in enumerate(cls.targets):
            write_file(root, target[1:], os.urandom(3 * KIB + 517 * i))

    def test_heads_sent_after_a_wait_are_their_own_requests(self):
        def without_date(r):
            return [(k, v) for k, v in r.header_list if k.lower() != "date"]

        expected = {}
        with Conn(self.port) as c:
            for t in self.targets:
                r = c.exchange(request(t, method="HEAD"))
                self.assertEqual(r.status, 200, t)
                expected[t] = without_date(r)
        conns, senders = [], []
        try:
            for k in range(self.CONNS):
                c = Conn(self.port, rcvbuf=4 * KIB, timeout=slow(20))
                conns.append(c)
                batch = b"".join(request(self.targets[(i + k) % 8], method="HEAD") for i in range(self.REQUESTS))
                senders.append(threading.Thread(target=c.send, args=(batch,), daemon=True))
                senders[-1].start()
            time.sleep(0.5)  # the socket buffers fill; the server waits with heads half sent

            # Each connection is read by its own thread, as its own client
            # would: read one after another, a server whose loop waits in a
            # blocking send (userver-b) and holds two of them could wait for
            # its --send-timeout on the one not yet read, with the one being
            # read stuck behind it.
            def read_all(k, c):
                for i in range(self.REQUESTS):
                    target = self.targets[(i + k) % 8]
                    r = c.read_response(head_request=True)
                    if r is None:
                        return f"connection {k} closed after {i} replies"
                    if (r.status, without_date(r)) != (200, expected[target]):
                        return f"connection {k}, reply {i}: not the head of {target}: {r.status} {r.header_list}"
                return None

            with concurrent.futures.ThreadPoolExecutor(len(conns)) as pool:
                results = list(pool.map(read_all, range(len(conns)), conns))
            self.assertEqual([m for m in results if m], [])
        finally:
            for c in conns:
                c.close()
            for t in senders:
                t.join(slow(10))


class LargeFileTest(KnotTestCase):
    group = "large"

    @classmethod
    def populate(cls, root):
        cls.sha = BigFile.link_into(root)

    def test_raw_socket_100_mib(self):
        with Conn(self.port, timeout=slow(60)) as c:
            r = c.exchange(request("/big.bin"), sink=lambda piece: None)
            self.assertEqual(r.status, 200)
            self.assertEqual(r.headers["content-length"], str(BIG_SIZE))
            self.assertEqual(r.body_len, BIG_SIZE)
            self.assertEqual(r.body_sha, self.sha)
            # and the connection is still good after it
            r = c.exchange(request("/big.bin", headers=[("Range", "bytes=52428799-52428899")]))
            self.assertEqual(r.status, 206)
            self.assertEqual(r.body, BigFile.slice(52428799, 52428899))

    @unittest.skipUnless(shutil.which("curl"), "curl is not installed")
    def test_curl_100_mib(self):
        out = os.path.join(self.tmp, "curl-big.out")
        code, size = curl(self.port, "/big.bin", out, timeout=int(slow(60)))
        self.assertEqual((code, size), (200, BIG_SIZE))
        self.assertEqual(file_sha(out), self.sha)
        os.unlink(out)

    def test_ranges_deep_in_the_file(self):
        for first, last in ((BIG_SIZE - 10, BIG_SIZE - 1), (77_777_777, 77_777_777 + 3 * MIB)):
            with self.subTest(first=first):
                with Conn(self.port, timeout=slow(30)) as c:
                    r = c.exchange(request("/big.bin", headers=[("Range", f"bytes={first}-{last}")]))
                    self.assertEqual(r.status, 206)
                    self.assertEqual(r.headers["content-range"], f"bytes {first}-{last}/{BIG_SIZE}")
                    self.assertEqual(r.body, BigFile.slice(first, last))


# ---------------------------------------------------------------------------
# Connections: keep-alive, pipelining
# ---------------------------------------------------------------------------

class KeepAliveTest(KnotTestCase):
    @classmethod
    def populate(cls, root):
        write_file(root, "one.txt", b"one\n")
        write_file(root, "two.txt", b"two two\n")
        write_file(root, "three.txt", b"three three three\n")

    def test_several_requests_on_one_connection(self):
        with Conn(self.port) as c:
            for i in range(10):
                name = ("one", "two", "three")[i % 3]
                r = c.exchange(request(f"/{name}.txt"))
                self.assertEqual(r.status, 200)
                self.assertEqual(r.headers["connection"], "keep-alive")
                self.assertEqual(r.body, read_bytes(os.path.join(self.root, f"{name}.txt")))
            self.assertFalse(c.wait_closed(0.3))

    def test_connection_close_is_honoured(self):
        status, headers, body, closed = send_raw(self.port, request("/one.txt", headers=[("Connection", "close")]))
        self.assertEqual((status, body), (200, b"one\n"))
        self.assertEqual(headers["connection"], "close")
        self.assertTrue(closed)

    def test_connection_close_among_other_tokens(self):
        status, headers, _, closed = send_raw(
            self.port, request("/one.txt", headers=[("Connection", "TE, Close")]))
        self.assertEqual((status, headers["connection"], closed), (200, "close", True))

    def test_http10_closes_by_default(self):
        status, headers, body, closed = send_raw(self.port, request("/one.txt", version="HTTP/1.0", host=None))
        self.assertEqual((status, body), (200, b"one\n"))
        self.assertEqual(headers["connection"], "close")
        self.assertTrue(closed)

    def test_http10_keep_alive(self):
        with Conn(self.port) as c:
            for _ in range(3):
                r = c.exchange(request("/two.txt", version="HTTP/1.0", host=None,
                                       headers=[("Connection", "keep-alive")]))
                self.assertEqual((r.status, r.body), (200, b"two two\n"))
                self.assertEqual(r.headers["connection"], "keep-alive")
            self.assertFalse(c.wait_closed(0.3))

    def test_pipelined_requests_in_one_send(self):
        with Conn(self.port) as c:
            c.send(request("/one.txt") + request("/two.txt") + request("/three.txt"))
            bodies = [c.read_response().body for _ in range(3)]
            self.assertEqual(bodies, [b"one\n", b"two two\n", b"three three three\n"])
            self.assertFalse(c.wait_closed(0.3))
            self.assertEqual(c.buf, b"")

    def test_pipelined_mixed_ending_with_close(self):
        with Conn(self.port) as c:
            c.send(request("/one.txt") + request("/two.txt", method="HEAD") + request("/missing")
                   + request("/three.txt", headers=[("Connection", "close")]) + request("/one.txt"))
            r1 = c.read_response()
            r2 = c.read_response(head_request=True)
            r3 = c.read_response()
            r4 = c.read_response()
            self.assertEqual([r.status for r in (r1, r2, r3, r4)], [200, 200, 404, 200])
            self.assertEqual((r1.body, r2.body, r4.body), (b"one\n", b"", b"three three three\n"))
            self.assertEqual(r4.headers["connection"], "close")
            self.assertTrue(c.wait_closed(slow(5)))
            self.assertEqual(c.buf, b"", "answered a request after Connection: close")

    def test_many_pipelined_requests_beyond_the_input_buffer(self):
        # 600 requests (~28 KiB) in one send: more than one read of the server's buffer.
        names = ["one", "two", "three"]
        batch = b"".join(request(f"/{names[i % 3]}.txt") for i in range(600))
        self.assertGreater(len(batch), 20 * KIB)
        expected = {n: read_bytes(os.path.join(self.root, f"{n}.txt")) for n in names}
        with Conn(self.port, timeout=slow(20)) as c:
            c.send(batch)
            for i in range(600):
                r = c.read_response()
                self.assertIsNotNone(r, f"closed after {i} responses")
                self.assertEqual((r.status, r.body), (200, expected[names[i % 3]]), f"response {i}")

    def test_request_arriving_byte_by_byte(self):
        with Conn(self.port) as c:
            for byte in request("/two.txt"):
                c.send(bytes([byte]))
                time.sleep(0.001)
            r = c.read_response()
            self.assertEqual((r.status, r.body), (200, b"two two\n"))


# ---------------------------------------------------------------------------
# Malformed and refused requests
# ---------------------------------------------------------------------------

class ErrorsTest(KnotTestCase):
    @classmethod
    def populate(cls, root):
        write_file(root, "a.txt", b"aaa\n")

    def test_garbage_request_line(self):
        for data in (b"HELLO\r\n\r\n", b"GET\r\n\r\n", b"GET /a.txt\r\n\r\n", b"GET  /a.txt HTTP/1.1\r\n\r\n",
                     b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", b"GET a.txt HTTP/1.1\r\nHost: k\r\n\r\n",
                     b"GET /a.txt HTTP/1.1x\r\nHost: k\r\n\r\n", b"GET /a\x00.txt HTTP/1.1\r\nHost: k\r\n\r\n"):
            with self.subTest(data=data):
                self.assertClosedWith(data, 400, "Bad Request")

    def test_http11_without_host(self):
        self.assertClosedWith(b"GET /a.txt HTTP/1.1\r\n\r\n", 400, "Bad Request")

    def test_two_host_headers(self):
        self.assertClosedWith(b"GET /a.txt HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "Bad Request")

    def test_bad_content_length(self):
        for value in ("abc", "-1", "1 2", "0x10", "", "1234567890123456789"):
            with self.subTest(value=value):
                self.assertClosedWith(request("/a.txt", headers=[("Content-Length", value)]), 400, "Bad Request")

    def test_conflicting_content_lengths(self):
        data = request("/a.txt", headers=[("Content-Length", "1"), ("Content-Length", "2")])
        self.assertClosedWith(data, 400, "Bad Request")

    def test_malformed_header_lines(self):
        for line in (b"NoColonHere", b"Bad Name: x", b": empty", b"X-Ctl: a\x01b", b"X-CR: a\rb"):
            with self.subTest(line=line):
                self.assertClosedWith(b"GET /a.txt HTTP/1.1\r\nHost: k\r\n" + line + b"\r\n\r\n", 400,
                                      "Bad Request")

    def test_obsolete_line_folding(self):
        self.assertClosedWith(b"GET /a.txt HTTP/1.1\r\nHost: k\r\nX-A: one\r\n  two\r\n\r\n", 400, "Bad Request")

    def test_post_is_405_with_allow(self):
        with Conn(self.port) as c:
            c.send(b"POST /a.txt HTTP/1.1\r\nHost: k\r\nContent-Length: 5\r\n\r\nhello" + request("/a.txt"))
            r = c.read_response()
            self.assertEqual(r.status, 405)
            self.assertEqual(r.headers["allow"], "GET, HEAD")
            self.assertErrorPage(405, r.headers, r.body, "Method Not Allowed")
            # A well-formed request: its body is skipped and the connection goes on.
            r = c.read_response()
            self.assertEqual((r.status, r.body), (200, b"aaa\n"))

    def test_other_http_methods_are_405(self):
        for method in ("PUT", "DELETE", "OPTIONS", "PATCH", "TRACE"):
            with self.subTest(method=method):
                status, headers, _, _ = send_raw(self.port, request("/a.txt", method=method))
                self.assertEqual(status, 405)
                self.assertEqual(headers["allow"], "GET, HEAD")

    def test_unknown_method_is_501(self):
        for method in ("BREW", "get", "PROPFIND"):
            with self.subTest(method=method):
                status, headers, body, _ = send_raw(self.port, request("/a.txt", method=method))
                self.assertEqual(status, 501)
                self.assertErrorPage(501, headers, body, "Not Implemented")

    def test_http2_version_is_505(self):
        for version in ("HTTP/2.0", "HTTP/0.9", "HTTP/3.0"):
            with self.subTest(version=version):
                self.assertClosedWith(request("/a.txt", version=version), 505, "HTTP Version Not Supported")

    def test_request_line_of_9000_bytes_is_414(self):
        data = request("/" + "a" * 9000)
        self.assertClosedWith(data, 414, "URI Too Long")

    def test_request_line_over_the_limit_without_its_end_is_414(self):
        # No line end yet: the server judges what has arrived.
        with Conn(self.port) as c:
            c.send(b"GET /" + b"b" * 9000)
            r = c.read_response()
            self.assertEqual(r.status, 414)
            self.assertTrue(c.wait_closed(slow(5)))

    def test_200_headers_is_431(self):
        headers = [(f"X-H{i}", "v") for i in range(200)]
        self.assertClosedWith(request("/a.txt", headers=headers), 431, "Request Header Fields Too Large")

    def test_100_headers_are_fine(self):
        headers = [(f"X-H{i}", "v") for i in range(99)]  # and Host: 100 lines
        status, _, body, _ = send_raw(self.port, request("/a.txt", headers=headers))
        self.assertEqual((status, body), (200, b"aaa\n"))

    def test_head_over_16_kib_is_431(self):
        headers = [(f"X-Big{i}", "v" * 4000) for i in range(5)]  # about 20 KiB in 6 lines
        self.assertClosedWith(request("/a.txt", headers=headers), 431, "Request Header Fields Too Large")

    def test_body_over_a_mib_is_413(self):
        self.assertClosedWith(request("/a.txt", headers=[("Content-Length", "2000000")]), 413, "Content Too Large")

    def test_chunked_transfer_encoding_is_501(self):
        data = request("/a.txt", method="POST", headers=[("Transfer-Encoding", "chunked")]) + b"5\r\nhello\r\n0\r\n\r\n"
        self.assertClosedWith(data, 501, "Not Implemented")
        self.assertClosedWith(request("/a.txt", headers=[("Transfer-Encoding", "chunked")]), 501, "Not Implemented")

    def test_error_stops_a_pipeline(self):
        with Conn(self.port) as c:
            c.send(request("/a.txt") + b"BROKEN\r\n\r\n" + request("/a.txt"))
            self.assertEqual(c.read_response().status, 200)
            r = c.read_response()
            self.assertEqual(r.status, 400)
            self.assertTrue(c.wait_closed(slow(5)))
            self.assertEqual(c.buf, b"", "answered a request after a malformed one")


# ---------------------------------------------------------------------------
# Docroot confinement
# ---------------------------------------------------------------------------

class ConfinementLayout:
    @classmethod
    def populate(cls, root):
        write_file(root, "a.txt", b"inside a\n")
        write_file(root, "sub/index.html", b"sub index\n")
        write_file(root, "sub/b.txt", b"inside b\n")
        outside = os.path.dirname(root)
        os.symlink("../secret.txt", os.path.join(root, "link_out"))
        os.symlink(os.path.join(outside, "secret.txt"), os.path.join(root, "link_abs"))
        os.symlink("../outside", os.path.join(root, "dir_out"))
        os.symlink("a.txt", os.path.join(root, "link_in"))
        os.symlink("../a.txt", os.path.join(root, "sub", "link_up"))
        os.mkfifo(os.path.join(root, "fifo"))


class ConfinementTest(ConfinementLayout, KnotTestCase):
    # (target, status): 400 for paths that climb out or hide a slash or NUL,
    # 404 for escapes that decode to plain names, 403 for symlinks leaving the root.
    CASES = (
        ("/../secret.txt", 400),
        ("/../etc/passwd", 400),
        ("/..", 400),
        ("/%2e%2e/%2e%2e/etc/passwd", 400),
        ("/%2E%2E/secret.txt", 400),
        ("/.%2e/secret.txt", 400),
        ("/sub/../../secret.txt", 400),
        ("/./../secret.txt", 400),
        ("/a/..%2f..%2fetc/passwd", 400),
        ("/sub%2Fb.txt", 400),
        ("/sub%2fb.txt", 400),
        ("/a.txt%00", 400),
        ("/a.txt%00.html", 400),
        ("/%zz", 400),
        ("/a%2", 400),
        ("/%252e%252e/secret.txt", 404),
        ("/%252e%252e/%252e%252e/etc/passwd", 404),
        ("/..%5csecret.txt", 404),
        ("/..\\secret.txt", 404),
        ("/link_out", 403),
        ("/link_abs", 403),
        ("/dir_out/secret2.txt", 403),
        ("/dir_out/", 403),
        ("/fifo", 403),
    )

    def test_escapes_are_refused(self):
        for target, want in self.CASES:
            with self.subTest(target=target):
                status, headers, body, closed = send_raw(self.port, request(target))
                self.assertEqual(status, want, body)
                self.assertNoSecret(body)
                if want == 400:
                    self.assertTrue(closed, "a malformed path should close the connection")

    def test_absolute_form_cannot_climb(self):
        status, _, body, _ = send_raw(self.port, request("http://knot/../secret.txt", host=None))
        self.assertEqual(status, 400)
        self.assertNoSecret(body)

    def test_paths_that_stay_inside_are_served(self):
        for target, want in (("/sub/../a.txt", b"inside a\n"), ("/./a.txt", b"inside a\n"),
                             ("//a.txt", b"inside a\n"), ("/sub/./b.txt", b"inside b\n"),
                             ("/%73ub/b.txt", b"inside b\n"), ("/link_in", b"inside a\n"),
                             ("/sub/link_up", b"inside a\n")):
            with self.subTest(target=target):
                status, _, body, _ = send_raw(self.port, request(target))
                self.assertEqual((status, body), (200, want))

    def test_fifo_does_not_hang_the_server(self):
        status, _, _, _ = get(self.port, "/fifo")
        self.assertEqual(status, 403)
        status, _, body, _ = get(self.port, "/a.txt")
        self.assertEqual((status, body), (200, b"inside a\n"))


class FollowSymlinksTest(ConfinementLayout, KnotTestCase):
    flags = ("--follow-symlinks",)

    def setUp(self):
        super().setUp()
        Conn.secret_allowed = True  # served on purpose here
        self.addCleanup(setattr, Conn, "secret_allowed", False)

    def test_symlinks_leading_outside_are_served(self):
        for target, want in (("/link_out", SECRET), ("/link_abs", SECRET), ("/dir_out/secret2.txt", SECRET2)):
            with self.subTest(target=target):
                status, _, body, _ = get(self.port, target)
                self.assertEqual((status, body), (200, want))

    def test_dot_dot_is_still_refused(self):
        for target in ("/../secret.txt", "/%2e%2e/secret.txt", "/sub/../../outside/secret2.txt"):
            with self.subTest(target=target):
                status, _, body, _ = get(self.port, target)
                self.assertEqual(status, 400)
                self.assertNoSecret(body)
        status, _, body, _ = get(self.port, "/%252e%252e/secret.txt")
        self.assertEqual(status, 404)
        self.assertNoSecret(body)


# ---------------------------------------------------------------------------
# Timeouts and limits
# ---------------------------------------------------------------------------

class TimeoutTest(KnotTestCase):
    flags = ("--header-timeout", "1", "--keepalive-timeout", "1")

    @classmethod
    def populate(cls, root):
        write_file(root, "a.txt", b"aaa\n")

    def test_partial_head_gets_408(self):
        with Conn(self.port) as c:
            start = time.monotonic()
            c.send(b"GET /a.txt HTTP/1.1\r\nHost: k\r\n")
            r = c.read_response(timeout=slow(5))
            elapsed = time.monotonic() - start
            self.assertEqual(r.status, 408)
            self.assertErrorPage(408, r.headers, r.body, "Request Timeout")
            self.assertEqual(r.headers["connection"], "close")
            self.assertTrue(c.wait_closed(slow(5)))
            self.assertGreater(elapsed, 0.8)

    def test_silent_new_connection_gets_408(self):
        with Conn(self.port) as c:
            r = c.read_response(timeout=slow(5))
            self.assertIsNotNone(r, "closed without a 408")
            self.assertEqual(r.status, 408)
            self.assertTrue(c.wait_closed(slow(5)))

    def test_trickled_head_still_times_out(self):
        # One byte every 0.2 s keeps the socket busy, but the head has one deadline.
        with Conn(self.port) as c:
            start = time.monotonic()
            r = None
            for byte in b"GET /a.txt HTTP/1.1\r\nX-Slow: " + b"z" * 40:
                c.send(bytes([byte]))
                ready, _, _ = select.select([c.sock], [], [], 0.2)
                if ready:
                    r = c.read_response(timeout=slow(5))
                    break
                if time.monotonic() - start > slow(6):
                    break
            self.assertIsNotNone(r, "no 408 while the head trickled in")
            self.assertEqual(r.status, 408)
            self.assertLess(time.monotonic() - start, slow(4))

    def test_idle_keep_alive_is_closed(self):
        with Conn(self.port) as c:
            r = c.exchange(request("/a.txt"))
            self.assertEqual((r.status, r.headers["connection"]), (200, "keep-alive"))
            start = time.monotonic()
            self.assertTrue(c.wait_closed(slow(5)), "an idle keep-alive connection stayed open")
            self.assertGreater(time.monotonic() - start, 0.8)
            self.assertEqual(c.buf, b"", "an idle connection should close without a response")

    def test_keep_alive_within_the_timeout(self):
        with Conn(self.port) as c:
            for _ in range(3):
                r = c.exchange(request("/a.txt"))
                self.assertEqual(r.status, 200)
                time.sleep(0.5)


class SendTimeoutTest(KnotTestCase):
    flags = ("--send-timeout", "1", "--stats")
    SIZE = 16 * MIB

    @classmethod
    def populate(cls, root):
        write_file(root, "big.bin", os.urandom(cls.SIZE))

    def open_connections(self):
        status, _, body, _ = get(self.port, "/.weft/stats")
        self.assertEqual(status, 200)
        return json.loads(body)["connections"]["open"]

    def test_a_reader_that_stops_is_dropped(self):
        with Conn(self.port, rcvbuf=64 * KIB) as c:
            c.send(request("/big.bin"))
            r = c.read_response(head_request=True)  # the head only; the body is left unread
            self.assertEqual(r.status, 200)
            # No progress for a second: the server gives up and closes. Reading
            # now finds what was in the buffers, then the end, short of the body.
            time.sleep(slow(2.5))
            self.assertTrue(c.wait_closed(slow(10)), "the server kept a connection that made no progress")
            self.assertLess(len(c.buf), self.SIZE, "with --send-timeout 1 the server still sent the whole body "
                                                   "to a client that had stopped reading for 2.5 s")
        # Only the stats connection is left.
        self.assertTrue(wait_for(lambda: self.open_connections() == 1, slow(5)))

    def test_the_send_timeout_does_not_cut_an_idle_keep_alive_connection(self):
        # Idle between requests is the keep-alive timeout's business (15 s by
        # default), not the send timeout's (1 s here). Regression: the send
        # timeout stayed set while the connection waited for its next request.
        with Conn(self.port, timeout=slow(10)) as c:
            self.assertEqual(c.exchange(request("/.weft/stats")).status, 200)
            time.sleep(2.5)
            self.assertEqual(c.exchange(request("/.weft/stats")).status, 200)


class LimitsTest(KnotTestCase):
    flags = ("--max-conns", "5", "--max-requests", "3")

    @classmethod
    def populate(cls, root):
        write_file(root, "a.txt", b"aaa\n")

    def request_on_fresh_connection_ok(self):
        try:
            status, _, _, _ = get(self.port, "/a.txt", headers=[("Connection", "close")])
            return status == 200
        except OSError:
            return False

    def test_sixth_connection_gets_503(self):
        self.assertTrue(wait_for(self.request_on_fresh_connection_ok, slow(5)))
        # The probe's connection counts until the server has closed it, which
        # may come a moment after the client read the reply (in SYMPED another
        # process may accept the next connections meanwhile): let it go first.
        time.sleep(slow(0.5))
        conns = []
        try:
            for _ in range(5):
                c = Conn(self.port)
                conns.append(c)
                r = c.exchange(request("/a.txt"))
                self.assertEqual((r.status, r.headers["connection"]), (200, "keep-alive"))
            with Conn(self.port) as sixth:
                r = sixth.read_response()  # refused at once: no need to send
                self.assertIsNotNone(r, "the sixth connection was closed without a 503")
                self.assertEqual(r.status, 503)
                self.assertEqual(r.headers["retry-after"], "1")
                self.assertEqual(r.headers["connection"], "close")
                self.assertErrorPage(503, r.headers, r.body, "Service Unavailable")
                self.assertTrue(sixth.wait_closed(slow(5)))
            # The five are still served.
            for c in conns:
                self.assertEqual(c.exchange(request("/a.txt")).status, 200)
            # One goes: there is room again.
            conns.pop().close()
            self.assertTrue(wait_for(self.request_on_fresh_connection_ok, slow(5)),
                            "no room after a connection closed")
        finally:
            for c in conns:
                c.close()

    def test_max_requests_per_connection(self):
        self.assertTrue(wait_for(self.request_on_fresh_connection_ok, slow(5)))
        with Conn(self.port) as c:
            seen = [c.exchange(request("/a.txt")).headers["connection"] for _ in range(3)]
            self.assertEqual(seen, ["keep-alive", "keep-alive", "close"])
            self.assertTrue(c.wait_closed(slow(5)))


# ---------------------------------------------------------------------------
# Stats and the access log
# ---------------------------------------------------------------------------

class StatsTest(KnotTestCase):
    flags = ("--stats",)

    @classmethod
    def populate(cls, root):
        write_file(root, "a.txt", b"aaa\n")

    def stats(self, target="/.weft/stats"):
        status, headers, body, _ = get(self.port, target)
        self.assertEqual(status, 200)
        self.assertEqual(headers["content-type"], "application/json")
        self.assertEqual(headers["cache-control"], "no-store")
        return json.loads(body)

    def test_stats_is_json_with_the_counters(self):
        s = self.stats()
        for key in ("requests", "connections", "status", "file_cache", "bytes_out") + (("runtime",) if is_knot() else ()):
            self.assertIn(key, s)
        self.assertEqual(s["server"], CFG.prog)
        if is_knot():
            self.assertEqual(s["mode"], CFG.mode)
        self.assertIsInstance(s["requests"], int)
        for key in ("open", "accepted", "rejected_busy", "accept_errors"):
            self.assertIn(key, s["connections"])
        self.assertGreaterEqual(s["connections"]["open"], 1)  # this one
        if is_knot():
            self.assertIn(s["runtime"]["io_backend"], ("uring", "epoll", "poll"))
        if is_knot() and os.environ.get("WEFT_POLICY") == "tap":  # the calendars (docs/tap.md)
            tap = s["tap"]
            self.assertEqual(tap["ratio"], [5, 4, 1])
            self.assertGreater(tap["clocks"], 0)
            self.assertGreater(tap["appointments"][2], 0)  # NET: this request's reads, at least
            for view in ("appointments_by_level", "queued_by_level"):
                for cal in ("cpu", "disk", "net"):
                    self.assertEqual(len(tap[view][cal]), tap["levels"])
            self.assertEqual(sum(tap["appointments_by_level"]["net"]), tap["appointments"][2])
        elif is_knot():
            self.assertNotIn("tap", s)

    def test_counters_count(self):
        before = self.stats("/.weft/stats?first")
        self.assertEqual(get(self.port, "/a.txt")[0], 200)
        self.assertEqual(get(self.port, "/missing")[0], 404)
        self.assertEqual(get(self.port, "/a.txt")[0], 200)
        after = self.stats()
        self.assertEqual(after["requests"] - before["requests"], 4)
        self.assertEqual(after["status"]["2xx"] - before["status"]["2xx"], 3)  # includes the first stats
        self.assertEqual(after["status"]["4xx"] - before["status"]["4xx"], 1)
        self.assertEqual(after["connections"]["accepted"] - before["connections"]["accepted"], 4)

    def test_head_of_stats(self):
        with Conn(self.port) as c:
            r = c.exchange(request("/.weft/stats", method="HEAD"))
            self.assertEqual(r.status, 200)
            self.assertGreater(int(r.headers["content-length"]), 0)
            r = c.exchange(request("/a.txt"))
            self.assertEqual((r.status, r.body), (200, b"aaa\n"))


LOG_LINE = re.compile(r'(\S+) - - \[(\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d \+0000)\] '
                      r'"(.*)" (\d{3}) (\d+) "(.*)" "(.*)"')


@knot_only("the access log")
class AccessLogTest(PerTestServerCase):
    def test_one_line_per_request(self):
        write_file(self.root, "a.txt", b"aaa\n")
        log = os.path.join(self.tmp, "access.log")
        srv = self.start_server(["--access-log", log])
        sent = []  # (request field, status, bytes, referer, user agent)

        status, _, body, _ = get(srv.port, "/a.txt", headers=[("Referer", "http://ref/"),
                                                               ("User-Agent", 'probe "1"')])
        sent.append(("GET /a.txt HTTP/1.1", status, len(body), "http://ref/", r"probe \x221\x22"))
        status, _, _, _ = send_raw(srv.port, request("/a.txt", method="HEAD"))
        sent.append(("HEAD /a.txt HTTP/1.1", status, 0, "-", "-"))
        status, _, body, _ = get(srv.port, "/missing.txt")
        sent.append(("GET /missing.txt HTTP/1.1", status, len(body), "-", "-"))
        status, _, body, _ = send_raw(srv.port, request('/a.txt?q="x"', version="HTTP/1.0", host=None))
        sent.append((r"GET /a.txt?q=\x22x\x22 HTTP/1.0", status, len(body), "-", "-"))
        status, _, body, _ = send_raw(srv.port, b"NONSENSE\r\n\r\n")
        sent.append(("-", status, len(body), "-", "-"))
        self.assertEqual([s[1] for s in sent], [200, 200, 404, 200, 400])

        self.assertGracefulStop(srv)
        with open(log, encoding="latin-1") as f:
            lines = f.read().splitlines()
        self.assertEqual(len(lines), len(sent), lines)
        for line, (req, status, size, referer, agent) in zip(lines, sent):
            with self.subTest(line=line):
                m = LOG_LINE.fullmatch(line)
                self.assertIsNotNone(m, line)
                self.assertEqual(m.group(1), "127.0.0.1")
                self.assertEqual(m.groups()[2:], (req, str(status), str(size), referer, agent))

    def test_unwritable_log_exits_1(self):
        res = subprocess.run(server_cmd(self.root, 0, ["--access-log", os.path.join(self.tmp, "no", "such", "dir", "log")]),
                             capture_output=True, timeout=slow(20))
        self.assertEqual(res.returncode, 1, res.stderr)
        self.assertIn(b"cannot open the access log", res.stderr)


# ---------------------------------------------------------------------------
# Graceful shutdown
# ---------------------------------------------------------------------------

def connect_refused(port):
    """True once a connection to the port is refused (a stopped listener)."""
    try:
        s = socket.create_connection((HOST, port), timeout=1)
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    s.close()
    return False


class ShutdownTest(PerTestServerCase):
    def test_idle_connections_are_closed_on_shutdown(self):
        write_file(self.root, "a.txt", b"aaa\n")
        srv = self.start_server()
        conns = [Conn(srv.port) for _ in range(4)]
        try:
            for c in conns[:3]:  # three idle between requests
                self.assertEqual(c.exchange(request("/a.txt")).status, 200)
            conns[3].send(b"GET /a.txt HTTP/1.1\r\n")  # one in the middle of a head
            time.sleep(0.2)
            start = time.monotonic()
            srv.proc.send_signal(signal.SIGTERM)
            for i, c in enumerate(conns):
                self.assertTrue(c.wait_closed(slow(5)), f"connection {i} left open at shutdown")
                self.assertEqual(c.buf, b"")
            self.assertLess(time.monotonic() - start, slow(5))
            out = self.assertGracefulStop(srv)
            self.assertRegex(out, CFG.prog + r": Terminated: shutting down \(4 connections open\)")
            self.assertRegex(out, CFG.prog + r": stopped after 4 connections, 3 requests")
        finally:
            for c in conns:
                c.close()

    def test_shutdown_drops_a_client_that_stopped_reading(self):
        """In-flight responses are finished, but one that makes no progress
        for --send-timeout seconds is given up: shutdown is bounded."""
        write_file(self.root, "big.bin", os.urandom(16 * MIB))
        srv = self.start_server(["--send-timeout", "1"])
        with Conn(srv.port, rcvbuf=64 * KIB) as c:
            c.send(request("/big.bin"))
            self.assertEqual(c.read_response(head_request=True).status, 200)  # and never read the body
            time.sleep(0.3)
            start = time.monotonic()
            status = srv.stop(timeout=slow(10))
            self.assertEqual(status, 0, srv.stderr())
            self.assertLess(time.monotonic() - start, slow(10))

    def test_sigint_stops_gracefully_too(self):
        srv = self.start_server()
        srv.proc.send_signal(signal.SIGINT)
        self.assertEqual(srv.proc.wait(slow(20)), 0)

    def test_quiet_prints_nothing(self):
        write_file(self.root, "a.txt", b"aaa\n")
        with socket.socket() as s:  # a free port, then let it go for the server
            s.bind((HOST, 0))
            port = s.getsockname()[1]
        proc = subprocess.Popen(server_cmd(self.root, port, ["--quiet"]), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            self.assertTrue(wait_for(lambda: not connect_refused(port), slow(10)))
            self.assertEqual(get(port, "/a.txt")[0], 200)
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=slow(20))
            self.assertEqual((proc.returncode, out), (0, b""), err)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


class ShutdownDuringDownloadTest(PerTestServerCase):
    group = "large"

    def test_download_in_flight_completes(self):
        sha = BigFile.link_into(self.root)
        srv = self.start_server()
        h = hashlib.sha256()
        got = 0
        with Conn(srv.port, timeout=slow(60), rcvbuf=128 * KIB) as c:
            c.send(request("/big.bin"))
            deadline = time.monotonic() + slow(60)
            while b"\r\n\r\n" not in c.buf:
                c.buf += c._recv(deadline)
            head, _, first = c.buf.partition(b"\r\n\r\n")
            c.buf = b""
            self.assertTrue(head.startswith(b"HTTP/1.1 200 OK\r\n"), head)
            self.assertIn(f"Content-Length: {BIG_SIZE}\r\n".encode(), head)
            h.update(first)
            got = len(first)
            signalled = False
            while got < BIG_SIZE:
                chunk = c._recv(deadline, min(256 * KIB, BIG_SIZE - got))
                self.assertTrue(chunk, f"the server closed after {got} of {BIG_SIZE} bytes")
                h.update(chunk)
                got += len(chunk)
                if not signalled and got >= 4 * MIB:
                    srv.proc.send_signal(signal.SIGTERM)
                    signalled = True
                    # The server says so, then closes its listener: a probe
                    # sent before that line could be accepted and counted.
                    self.assertTrue(srv.wait_output(r"shutting down \(\d+ connections open\)", slow(5)),
                                    f"no 'shutting down' within {slow(5)} s of SIGTERM; stdout: {srv.stdout!r}; "
                                    f"stderr: {srv.stderr()}")
                    # The listener goes at once; the transfer goes on.
                    self.assertTrue(wait_for(lambda: connect_refused(srv.port), slow(5)),
                                    f"still accepting connections {slow(5)} s after SIGTERM; stderr: {srv.stderr()}")
                    self.assertTrue(srv.alive(), "the server exited in the middle of a response")
                if got % (4 * MIB) < 256 * KIB:
                    time.sleep(0.02)  # a slow-ish reader: the server waits on a full socket
            self.assertTrue(signalled)
            self.assertEqual(h.hexdigest(), sha)
            self.assertTrue(c.wait_closed(slow(10)), "the connection stayed open after the response")
            self.assertEqual(c.buf, b"")
        out = self.assertGracefulStop(srv)
        self.assertRegex(out, r"shutting down \(1 connections open\)")


# ---------------------------------------------------------------------------
# Start-up, the command line, other configurations
# ---------------------------------------------------------------------------

class CommandLineTest(unittest.TestCase):
    group = "core"

    def run_server(self, *args):
        return subprocess.run([*CFG.wrapper, CFG.server, *args], capture_output=True, timeout=slow(20),
                              stdin=subprocess.DEVNULL)

    def test_help(self):
        res = self.run_server("--help")
        self.assertEqual(res.returncode, 0)
        self.assertIn(b"usage: " + CFG.prog.encode(), res.stdout)
        if is_knot():
            self.assertIn(b"--mode c|nb|b|uring", res.stdout)

    @knot_only("--mode")
    def test_bad_mode_exits_2(self):
        res = self.run_server("--mode", "x")
        self.assertEqual(res.returncode, 2)
        self.assertIn(b"--mode is c, nb, b or uring, not 'x'", res.stderr)

    def test_usage_errors_exit_2(self):
        own = {"weft-knot": [("--threads", "-1"), ("--mode",)],
               "weft-userver": [("--procs", "0"), ("--events", "kqueue"), ("--procs",)],
               "weft-watpipe": [("--writers", "0"), ("--writers",)],
               "weft-pool": [("--workers", "0"), ("--workers", "x"), ("--workers",)]}.get(CFG.prog, [])
        for args in [("--bogus",), ("--max-conns", "0"), ("--keepalive-timeout", "0"), ("--header-timeout", "nan"),
                     ("--listen", "nocolon"), ("--listen", "127.0.0.1:70000"), ("stray",), ("--root",)] + own:
            with self.subTest(args=args):
                res = self.run_server(*args)
                self.assertEqual(res.returncode, 2, res.stderr)
                self.assertTrue(res.stderr.startswith(CFG.prog.encode() + b": "), res.stderr)

    def test_missing_root_exits_1(self):
        res = self.run_server(*server_args("/nonexistent"))
        self.assertEqual(res.returncode, 1)
        self.assertIn(b"cannot read the root '/nonexistent'", res.stderr)

    def test_root_that_is_a_file_exits_1(self):
        with tempfile.NamedTemporaryFile() as f:
            res = self.run_server(*server_args(f.name))
        self.assertEqual(res.returncode, 1)
        self.assertIn(b"cannot read the root", res.stderr)

    def test_port_in_use_exits_1(self):
        with socket.socket() as s:
            s.bind((HOST, 0))
            s.listen(1)
            port = s.getsockname()[1]
            with tempfile.TemporaryDirectory() as root:
                res = self.run_server(*server_args(root, port))
        self.assertEqual(res.returncode, 1, res.stdout)
        self.assertIn(f"cannot listen on {HOST}:{port}".encode(), res.stderr)


class OtherConfigurationsTest(PerTestServerCase):
    """The same service from other configurations (weft-knot: accept models
    other than a thread per connection on one vproc; the µserver: SYMPED,
    shared-SYMPED, poll, select; WatPipe: writer counts)."""

    def serve_concurrently(self, flags):
        write_file(self.root, "a.txt", b"aaa\n")
        write_file(self.root, "m.bin", os.urandom(300 * KIB))
        want = file_sha(os.path.join(self.root, "m.bin"))
        srv = self.start_server(flags)
        results, lock = [], threading.Lock()

        def client():
            try:
                with Conn(srv.port, timeout=slow(30)) as c:
                    for _ in range(5):
                        r = c.exchange(request("/m.bin"))
                        with lock:
                            results.append(r.status == 200 and r.body_sha == want)
            except Exception as e:
                with lock:
                    results.append(repr(e))

        threads = [threading.Thread(target=client) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(slow(60))
        self.assertFalse(any(t.is_alive() for t in threads))
        self.assertEqual(results, [True] * 30)
        self.assertGracefulStop(srv)

    # Each server's other ways of running, over the flags under test.
    CONFIGS = {
        "weft-knot": {"accept threads": ["--threads", "3"], "two vprocs with reuseport": ["--vprocs", "2"],
                      "two vprocs sharing a socket": ["--vprocs", "2", "--no-reuseport", "--workers", "2"],
                      "content cache of zero": ["--cache-mb", "0", "--fd-cache", "1"]},
        "weft-userver": {"SYMPED": ["--procs", "2"], "SYMPED with reuseport": ["--procs", "2", "--reuseport"],
                         "shared-SYMPED": ["--procs", "2", "--shared"], "poll": ["--events", "poll"],
                         "select": ["--events", "select"], "fd cache of one": ["--fd-cache", "1"]},
        "weft-watpipe": {"one writer": ["--writers", "1"], "eight writers": ["--writers", "8"],
                         "fd cache of one": ["--fd-cache", "1"]},
        "weft-vtserver": {"three vprocs": ["--vprocs", "3"],
                          "two vprocs sharing a socket": ["--vprocs", "2", "--no-reuseport"],
                          "fd cache of one": ["--fd-cache", "1"]},
        "weft-staged": {"three vprocs": ["--vprocs", "3"],
                        "two vprocs sharing a socket": ["--vprocs", "2", "--no-reuseport"],
                        "no block cache, fd cache of one": ["--cache-mb", "0", "--fd-cache", "1"]},
        # One worker serves the six clients one after another (each holds
        # it for its five keep-alive requests); the rest queue meanwhile.
        "weft-pool": {"one worker": ["--workers", "1"], "four workers": ["--workers", "4"],
                      "fd cache of one": ["--fd-cache", "1"]},
    }

    def test_other_configurations(self):
        configs = self.CONFIGS.get(CFG.prog)
        if not configs:
            self.skipTest(f"no other configurations listed for {CFG.prog}")
        for name, flags in configs.items():
            with self.subTest(config=name):
                self.serve_concurrently(flags)


# ---------------------------------------------------------------------------
# A full descriptor table
# ---------------------------------------------------------------------------

def separate_tables():
    """How many descriptor tables the server under test has: the µserver's
    SYMPED processes each have their own (shared-SYMPED's loops share one)."""
    if CFG.prog != "weft-userver" or "--shared" in CFG.extra:
        return 1
    procs = [CFG.extra[i + 1] for i, a in enumerate(CFG.extra[:-1]) if a == "--procs"]
    return int(procs[-1]) if procs else 1


class FullDescriptorTableTest(KnotTestCase):
    nofile = 64

    @classmethod
    def setUpClass(cls):
        # Enough connections to fill every table (120 fill one of 64).
        cls.conns = 120 * separate_tables()
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if cls.conns + 64 > soft:
            raise unittest.SkipTest(f"{cls.conns} connections to fill {separate_tables()} descriptor tables "
                                    f"need more than this process's {soft} descriptors")
        super().setUpClass()

    @classmethod
    def populate(cls, root):
        write_file(root, "a.txt", b"aaa\n")

    def test_service_resumes_after_the_table_fills(self):
        conns, statuses = [], []
        try:
            for i in range(self.conns):
                c = Conn(self.port)
                conns.append(c)
                try:
                    r = c.exchange(request("/a.txt"))
                except TimeoutError:
                    r = "timeout"
                statuses.append(r if r in (None, "timeout") else r.status)
                if r not in (None, "timeout") and r.status == 503:
                    self.assertEqual(r.headers["connection"], "close")
                    self.assertTrue(c.wait_closed(slow(5)))
            counts = collections.Counter(statuses)
            if os.environ.get("KNOT_TEST_DEBUG"):
                print(f"\n  statuses: {dict(counts)}", file=sys.stderr)
            self.assertEqual(set(counts) - {200, 503}, set(), f"statuses: {counts}")
            self.assertGreater(counts[200], 0, counts)
            self.assertGreater(counts[503], 0, f"the table never filled: {counts}")
        finally:
            for c in conns:
                c.close()
        # The connections are gone: service resumes.
        ok = wait_for(lambda: get(self.port, "/a.txt")[0] == 200, slow(10), 0.2)
        self.assertTrue(ok, "no 200 after the connections closed")
        self.assertIn("descriptor table full", self.server.stderr())


# ---------------------------------------------------------------------------
# 10,000 concurrent keep-alive connections from another process
# ---------------------------------------------------------------------------

class ManyConnectionsTest(KnotTestCase):
    group = "many"
    CONNS = 10_000
    raise_nofile = True
    flags = ("--max-conns", "10100", "--stats", "--keepalive-timeout", "300", "--header-timeout", "300")

    @classmethod
    def setUpClass(cls):
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        cls.conns = cls.CONNS
        if hard < cls.conns + 200:
            raise unittest.SkipTest(f"RLIMIT_NOFILE hard limit {hard} is too low for {cls.conns} connections")
        if CFG.prog == "weft-pool":
            # A worker holds its connection while it idles between requests
            # (the thread-pool design, docs/pool.md): the pool serves at most
            # --workers connections at once, so it needs one per connection.
            cls.flags = ManyConnectionsTest.flags + ("--workers", str(cls.conns + 100))
        super().setUpClass()

    @classmethod
    def populate(cls, root):
        cls.body = b"many\n" * 20
        write_file(root, "m.txt", cls.body)

    def test_ten_thousand_keep_alive_connections(self):
        cmd = [sys.executable, os.path.abspath(__file__), "--many-client", "--port", str(self.port),
               "--conns", str(self.conns), "--path", "/m.txt", "--body-sha256", sha256(self.body),
               "--timeout", str(slow(100))]
        res = subprocess.run(cmd, capture_output=True, timeout=slow(100) + 30)
        self.assertEqual(res.returncode, 0, res.stderr.decode(errors="replace")[-2000:])
        summary = json.loads(res.stdout)
        if os.environ.get("KNOT_TEST_DEBUG"):
            print(f"\n  client: {summary}", file=sys.stderr)
        self.assertEqual(summary["errors"], {}, summary)
        self.assertEqual(summary["answered"], [self.conns, self.conns], summary)
        self.assertEqual(summary["open_at_once"], self.conns, summary)
        # The server had them all at once too (and the stats connection).
        self.assertGreaterEqual(summary["server_open"], self.conns, summary)
        status, _, body, _ = get(self.port, "/.weft/stats")
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body)["connections"]["rejected_busy"], 0)


class ManyClient:
    """The client process of the 10,000-connection test: one selector loop.

    Round 1 opens every connection (at most MAX_UNANSWERED waiting for their
    first response, so the SYNs fit the server's backlog) and keeps each one
    open after its response; once all have been answered, the server's
    count of open connections is read from /.weft/stats; round 2 sends a
    second request on every one of them. Prints a JSON summary."""

    MAX_UNANSWERED = 500

    def __init__(self, port, conns, path, body_sha, timeout):
        self.port, self.n, self.body_sha = port, conns, body_sha
        self.request = f"GET {path} HTTP/1.1\r\nHost: many\r\n\r\n".encode()
        self.deadline = time.monotonic() + timeout
        self.sel = selectors.DefaultSelector()
        self.errors = collections.Counter()
        self.answered = [0, 0]
        self.alive = []  # [socket, inbuf, outbuf] of connections not failed
        self.unanswered = 0

    def fail(self, conn, why):
        self.errors[why] += 1
        self.unanswered -= 1
        self.sel.unregister(conn[0])
        conn[0].close()
        self.alive.remove(conn)

    def open_one(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        err = s.connect_ex((HOST, self.port))
        if err not in (0, errno.EINPROGRESS):
            self.errors["connect " + errno.errorcode.get(err, str(err))] += 1
            s.close()
            return
        conn = [s, b"", self.request]
        self.alive.append(conn)
        self.unanswered += 1
        self.sel.register(s, selectors.EVENT_WRITE, conn)

    def on_event(self, conn, events, rnd):
        s = conn[0]
        if events & selectors.EVENT_WRITE:
            try:
                sent = s.send(conn[2])
            except BlockingIOError:
                return
            except OSError as e:
                return self.fail(conn, "send " + errno.errorcode.get(e.errno, str(e.errno)))
            conn[2] = conn[2][sent:]
            if not conn[2]:
                self.sel.modify(s, selectors.EVENT_READ, conn)
            return
        try:
            data = s.recv(65536)
        except BlockingIOError:
            return
        except OSError as e:
            return self.fail(conn, "recv " + errno.errorcode.get(e.errno, str(e.errno)))
        if not data:
            return self.fail(conn, "closed by the server")
        conn[1] += data
        end = conn[1].find(b"\r\n\r\n")
        if end < 0:
            return
        head = conn[1][:end].decode("latin-1").split("\r\n")
        length = 0
        for line in head[1:]:
            name, _, value = line.partition(":")
            if name.lower() == "content-length":
                length = int(value)
        if len(conn[1]) < end + 4 + length:
            return
        status = head[0].split(" ")[1]
        body, rest = conn[1][end + 4:end + 4 + length], conn[1][end + 4 + length:]
        if status != "200":
            return self.fail(conn, "status " + status)
        if hashlib.sha256(body).hexdigest() != self.body_sha or rest:
            return self.fail(conn, "wrong body")
        conn[1] = b""
        self.answered[rnd] += 1
        self.unanswered -= 1
        self.sel.unregister(s)

    def server_open_connections(self):
        with socket.create_connection((HOST, self.port), timeout=30) as s:
            s.sendall(b"GET /.weft/stats HTTP/1.1\r\nHost: many\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        return json.loads(data.partition(b"\r\n\r\n")[2])["connections"]["open"]

    def run(self):
        opened = 0
        open_at_once = server_open = 0
        for rnd in (0, 1):
            if rnd == 1:  # the second request on every connection
                for conn in self.alive:
                    conn[2] = self.request
                    self.sel.register(conn[0], selectors.EVENT_WRITE, conn)
                self.unanswered = len(self.alive)
            while time.monotonic() < self.deadline:
                while rnd == 0 and opened < self.n and self.unanswered < self.MAX_UNANSWERED:
                    self.open_one()
                    opened += 1
                if (rnd == 1 or opened == self.n) and self.unanswered == 0:
                    break
                for key, events in self.sel.select(timeout=0.5):
                    self.on_event(key.data, events, rnd)
            if rnd == 0:
                open_at_once = len(self.alive)
                try:
                    server_open = self.server_open_connections()
                except (OSError, ValueError, KeyError) as e:
                    self.errors["stats " + repr(e)] += 1
        if self.unanswered:
            self.errors["unanswered at the deadline"] += self.unanswered
        for conn in self.alive:
            conn[0].close()
        return {"conns": self.n, "answered": self.answered, "open_at_once": open_at_once,
                "server_open": server_open, "errors": dict(self.errors)}


def many_client_main(argv):
    p = argparse.ArgumentParser(prog="test_knot.py --many-client")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--conns", type=int, required=True)
    p.add_argument("--path", required=True)
    p.add_argument("--body-sha256", required=True)
    p.add_argument("--timeout", type=float, default=100)
    a = p.parse_args(argv)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    started = time.monotonic()
    summary = ManyClient(a.port, a.conns, a.path, a.body_sha256, a.timeout).run()
    summary["seconds"] = round(time.monotonic() - started, 2)
    json.dump(summary, sys.stdout)
    return 0


# ---------------------------------------------------------------------------
# Selection and the command line
# ---------------------------------------------------------------------------

def load_tests(loader, tests, pattern):
    """Only the classes of the --group asked for."""
    def flatten(suite):
        for t in suite:
            if isinstance(t, unittest.TestSuite):
                yield from flatten(t)
            else:
                yield t

    picked = unittest.TestSuite()
    for t in flatten(tests):
        if CFG.group == "all" or getattr(type(t), "group", "core") == CFG.group:
            picked.addTest(t)
    return picked


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--many-client":
        return many_client_main(sys.argv[2:])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="Other arguments go to unittest (e.g. -k NAME, -v, Class.test).")
    p.add_argument("--server", required=True, help="path of weft-knot, weft-userver, weft-watpipe or another weft server")
    p.add_argument("--mode", choices=MODES, help="weft-knot's mode (required for it)")
    p.add_argument("--args", default="", help="more flags for every server started (e.g. \"--procs 4 --shared\")")
    p.add_argument("--group", default="all", choices=GROUPS)
    p.add_argument("--wrapper", default="", help="a command every server runs under (e.g. \"build/posix/weft-run\")")
    p.add_argument("--sanitize", action="store_true", help="the server is a sanitizer build")
    args, rest = p.parse_known_args()
    if not os.access(args.server, os.X_OK):
        p.error(f"{args.server} is not an executable")
    CFG.server = os.path.abspath(args.server)
    CFG.prog = os.path.basename(CFG.server)
    if CFG.prog == "weft-knot-linked":  # weft-knot built for linked stacks: the same server
        CFG.prog = "weft-knot"
    if CFG.prog not in ("weft-knot", "weft-userver", "weft-watpipe", "weft-staged", "weft-pool", "weft-vtserver"):
        p.error(f"{CFG.prog}: not a server this suite knows (weft-knot, weft-userver, weft-watpipe, weft-staged, "
                "weft-pool, weft-vtserver)")
    if is_knot() and not args.mode:
        p.error("weft-knot needs --mode")
    CFG.mode, CFG.group, CFG.sanitize = args.mode, args.group, args.sanitize
    CFG.extra = shlex.split(args.args)
    CFG.wrapper = shlex.split(args.wrapper)
    try:
        unittest.main(module=__name__, argv=[sys.argv[0], *rest], verbosity=2)
    finally:
        BigFile.cleanup()


if __name__ == "__main__":
    sys.exit(main())
