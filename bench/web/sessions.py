#!/usr/bin/env python3
"""Session files for httperf's --wsesslog, after the workload of the EuroSys'07
server-architecture study (Pariag et al., "Comparing the performance of web
server architectures", section 3.2): `python3 bench/web/sessions.py --out FILE
--sessions N --seed S [--fileset DIR]`, or write_sessions() from Python.

Model
  * A session is one persistent HTTP/1.1 connection (httperf's default for
    --wsesslog: one connection per session, requests sent one after another
    on it, HTTP/1.1, closed when the session ends). 30 % of sessions make 1
    request, 70 % make 5..15 requests (uniform over the 11 integers): the
    SPECweb99 mix of requests per connection the study reproduces (mean 7.3
    requests per session).
  * Each request is its own httperf "burst" (no indented lines), so every
    request waits for the previous reply plus a think time: nothing is
    pipelined, nothing is fetched concurrently.
  * Between the requests of a session: the browser think time ("active
    off-period"), Weibull with mean 0.343 s (the study's value) and shape
    k = 0.382, the shape Barford and Crovella fitted to active off-periods in
    SURGE (SIGMETRICS'98, the study's reference [4]: Weibull alpha = 1.46,
    beta = 0.382). The study gives only the means, not the shapes; it names
    [4]'s distributions, so their shapes are kept and the scale is set for
    the study's mean: scale = mean / Gamma(1 + 1/k) = 0.0905 s (median
    0.035 s; a long tail). SURGE's own scale (1.46) would give a 5.5 s mean,
    which the study evidently did not use.
  * After the last request of a session: the user think time ("inactive
    off-period"), Pareto with mean 3.0 s and shape alpha = 1.5, again [4]'s
    fit (Pareto k = 1, alpha = 1.5), whose mean alpha*k/(alpha-1) is exactly
    the study's 3.0 s: minimum 1.0 s, median 1.59 s, infinite variance.
    It is written as `think=U` on the session's last line.
  * Paths come from a sampler (fileset.AccessModel(dirs, seed).sample in the
    CLI, i.e. SPECweb99 classes and Zipf popularity): a callable taking a
    random.Random and returning (path, size) or a path; a leading "/" is
    added when missing and --url-prefix is put in front.
  * Deterministic for a seed: the session shapes (lengths, think times) and
    the paths are drawn from two separate random.Random streams seeded from
    the seed, so the same seed gives the same sessions over any file set.

What httperf does and does not do with this (httperf 0.9, src/gen/wsesslog.c)
  * It reads at most 1,000 sessions from a file ("too many sessions") and
    uses them round-robin when --wsesslog's N is larger: N sessions in the
    run, FILE sessions distinct. This script refuses more than 1,000.
  * think=S on a line is the pause after that request's reply before the
    next request of the session: the browser think times are reproduced.
  * The user think time is NOT reproduced by httperf. A session ends (and its
    connection closes) when its last reply arrives; the think= of the last
    line is parsed and ignored (checked by the test: user think times of 20 s
    and more there do not lengthen the run). httperf has no users that come
    back: new sessions arrive open-loop at --rate (fixed interval) or
    --period=eT (Poisson, mean T), independent of earlier sessions;
    --wsesslog's X is only the default think time between bursts of one
    session, so pass 0 (every line here has its own think=). That is the
    study's "partially-open" system (httperf session logs, its reference
    [20]): session arrivals set the load, think times shape each session. The
    Pareto value is kept in the file as a record of the model (a driver that
    chains a user's sessions could honour it); to load a server as U users
    alternating sessions and user think times would, use a session rate of
    about U / (mean session duration + 3.0 s), where a session lasts its
    browser think times (stats "mean_session_think_s") plus its response
    times.
  * Not modelled: pipelining, parallel connections per browser, embedded-
    object bursts, request headers beyond httperf's, HTTP/1.0 or
    "Connection: close" for 1-request sessions (they open a persistent
    connection too), think-time correlation, WAN delays (the study folds
    those into the think times). The client timeout is httperf's
    --timeout (the study: 15 s).

File format (read back by parse_sessions): a header of "#" comment lines
(parameters, seed), then one session after another, separated by one blank
line; a line is `PATH think=S` with S in seconds (6 decimals). With
think_scale (--think-scale, for tests and quick checks) every think time is
multiplied by that factor.

write_sessions(path, n_sessions, sampler, seed, think_scale=1.0) returns
stats: {"sessions", "requests", "requests_per_session",
"single_request_sessions", "mean_think_s" (browser think times, the ones
httperf applies), "mean_browser_think_s", "mean_user_think_s",
"mean_session_think_s", "distinct_paths", "mean_size_bytes" (None when the
sampler gives no sizes)}. Progress on stderr. Python 3 standard library only.
"""
import argparse
import json
import math
import os
import random
import re
import sys

