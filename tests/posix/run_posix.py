#!/usr/bin/env python3
"""Drive the POSIX shim programs that need a partner process.

    run_posix.py echo --server PROG --client PROG [--connections N]
                      [--weft-run PATH --io uring|epoll|poll --vprocs N]

Starts echo_server (under weft-run when --weft-run is given, else on NPTL),
waits for its "port N" line, runs echo_client on plain NPTL in another
process against 127.0.0.1:N with the same number of connections, all open
at once, and passes only if both exit 0. Every step has a deadline; on
failure both programs' output is printed and the server is killed.
"""
import argparse
import os
import subprocess
import sys
import time


def fail(msg, *outputs):
    print("FAIL", msg)
    for name, text in outputs:
        print(f"--- {name} ---")
        print(text.rstrip())
    sys.exit(1)


def echo(args):
    cmd = [args.server, str(args.connections)]
    if args.weft_run:
        cmd = [args.weft_run, "--io", args.io, "--vprocs", str(args.vprocs)] + cmd
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        os.set_blocking(server.stdout.fileno(), True)
        deadline = time.monotonic() + 10
        port, seen = None, ""
        while port is None:
            line = server.stdout.readline()
            if not line or time.monotonic() > deadline:
                server.kill()
                fail("echo_server printed no port", ("server", seen + server.stdout.read()))
            seen += line
            if line.startswith("port "):
                port = int(line.split()[1])
        try:
            client = subprocess.run([args.client, "127.0.0.1", str(port), str(args.connections)],
                                    capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired as e:
            server.kill()
            fail(f"echo_client did not finish in {args.timeout} s",
                 ("client", (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")),
                 ("server", seen + server.stdout.read()))
        try:
            rest, _ = server.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            server.kill()
            rest, _ = server.communicate()
            fail(f"echo_server did not finish in {args.timeout} s after its client",
                 ("client", client.stdout + client.stderr), ("server", seen + rest))
        out = seen + rest
        if client.returncode != 0 or server.returncode != 0:
            fail(f"client exit {client.returncode}, server exit {server.returncode}",
                 ("client", client.stdout + client.stderr), ("server", out))
        print(client.stdout.strip())
        print(out.strip())
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    e = sub.add_parser("echo", help="echo_server with echo_client in another process")
    e.add_argument("--server", required=True)
    e.add_argument("--client", required=True)
    e.add_argument("--connections", type=int, default=10000)
    e.add_argument("--weft-run", help="run the server under this weft-run (default: NPTL)")
    e.add_argument("--io", default="uring", choices=["uring", "epoll", "poll"])
    e.add_argument("--vprocs", type=int, default=1)
    e.add_argument("--timeout", type=float, default=60)
    args = p.parse_args()
    echo(args)


if __name__ == "__main__":
    main()
