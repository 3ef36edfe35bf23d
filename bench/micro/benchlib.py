"""What the benchmark drivers (run.py, pipetest.py) share: logging, the CPU
to pin to, running one benchmark process and reading its JSON record, and
the machine's description. Python 3 standard library only."""
import json
import os
import platform
import subprocess
import sys
import time


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def pick_cpu(wanted):
    """(cpu, note): `wanted` if this process may run there, else the last allowed CPU and why."""
    allowed = sorted(os.sched_getaffinity(0))
    if wanted in allowed:
        return wanted, None
    return allowed[-1], f"CPU {wanted} is not available to this process; using CPU {allowed[-1]}"


def run_one(cmd, timeout, check=None):
    """Run one benchmark process. Returns (record or None, reason or None, seconds).
    The record is the last JSON object line on stdout; check(record) may
    return a reason to reject it."""
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s", time.monotonic() - t0
    except OSError as e:
        return None, f"could not run: {e}", time.monotonic() - t0
    dt = time.monotonic() - t0
    recs = []
    for line in p.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                recs.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    if p.returncode != 0 or not recs:
        tail = " | ".join(p.stderr.strip().splitlines()[-3:])
        return None, f"exit {p.returncode}: {tail or 'no output'}", dt
    why = check(recs[-1]) if check else None
    if why:
        return None, why, dt
    return recs[-1], None, dt


def machine_line():
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{platform.system()} {platform.release()}, {os.cpu_count()} CPUs, {cpu}"