# The study's means; the shapes of Barford and Crovella's fits (SURGE).
BROWSER_MEAN_S = 0.343
BROWSER_SHAPE = 0.382
USER_MEAN_S = 3.0
USER_SHAPE = 1.5
# SPECweb99 requests per connection.
SINGLE_SHARE = 0.30
MULTI_MIN, MULTI_MAX = 5, 15
# httperf 0.9 src/gen/wsesslog.c MAX_SESSION_TEMPLATES.
HTTPERF_MAX_SESSIONS = 1000
# 24,480 files in the study / 36 per SPECweb99 directory.
STUDY_DIRS = 680
DECIMALS = 6


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---- the model -------------------------------------------------------------

def weibull_scale(mean, shape):
    """The Weibull scale giving `mean` for `shape`: mean / Gamma(1 + 1/shape)."""
    return mean / math.gamma(1.0 + 1.0 / shape)


def pareto_minimum(mean, shape):
    """The Pareto minimum (x_m) giving `mean` for `shape` > 1: mean * (shape - 1) / shape."""
    if shape <= 1.0:
        raise ValueError(f"a Pareto shape of {shape} has no mean; it must be > 1")
    return mean * (shape - 1.0) / shape


class ThinkModel:
    """Draws session lengths and think times (seconds, before think_scale)."""

    def __init__(self, browser_mean=BROWSER_MEAN_S, browser_shape=BROWSER_SHAPE,
                 user_mean=USER_MEAN_S, user_shape=USER_SHAPE):
        if browser_mean <= 0 or browser_shape <= 0 or user_mean <= 0:
            raise ValueError("think-time means and shapes must be positive")
        self.browser_mean, self.browser_shape = browser_mean, browser_shape
        self.user_mean, self.user_shape = user_mean, user_shape
        self.browser_scale = weibull_scale(browser_mean, browser_shape)
        self.user_min = pareto_minimum(user_mean, user_shape)

    def length(self, rng):
        """Requests in a session: 1 with probability 0.3, else uniform 5..15."""
        if rng.random() < SINGLE_SHARE:
            return 1
        return rng.randint(MULTI_MIN, MULTI_MAX)

    def browser_think(self, rng):
        return rng.weibullvariate(self.browser_scale, self.browser_shape)

    def user_think(self, rng):
        return self.user_min * rng.paretovariate(self.user_shape)

    def describe(self):
        return (f"browser think Weibull(scale {self.browser_scale:.6f} s, shape {self.browser_shape}) "
                f"mean {self.browser_mean} s; user think Pareto(min {self.user_min:.6f} s, "
                f"shape {self.user_shape}) mean {self.user_mean} s")


def _path_of(sample, url_prefix):
    path = sample[0] if isinstance(sample, tuple) else sample
    size = sample[1] if isinstance(sample, tuple) and len(sample) > 1 else None
    path = str(path)
    if not path.startswith("/"):
        path = "/" + path
    if url_prefix and url_prefix != "/":
        path = "/" + url_prefix.strip("/") + path
    if not path or any(c.isspace() for c in path) or len(path) >= 10000:
        raise ValueError(f"the sampler gave {path!r}: httperf needs a path without white space")
    return path, size


def make_sessions(n_sessions, sampler, seed, think_scale=1.0, model=None, url_prefix="/"):
    """[[(path, think_s, size), ...] per session]: think_s after each request,
    browser think times then the user think time on the last request, all
    multiplied by think_scale and rounded to DECIMALS. No limit on n_sessions."""
    if n_sessions < 1:
        raise ValueError("at least one session")
    if think_scale < 0:
        raise ValueError("think_scale must be >= 0")
    model = model or ThinkModel()
    shape_rng = random.Random(f"weft-sessions/{seed}/shape")
    path_rng = random.Random(f"weft-sessions/{seed}/paths")
    sessions = []
    for _ in range(n_sessions):
        n = model.length(shape_rng)
        thinks = [model.browser_think(shape_rng) for _ in range(n - 1)] + [model.user_think(shape_rng)]
        session = []
        for think in thinks:
            path, size = _path_of(sampler(path_rng), url_prefix)
            session.append((path, round(think * think_scale, DECIMALS), size))
        sessions.append(session)
    return sessions


