#!/usr/bin/env python3
"""gdb's weft extension (tools/gdb/weft.py) in batch mode.

Runs tests/gdb/weft_gdb_target under gdb to its stop in all_parked(), with
the extension auto-loaded from the program, and checks:
  - `weft threads` lists every thread with its exact name, state, vproc,
    park reason and blocking site (the lines marked SITE: in the source);
  - `weft bt` of parked threads shows the expected functions in order, on
    a fixed stack and across the chunks of a linked stack;
  - the errors: unknown id, a running thread, an exited one;
  - the registers borrowed for the backtraces are given back: the program
    then runs to its end;
  - the same listing and backtrace from a core file, the script sourced by
    hand;
  - a program without weft, and weft before weft_main, are refused with
    their messages; without the safe-path, auto-loading is declined.
Exit 77 (skipped, with the reason) without gdb, without its Python, or
where ptrace is refused.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

ARGS = None
LIVE = None   # output of the one live session, by section
CORE = None   # ... of the session on its core file


def gdb(*cmds, target, core=None, safe=True, source=False):
    argv = ["gdb", "-q", "-nx", "-batch"]
    if safe:
        argv += ["-iex", "add-auto-load-safe-path " + target]
    argv += ["-ex", "set pagination off", "-ex", "set width 0"]
    if source:
        argv += ["-ex", "source " + ARGS.script]
    for c in cmds:
        argv += ["-ex", c]
    argv.append(target)
    if core:
        argv.append(core)
    # LeakSanitizer (the ASan build) cannot run under ptrace: it would turn
    # the target's clean exit into a failure.
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")
    # One stream, so that an error lands in the section of its command.
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240, env=env)
    return p.stdout


def sections(out):
    """Output split at the `echo @@NAME` markers."""
    parts, name = {}, "start"
    for line in out.splitlines():
        m = re.match(r"^@@(\S+)$", line)
        if m:
            name = m.group(1)
            parts[name] = []
        else:
            parts.setdefault(name, []).append(line)
    return {k: "\n".join(v) for k, v in parts.items()}


def marked(*cmds):
    out = []
    for name, c in cmds:
        out += ["echo @@%s\\n" % name, c]
    return out


def site_lines():
    lines = {}
    with open(ARGS.source) as f:
        for n, text in enumerate(f, 1):
            m = re.search(r"SITE:(\w+)", text)
            if m:
                lines[m.group(1)] = n
    return lines


def listing(text):
    """`weft threads` rows by name: (mark, id, state, vproc, reason, where)."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"^(\*?)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(.*)$", line)
        if m:
            mark, tid, name, state, vproc, reason, where = m.groups()
            rows[name] = (mark, int(tid), state, vproc, reason, where.strip())
    return rows


def frames(text):
    return [l for l in text.splitlines() if re.match(r"#\d+\s", l)]


def function_order(test, fr, names):
    """Each of names appears in fr, in this order."""
    at = 0
    for n in names:
        hits = [i for i in range(at, len(fr)) if re.search(r"\b%s\b" % re.escape(n), fr[i])]
        test.assertTrue(hits, "%s not found after frame %d:\n%s" % (n, at, "\n".join(fr)))
        at = hits[0] + 1


