#!/usr/bin/env python3
"""weft-run's contract (tools/weft-run): usage and errors, and the exit
status of the program it runs. Exit 0 on success, 1 on a failed check."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

FAILED = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILED.append(what)


def run(*args, **kw):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=60, **kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weft-run", required=True)
    ap.add_argument("--prog", required=True, help="a passing program of progs/")
    a = ap.parse_args()
    wr = a.weft_run

    r = run(wr)
    check(r.returncode == 2 and "usage:" in r.stderr, "no program: usage on stderr, exit 2")
    r = run(wr, "--help")
    check(r.returncode == 0 and "usage:" in r.stdout and "--vprocs" in r.stdout, "--help: usage on stdout, exit 0")
    r = run(wr, "--bogus", "true")
    check(r.returncode == 2 and "unknown option --bogus" in r.stderr, "unknown option: named, exit 2")
    r = run(wr, "--vprocs", "0", "true")
    check(r.returncode == 2 and "--vprocs 0" in r.stderr, "--vprocs 0: refused, exit 2")
    r = run(wr, "--io", "carrier-pigeon", "true")
    check(r.returncode == 2 and "--io carrier-pigeon" in r.stderr, "unknown backend: refused, exit 2")
    r = run(wr, "/no/such/program")
    check(r.returncode == 127 and "/no/such/program" in r.stderr, "missing program: named, exit 127")
    r = run(wr, "no-such-program-weft-xyz")
    check(r.returncode == 127 and "not found in PATH" in r.stderr, "program not in PATH: exit 127")

    with tempfile.TemporaryDirectory() as d:
        text = os.path.join(d, "notes.txt")
        with open(text, "w") as f:
            f.write("not a program\n")
        os.chmod(text, 0o755)
        r = run(wr, text)
        check(r.returncode == 126 and "not an ELF program" in r.stderr, "a text file: refused, exit 126")

        cc = shutil.which("cc") or shutil.which("gcc")
        src = os.path.join(d, "static.c")
        with open(src, "w") as f:
            f.write("int main(void) { return 0; }\n")
        exe = os.path.join(d, "static")
        built = cc and subprocess.run([cc, "-static", "-o", exe, src], capture_output=True).returncode == 0
        if built:
            r = run(wr, exe)
            check(r.returncode == 126 and "statically linked" in r.stderr, "a static program: refused, exit 126")
        else:
            print("skip a static program: no compiler or no static libc here")

    r = run(wr, a.prog)
    check(r.returncode == 0, f"a passing program: exit 0 (got {r.returncode}: {r.stderr.strip()[:200]})")
    sh = shutil.which("sh")
    r = run(wr, sh, "-c", "exit 7")
    check(r.returncode == 7, f"the program's exit status is weft-run's (sh -c 'exit 7' gave {r.returncode})")
    r = run(wr, "--report", a.prog)
    check(r.returncode == 0 and r.stdout.startswith("ok ") and "weft-posix:" in r.stderr,
          "--report: the program's output intact, the shim's counts on stderr at exit")

    if FAILED:
        print(f"{len(FAILED)} check(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