def session_stats(sessions):
    requests = sum(len(s) for s in sessions)
    browser = [t for s in sessions for (_, t, _) in s[:-1]]
    user = [s[-1][1] for s in sessions]
    sizes = [z for s in sessions for (_, _, z) in s if z is not None]
    mean = (lambda v: sum(v) / len(v) if v else 0.0)
    return {
        "sessions": len(sessions),
        "requests": requests,
        "requests_per_session": requests / len(sessions) if sessions else 0.0,
        "single_request_sessions": sum(1 for s in sessions if len(s) == 1),
        "mean_think_s": mean(browser),
        "mean_browser_think_s": mean(browser),
        "mean_user_think_s": mean(user),
        "mean_session_think_s": sum(browser) / len(sessions) if sessions else 0.0,
        "distinct_paths": len({p for s in sessions for (p, _, _) in s}),
        "mean_size_bytes": mean(sizes) if sizes and len(sizes) == requests else None,
    }


def format_sessions(sessions, header=()):
    out = [f"# {h}\n" for h in header]
    for i, session in enumerate(sessions):
        if i or header:
            out.append("\n")
        for path, think, _ in session:
            out.append(f"{path} think={think:.{DECIMALS}f}\n")
    return "".join(out)


def write_sessions(path, n_sessions, sampler, seed, think_scale=1.0, model=None, url_prefix="/"):
    """Writes n_sessions (1..1000, httperf's limit) sessions to `path` for
    --wsesslog; returns the stats of what was written (see the module doc)."""
    if not 1 <= n_sessions <= HTTPERF_MAX_SESSIONS:
        raise ValueError(f"{n_sessions} sessions: httperf reads 1..{HTTPERF_MAX_SESSIONS} from a file "
                         f"(and reuses them round-robin for a larger --wsesslog N)")
    model = model or ThinkModel()
    sessions = make_sessions(n_sessions, sampler, seed, think_scale, model, url_prefix)
    stats = session_stats(sessions)
    header = [
        "httperf --wsesslog session file, written by bench/web/sessions.py",
        f"seed {seed}, {n_sessions} sessions, {stats['requests']} requests, think_scale {think_scale}",
        f"lengths: {SINGLE_SHARE:.0%} 1 request, {1 - SINGLE_SHARE:.0%} uniform {MULTI_MIN}..{MULTI_MAX}",
        model.describe(),
        "think= on a session's last line is the user think time: httperf 0.9 ignores it",
        "(the session and its connection end with the last reply). Use --wsesslog=N,0,FILE.",
    ]
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(format_sessions(sessions, header))
    os.replace(tmp, path)
    return stats


def parse_sessions(text):
    """[[(path, think_s or None, is_burst_member), ...] per session], read the
    way httperf reads a --wsesslog file: '#' in column 0 is a comment, a line
    of white space ends a session, a line starting with white space belongs
    to the previous request's burst. Raises ValueError on an argument httperf
    would reject."""
    sessions, current = [], []
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            continue
        if not line.strip():
            if current:
                sessions.append(current)
                current = []
            continue
        words = line.split()
        think = None
        for arg in words[1:]:
            if arg.startswith("think="):
                think = float(arg[len("think="):])
            elif not (arg.startswith("method=") or arg.startswith("contents=")):
                raise ValueError(f"line {lineno}: httperf does not know {arg!r}")
        current.append((words[0], think, bool(current) and line[0].isspace()))
    if current:
        sessions.append(current)
    return sessions


# ---- the CLI ---------------------------------------------------------------