class WeftGdbTest(unittest.TestCase):
    def expected_rows(self):
        src = os.path.basename(ARGS.source)
        line = site_lines()
        rows = {
            "waiter": ("parked", "0", "cond", "weft_cond_wait <- waiter_on_cond at %s:%d" % (src, line["waiter_on_cond"])),
            "sleeper": ("parked", "0", "sleep", "weft_sleep_ns <- sleeper at %s:%d" % (src, line["sleeper"])),
            "locker": ("parked", "0", "mutex", "weft_mutex_lock <- locker_on_mutex at %s:%d" % (src, line["locker_on_mutex"])),
            "reader": ("parked", "0", "io", "weft_read <- reader_on_pipe at %s:%d" % (src, line["reader_on_pipe"])),
            "remote": ("parked", "1", "cond", "weft_cond_wait <- waiter_on_cond at %s:%d" % (src, line["waiter_on_cond"])),
            "quitter": ("exited", "0", "-", "exited, not yet joined"),
            "fresh": ("ready", "0", "-", "not started: never_started"),
        }
        if ARGS.linked:
            rows["deep"] = ("parked", "0", "cond", "weft_cond_wait <- wait_for_go at %s:%d" % (src, line["wait_for_go"]))
        return rows

    def check_listing(self, text):
        rows = listing(text)
        self.assertIn("main", rows, text)
        mark, _, state, vproc, reason, where = rows["main"]
        self.assertEqual(("*", "running", "0", "-"), (mark, state, vproc, reason), text)
        self.assertRegex(where, r"^running, LWP \d+, gdb thread 1$")
        expected = self.expected_rows()
        for name, want in expected.items():
            self.assertIn(name, rows, "no row for %s:\n%s" % (name, text))
            self.assertEqual(want, rows[name][2:], "row of %s:\n%s" % (name, text))
            self.assertEqual("", rows[name][0], text)
        self.assertEqual(set(expected) | {"main"}, set(rows), "exactly these threads (the notifier is joined):\n" + text)
        ids = [r[1] for r in rows.values()]
        self.assertEqual(sorted(ids), ids, "rows in id order")
        return rows

    # ---- live ---------------------------------------------------------------

    def test_threads_lists_every_thread_with_state_vproc_and_blocking_site(self):
        self.check_listing(LIVE["threads"])

    def test_vprocs_name_their_kernel_threads(self):
        text = LIVE["vprocs"]
        self.assertRegex(text, r'vproc 0: LWP \d+, gdb thread 1; runs thread \d+ "main"')
        self.assertRegex(text, r"vproc 1: LWP \d+, gdb thread 2; idle \(in its scheduler loop\)")

    def test_bt_of_a_cond_waiter_by_name(self):
        fr = frames(LIVE["bt_waiter"])
        self.assertIn('weft thread %d "waiter" (parked: cond) on vproc 0:' % listing(LIVE["threads"])["waiter"][1],
                      LIVE["bt_waiter"])
        self.assertRegex(fr[0], r"switch_to|context_switch", "\n".join(fr))
        function_order(self, fr, ["weft_cond_wait", "waiter_on_cond", "thread_start", "weft_ctx_trampoline"])
        self.assertNotIn("corrupt stack", LIVE["bt_waiter"])

    def test_bt_by_id_and_from_another_kernel_thread(self):
        rows = listing(LIVE["threads"])
        text = LIVE["bt_locker_id"]
        self.assertIn('weft thread %d "locker" (parked: mutex) on vproc 0:' % rows["locker"][1], text)
        function_order(self, frames(text), ["lock_slow", "locker_on_mutex", "thread_start", "weft_ctx_trampoline"])
        text = LIVE["bt_sleeper_from_vproc1"]
        function_order(self, frames(text), ["weft_sleep_ns", "sleeper", "thread_start", "weft_ctx_trampoline"])
        function_order(self, frames(LIVE["bt_remote"]), ["weft_cond_wait", "waiter_on_cond", "thread_start"])
        function_order(self, frames(LIVE["bt_reader"]), ["weft_read", "reader_on_pipe", "thread_start"])

    def test_bt_of_a_linked_stack_crosses_its_chunks(self):
        if not ARGS.linked:
            self.skipTest("weft built without linked stacks")
        fr = frames(LIVE["bt_deep"])
        function_order(self, fr, ["weft_cond_wait", "wait_for_go", "linked_bottom", "deep_recurse",
                                  "__morestack", "deep_entry", "thread_start", "weft_ctx_trampoline"])
        self.assertEqual(13, len([f for f in fr if re.search(r"\bdeep_recurse\b", f)]), "\n".join(fr))

    def test_bt_refuses_unknown_running_and_exited_threads(self):
        self.assertIn("weft: no weft thread has id 99999 (see 'weft threads')", LIVE["bt_unknown"])
        self.assertIn("weft: no weft thread has id or name 'nobody' (see 'weft threads')", LIVE["bt_nobody"])
        self.assertRegex(LIVE["bt_main"], r'weft: thread 1 "main" is running on vproc 0 \(LWP \d+, gdb thread 1\): '
                                          r"its frames are gdb thread 1's \('thread 1', then 'bt'\)")
        self.assertRegex(LIVE["bt_quitter"], r'weft: thread \d+ "quitter" has exited \(not yet joined\)')
        self.assertIn("(not started: it will begin in never_started)", LIVE["bt_fresh"])
        self.assertEqual([], frames(LIVE["bt_fresh"]))

    def test_bt_all_covers_every_thread(self):
        text = LIVE["bt_all"]
        for name in self.expected_rows():
            self.assertRegex(text, r'weft thread \d+ "%s"' % name)
        self.assertIn("waiter_on_cond", text)

    def test_registers_are_given_back(self):
        self.assertEqual(LIVE["regs_before"].strip(), LIVE["regs_after"].strip())
        self.assertIn("released", LIVE["continue"])
        self.assertRegex(LIVE["continue"], r"exited normally")

    # ---- core file ---------------------------------------------------------

    def test_core_file_lists_and_backtraces_the_same_threads(self):
        if not ARGS.core:
            self.skipTest("sanitizer build: gcore of a process with ASan's shadow memory is impractical")
        live = listing(LIVE["threads"])
        core = self.check_listing(CORE["threads"])
        for name in self.expected_rows():
            self.assertEqual(live[name][1:], core[name][1:], name)
        function_order(self, frames(CORE["bt_waiter"]), ["weft_cond_wait", "waiter_on_cond", "thread_start",
                                                         "weft_ctx_trampoline"])
        if ARGS.linked:
            fr = frames(CORE["bt_deep"])
            function_order(self, fr, ["wait_for_go", "linked_bottom", "__morestack", "deep_entry", "thread_start"])
            self.assertEqual(13, len([f for f in fr if re.search(r"\bdeep_recurse\b", f)]), "\n".join(fr))

    # ---- refusals ----------------------------------------------------------

    def test_a_program_without_weft_is_refused(self):
        out = gdb(*marked(("before", "weft threads"), ("run", "break plain_stop"), ("r", "run"),
                          ("after", "weft threads"), ("bt", "weft bt 1")),
                  target=ARGS.plain, safe=False, source=True)
        s = sections(out)
        msg = "weft: this program is not linked with weft (it has no symbol weft_debug)"
        self.assertIn(msg, s["before"])
        self.assertIn(msg, s["after"])
        self.assertIn(msg, s["bt"])

    def test_before_weft_main_there_is_no_runtime(self):
        out = gdb(*marked(("idle", "weft threads"), ("b", "break main"), ("r", "run"),
                          ("threads", "weft threads"), ("bt", "weft bt 1")), target=ARGS.target)
        s = sections(out)
        self.assertIn("weft: the program is not running (run it, attach to it, or load a core file)", s["idle"])
        msg = "weft: no weft runtime is running in this process (weft_main has not been called yet, or has returned)"
        self.assertIn(msg, s["threads"])
        self.assertIn(msg, s["bt"])

    def test_autoload_follows_the_safe_path(self):
        out = gdb("weft threads", target=ARGS.target, safe=False)
        self.assertIn("auto-loading has been declined by your `auto-load safe-path'", out)
        self.assertIn('Undefined command: "weft"', out)