def fileset_sampler(fileset_dir, dirs, seed):
    """(sampler, dirs) from bench/web/fileset.py's AccessModel, imported now."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        from fileset import AccessModel
    except ImportError as e:
        raise SystemExit(f"sessions.py: cannot import AccessModel from bench/web/fileset.py ({e}); "
                         "the paths come from the SPECweb99-like file set's access model")
    if dirs is None and fileset_dir:
        try:  # the set's manifest, else its dirNNNNN directories counted
            with open(os.path.join(fileset_dir, "fileset.json")) as f:
                dirs = int(json.load(f)["dirs"])
        except (OSError, ValueError, KeyError, TypeError):
            dirs = sum(1 for d in os.listdir(fileset_dir)
                       if re.fullmatch(r"dir\d+", d) and os.path.isdir(os.path.join(fileset_dir, d)))
        if not dirs:
            raise SystemExit(f"sessions.py: no dirNNNNN directories in {fileset_dir}")
    if dirs is None:
        dirs = STUDY_DIRS
        log(f"sessions: no --fileset or --dirs: the access model spans the study's {STUDY_DIRS} directories")
    return AccessModel(dirs, seed).sample, dirs


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Writes an httperf --wsesslog session file after the EuroSys'07 study's workload: "
                    "30% of sessions 1 request, 70% 5..15; Weibull browser think times (mean 0.343 s) "
                    "between requests, a Pareto user think time (mean 3.0 s, recorded, ignored by "
                    "httperf) after the last; paths from bench/web/fileset.py's AccessModel.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Use: httperf --server H --port P --wsesslog=N,0,FILE --rate R --timeout 15\n"
               "(httperf reuses the file's sessions round-robin when N is larger).\n"
               "Exit status: 0 written, 1 on a bad argument, a missing fileset.py or missing files.")
    ap.add_argument("--out", required=True, help="the session file to write (replaced atomically)")
    ap.add_argument("--sessions", type=int, default=HTTPERF_MAX_SESSIONS,
                    help=f"sessions in the file, 1..{HTTPERF_MAX_SESSIONS} (httperf's limit; default "
                         f"{HTTPERF_MAX_SESSIONS})")
    ap.add_argument("--seed", type=int, default=1, help="seed of the sessions and of the access model "
                    "(default 1); the same seed gives the same file")
    ap.add_argument("--fileset", metavar="DIR", help="root of the generated file set (fileset.py --dir): its "
                    "manifest's dirs (else its dirNNNNN directories, counted) size the access model, and every "
                    "sampled path is checked to be a file under DIR")
    ap.add_argument("--dirs", type=int, help=f"directories of the access model, when not counted in "
                    f"--fileset (default {STUDY_DIRS}: the study's 24,480 files)")
    ap.add_argument("--url-prefix", default="/", help="put in front of every path, e.g. /specweb "
                    "when the file set is not the server's document root (default /)")
    ap.add_argument("--think-scale", type=float, default=1.0, help="multiply every think time by this "
                    "(default 1; e.g. 0.01 for a quick functional check)")
    ap.add_argument("--browser-mean", type=float, default=BROWSER_MEAN_S,
                    help=f"mean browser think time, s (default {BROWSER_MEAN_S})")
    ap.add_argument("--browser-shape", type=float, default=BROWSER_SHAPE,
                    help=f"Weibull shape of browser think times (default {BROWSER_SHAPE}, SURGE's fit)")
    ap.add_argument("--user-mean", type=float, default=USER_MEAN_S,
                    help=f"mean user think time, s (default {USER_MEAN_S})")
    ap.add_argument("--user-shape", type=float, default=USER_SHAPE,
                    help=f"Pareto shape of user think times, > 1 (default {USER_SHAPE}, SURGE's fit)")
    args = ap.parse_args(argv)
    if not 1 <= args.sessions <= HTTPERF_MAX_SESSIONS:
        ap.error(f"--sessions must be 1..{HTTPERF_MAX_SESSIONS}")
    if args.fileset and not os.path.isdir(args.fileset):
        ap.error(f"--fileset {args.fileset}: not a directory")
    if args.dirs is not None and args.dirs < 1:
        ap.error("--dirs must be >= 1")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        model = ThinkModel(args.browser_mean, args.browser_shape, args.user_mean, args.user_shape)
    except ValueError as e:
        raise SystemExit(f"sessions.py: {e}")
    sampler, dirs = fileset_sampler(args.fileset, args.dirs, args.seed)
    log(f"sessions: {args.sessions} sessions, seed {args.seed}, access model over {dirs} directories")
    if args.fileset:
        seen = {}

        def checked(rng):
            sample = sampler(rng)
            path = sample[0] if isinstance(sample, tuple) else sample
            if path not in seen:
                seen[path] = os.path.isfile(os.path.join(args.fileset, str(path).lstrip("/")))
            return sample
        use = checked
    else:
        use = sampler
    stats = write_sessions(args.out, args.sessions, use, args.seed, args.think_scale, model, args.url_prefix)
    if args.fileset:
        missing = sorted(p for p, ok in seen.items() if not ok)
        if missing:
            os.unlink(args.out)
            raise SystemExit(f"sessions.py: {len(missing)} sampled paths are not files under {args.fileset}, "
                             f"e.g. {missing[0]}; nothing written")
    size = stats["mean_size_bytes"]
    log(f"sessions: wrote {args.out}: {stats['sessions']} sessions, {stats['requests']} requests "
        f"({stats['requests_per_session']:.2f}/session, {stats['single_request_sessions']} single), "
        f"{stats['distinct_paths']} distinct paths"
        + (f", mean size {size:.0f} B" if size is not None else "")
        + f"; mean browser think {stats['mean_browser_think_s']:.3f} s, "
          f"mean user think {stats['mean_user_think_s']:.3f} s (not applied by httperf)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