def skip(why):
    print("skipped: " + why, file=sys.stderr)
    sys.exit(77)


def main():
    global ARGS, LIVE, CORE
    p = argparse.ArgumentParser()
    p.add_argument("--target", required=True)
    p.add_argument("--plain", required=True)
    p.add_argument("--script", required=True)
    p.add_argument("--source", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "weft_gdb_target.c"))
    p.add_argument("--linked", type=int, default=0)
    p.add_argument("--core", type=int, default=1, help="0: no core-file checks (sanitizer builds)")
    ARGS, rest = p.parse_known_args()
    if not shutil.which("gdb"):
        skip("gdb is not installed")
    probe = gdb("python print('py-ok')", "run", target=ARGS.plain, safe=False)
    if "py-ok" not in probe:
        skip("this gdb has no Python:\n" + probe[-500:])
    if "ptrace" in probe and not re.search(r"^plain$", probe, re.M):
        skip("ptrace is refused here (container, yama ptrace_scope):\n" + probe[-500:])
    with tempfile.TemporaryDirectory() as tmp:
        core = os.path.join(tmp, "core")
        LIVE = sections(gdb(*marked(
            ("b", "break all_parked"), ("run", "run"),
            ("regs_before", "info registers rip rsp rbp"),
            ("threads", "weft threads"),
            ("vprocs", "weft vprocs"),
            ("bt_waiter", "weft bt waiter"),
            ("bt_locker_id", "weft bt 4"),  # the fourth thread created: ids are handed out in order
            ("bt_remote", "weft bt remote"),
            ("bt_reader", "weft bt reader"),
            ("bt_deep", "weft bt deep"),
            ("bt_unknown", "weft bt 99999"),
            ("bt_nobody", "weft bt nobody"),
            ("bt_main", "weft bt 1"),
            ("bt_quitter", "weft bt quitter"),
            ("bt_fresh", "weft bt fresh"),
            ("bt_all", "weft bt all"),
            ("t2", "thread 2"),
            ("bt_sleeper_from_vproc1", "weft bt sleeper"),
            ("t1", "thread 1"),
            ("regs_after", "info registers rip rsp rbp"),
            ("gcore", "gcore " + core if ARGS.core else "echo no core\\n"),
            ("continue", "continue")), target=ARGS.target))
        if "run" in LIVE and "ptrace" in LIVE["run"] and "parked" not in LIVE["run"]:
            skip("ptrace is refused here:\n" + LIVE["run"][-500:])
        if ARGS.core and not os.path.exists(core):
            skip("gcore could not write a core file:\n" + LIVE.get("gcore", "")[-500:])
        CORE = ARGS.core and sections(gdb(*marked(("threads", "weft threads"), ("bt_waiter", "weft bt waiter"),
                                    ("bt_deep", "weft bt deep")),
                            target=ARGS.target, core=core, safe=False, source=True))
        result = unittest.main(argv=[sys.argv[0]] + rest, exit=False).result
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
