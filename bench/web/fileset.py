#!/usr/bin/env python3
"""A SPECweb99-like static file set and its access model, as in the EuroSys'07
server-architecture study (Pariag et al., section 3.2: "a set of files with 36
different sizes, ranging from 102 to 921,600 bytes"; their set: 24,480 files =
680 directories, 3.2 GB): `python3 bench/web/fileset.py`.

Method
  * Files: every directory dirNNNNN (5 digits, from dir00000) holds 4 classes
    x 9 files, classC_I (C = 0..3, I = 0..8) of floor((I+1) * 102.4 * 10^C)
    bytes: 102, 204, ... 921 B in class 0; 1,024 ... 9,216 B in class 1;
    10,240 ... 92,160 B in class 2; 102,400 ... 921,600 B in class 3 (computed
    with integers, (I+1) * 1024 * 10^C // 10). A directory is 5,119,484 bytes
    (4.88 MiB); the set has max(1, ceil(--size-mb MiB / 5,119,484 B))
    directories (the default 64 MiB gives 14, 68.4 MiB; the paper's 680 are
    3.24 GiB: --dirs 680).
  * Contents: a pure function of (seed, directory, class, file), so a verifier
    can recompute a file's bytes or SHA-256 (expected_bytes, expected_sha256)
    without reading the disk copy. Each file has a 64 KiB block of its own,
    BLAKE2b in counter mode keyed by BLAKE2b(version, seed, dir, class, file);
    the file is that block repeated, and the first 8 bytes of every 4 KiB page
    p are XORed with p (little-endian), so no two pages of a file are alike (a
    server sending the wrong offset or the wrong file is caught) while the
    whole 71.7 MB default set takes well under a second of CPU to compute.
  * Access model (class AccessModel): a request picks a directory by Zipf with
    alpha = 1 (directory k, 0-based, weight 1/(k+1)), a class with the
    SPECweb99 mix 35 / 50 / 14 / 1 %, and a file within the class with
    3.9, 5.9, 8.8, 17.7, 35.3, 11.8, 7.1, 5.0, 4.4 % (SPECweb99's figures,
    which sum to 99.9 %: normalised), the three independently. prob(d, c, i)
    is the exact product; sample(rng) draws from it.
  * On disk: DIR (default var/fileset/ in the repository, else $FILESET, else
    --dir) with DIR/fileset.json, the manifest: format, version, seed, dirs,
    every size, bytes per directory, total bytes, the access model. A set whose
    manifest matches (seed, dirs, version) and whose files all have their
    sizes (a stat each, no reading) is reused as it is; anything else is
    generated afresh in a temporary sibling directory, manifest last, which
    then replaces DIR by rename, so an interrupted run never leaves a partial
    set that looks complete. A lock file beside DIR (.NAME.lock) keeps two
    runs from generating the same set at once. An existing DIR that is neither
    empty nor a file set (no fileset.json) is never replaced.
  * --check reads every file back and compares it, byte for byte, with the
    model (and reports files that should not be there): exit 1 on a mismatch.

Output: the one-line summary on stdout (on stderr with --sample, whose paths,
one per line, go to stdout); progress on stderr. Python 3 standard library
only; importable (bench/web/sessions.py and the verifiers use the model).
"""
import argparse
import bisect
import contextlib
import fcntl
import functools
import hashlib
import itertools
import json
import math
import os
import random
import shutil
import sys
import time

FORMAT = "weft-fileset"
VERSION = 1  # bump whenever names, sizes or contents change: old sets are then regenerated
MANIFEST = "fileset.json"
CLASSES = 4
FILES_PER_CLASS = 9
DEFAULT_SIZE_MB = 64
DEFAULT_SEED = 1
BLOCK = 64 * 1024  # bytes of keyed pattern per file, repeated
PAGE = 4096  # every page's first 8 bytes carry its number (XOR)
STAMP = 8

# SPECweb99's class mix (%) and its file mix within a class (tenths of a %).
CLASS_PERCENT = (35, 50, 14, 1)
# These nine sum to 99.9 %, not 100 % (SPECweb99 rounds them so): they are
# used as relative weights, each divided by their sum 999 (tenths of a %), so
# that the probabilities within a class add up to exactly 1.
FILE_PERMILLE = (39, 59, 88, 177, 353, 118, 71, 50, 44)
ZIPF_ALPHA = 1.0

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---- names and sizes -----------------------------------------------------------------

def file_size(cls, i):
    """floor((i+1) * 102.4 * 10^cls) bytes, in exact integer arithmetic."""
    if not (0 <= cls < CLASSES and 0 <= i < FILES_PER_CLASS):
        raise ValueError(f"no file class{cls}_{i}")
    return (i + 1) * 1024 * 10 ** cls // 10


SIZES = tuple(tuple(file_size(c, i) for i in range(FILES_PER_CLASS)) for c in range(CLASSES))
DIR_BYTES = sum(map(sum, SIZES))  # 5,119,484


def dirs_for_size(size_bytes):
    """Directories for a set of about size_bytes: ceil(size / DIR_BYTES), at least 1."""
    return max(1, math.ceil(size_bytes / DIR_BYTES))


def dir_name(d):
    return f"dir{d:05d}"


def file_name(cls, i):
    return f"class{cls}_{i}"


def rel_path(d, cls, i):
    """dir00000/class0_0 style, relative to the set's root (and the URL path below the docroot)."""
    return f"{dir_name(d)}/{file_name(cls, i)}"


def parse_path(path):
    """(dir, cls, i) from a relative path or URL path such as /dir00012/class3_8; ValueError if not one."""
    parts = path.strip("/").split("/")
    try:
        dpart, fpart = parts
        if not (dpart.startswith("dir") and len(dpart) >= 8 and dpart[3:].isdigit()
                and fpart.startswith("class") and len(fpart) == 8 and fpart[6] == "_"):
            raise ValueError
        d, c, i = int(dpart[3:]), int(fpart[5]), int(fpart[7])
        file_size(c, i)
    except ValueError:
        raise ValueError(f"not a file-set path: {path!r}") from None
    return d, c, i


def all_files(dirs):
    """Every (dir, cls, i) of a set of `dirs` directories, in order."""
    return itertools.product(range(dirs), range(CLASSES), range(FILES_PER_CLASS))


# ---- contents ----------------------------------------------------------------------------

def _pattern(seed, d, cls, i, n):
    """The first n (<= BLOCK) bytes of the file's keyed block."""
    key = hashlib.blake2b(f"{FORMAT} v{VERSION} seed={seed} dir={d} class={cls} file={i}".encode(),
                          digest_size=64).digest()
    h = hashlib.blake2b(key=key)  # 64-byte outputs: BLAKE2b(key, counter)
    out = []
    for j in range((n + 63) // 64):
        x = h.copy()
        x.update(j.to_bytes(8, "little"))
        out.append(x.digest())
    return b"".join(out)[:n]


def expected_bytes(seed, d, cls, i):
    """The exact contents of dirD/classCLS_I in the set made with `seed`."""
    size = file_size(cls, i)
    block = _pattern(seed, d, cls, i, min(size, BLOCK))
    data = bytearray(block * -(-size // len(block)))
    del data[size:]
    for off in range(PAGE, size, PAGE):  # page p's first 8 bytes ^= p (page 0: unchanged)
        k = min(STAMP, size - off)
        p = (off // PAGE) & ((1 << (8 * k)) - 1)
        data[off:off + k] = (int.from_bytes(data[off:off + k], "little") ^ p).to_bytes(k, "little")
    return bytes(data)


@functools.lru_cache(maxsize=1 << 16)
def expected_sha256(seed, d, cls, i):
    """Hex SHA-256 of expected_bytes(seed, d, cls, i) (cached)."""
    return hashlib.sha256(expected_bytes(seed, d, cls, i)).hexdigest()


# ---- the access model ----------------------------------------------------------------------

class AccessModel:
    """SPECweb99's static request mix over a set of `dirs` directories.

    prob(d, cls, i) = zipf(d) * CLASS_PERCENT[cls]/100 * FILE_PERMILLE[i]/999,
    with zipf(d) = (1/(d+1)) / H(dirs); the three are drawn independently.
    sample(rng) -> (path, size) draws one request (rng: a random.Random; by
    default one seeded with `seed`, so a run is reproducible)."""

    def __init__(self, dirs, seed=DEFAULT_SEED):
        if dirs < 1:
            raise ValueError("dirs must be >= 1")
        self.dirs = dirs
        self.seed = seed
        self.rng = random.Random(seed)
        # Class and file together: 36 integer weights (percent x tenths of a
        # percent, total 100 x 999 = 99,900) drawn with randrange, so those
        # probabilities are exact.
        self._cf = [(c, i) for c in range(CLASSES) for i in range(FILES_PER_CLASS)]
        self._cf_cum = list(itertools.accumulate(CLASS_PERCENT[c] * FILE_PERMILLE[i] for c, i in self._cf))
        self._cf_total = self._cf_cum[-1]
        # Directories: float weights 1/(k+1) and their running sum (error ~1e-16, immaterial).
        self._zipf = [1.0 / (k + 1) ** ZIPF_ALPHA for k in range(dirs)]
        self._dir_cum = list(itertools.accumulate(self._zipf))
        self._harmonic = self._dir_cum[-1]

    def prob_dir(self, d):
        return self._zipf[d] / self._harmonic

    @staticmethod
    def prob_class(cls):
        return CLASS_PERCENT[cls] / sum(CLASS_PERCENT)

    @staticmethod
    def prob_file(i):
        """Within its class (the 99.9 % normalised to 1)."""
        return FILE_PERMILLE[i] / sum(FILE_PERMILLE)

    def prob(self, d, cls, i):
        """The probability that one request asks for dirD/classCLS_I."""
        if not 0 <= d < self.dirs:
            return 0.0
        file_size(cls, i)
        return self.prob_dir(d) * self.prob_class(cls) * self.prob_file(i)

    def draw(self, rng=None):
        """(dir, cls, i) of one request."""
        rng = rng or self.rng
        c, i = self._cf[bisect.bisect_right(self._cf_cum, rng.randrange(self._cf_total))]
        d = min(bisect.bisect_right(self._dir_cum, rng.random() * self._harmonic), self.dirs - 1)
        return d, c, i

    def sample(self, rng=None):
        """(path relative to the set's root, size in bytes) of one request."""
        d, c, i = self.draw(rng)
        return rel_path(d, c, i), SIZES[c][i]

    def mean_size(self):
        """The expected response body, bytes per request."""
        return sum(self.prob_class(c) * self.prob_file(i) * SIZES[c][i]
                   for c in range(CLASSES) for i in range(FILES_PER_CLASS))


# ---- on disk -------------------------------------------------------------------------------

def default_root():
    """--dir's default: $FILESET, else var/fileset in the repository."""
    return os.environ.get("FILESET") or os.path.join(REPO, "var", "fileset")


def make_manifest(seed, dirs, seconds=None):
    m = {"format": FORMAT, "version": VERSION, "seed": seed, "dirs": dirs,
         "files": dirs * CLASSES * FILES_PER_CLASS, "dir_bytes": DIR_BYTES, "total_bytes": dirs * DIR_BYTES,
         "file_bytes": {file_name(c, i): SIZES[c][i] for c in range(CLASSES) for i in range(FILES_PER_CLASS)},
         "naming": "dirNNNNN/classC_I (NNNNN from 00000, C 0-3, I 0-8)",
         "content": f"BLAKE2b-keyed {BLOCK} B block per file, repeated; each {PAGE} B page's first {STAMP} B "
                    "XOR its page number (bench/web/fileset.py expected_bytes)",
         "access_model": {"class_percent": list(CLASS_PERCENT), "file_percent": [p / 10 for p in FILE_PERMILLE],
                          "file_percent_note": "sums to 99.9; normalised", "dir_zipf_alpha": ZIPF_ALPHA}}
    if seconds is not None:
        m["generated"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        m["generation_seconds"] = round(seconds, 2)
    return m


def read_manifest(root):
    try:
        with open(os.path.join(root, MANIFEST)) as f:
            m = json.load(f)
        return m if isinstance(m, dict) else None
    except (OSError, ValueError):
        return None


def manifest_matches(m, seed, dirs):
    return bool(m) and m.get("format") == FORMAT and m.get("version") == VERSION and m.get("seed") == seed \
        and m.get("dirs") == dirs


def missing_or_wrong_size(root, dirs, limit=5):
    """Up to `limit` files that are absent or have the wrong size (stat only)."""
    bad = []
    for d, c, i in all_files(dirs):
        p = rel_path(d, c, i)
        try:
            if os.stat(os.path.join(root, p)).st_size != SIZES[c][i]:
                bad.append(f"{p}: wrong size")
        except OSError:
            bad.append(f"{p}: missing")
        if len(bad) >= limit:
            break
    return bad


@contextlib.contextmanager
def _locked(root):
    parent, name = os.path.split(os.path.abspath(root))
    os.makedirs(parent, exist_ok=True)
    with open(os.path.join(parent, f".{name}.lock"), "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"fileset: {root} is being made by another process: waiting")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _write_file(path, data):
    with open(path, "wb") as f:
        f.write(data)


def generate(tmp, seed, dirs, progress=True):
    """Write a whole set (manifest last) into the existing empty directory tmp."""
    t0 = last = time.monotonic()
    for d in range(dirs):
        dpath = os.path.join(tmp, dir_name(d))
        os.mkdir(dpath)
        for c in range(CLASSES):
            for i in range(FILES_PER_CLASS):
                _write_file(os.path.join(dpath, file_name(c, i)), expected_bytes(seed, d, c, i))
        now = time.monotonic()
        if progress and (now - last >= 2 or d + 1 == dirs) and dirs > 1:
            last = now
            log(f"fileset: {d + 1}/{dirs} directories, {(d + 1) * DIR_BYTES / 2**20:.0f} MiB, {now - t0:.1f} s")
    m = make_manifest(seed, dirs, time.monotonic() - t0)
    with open(os.path.join(tmp, MANIFEST), "w") as f:
        json.dump(m, f, indent=2)
        f.write("\n")
    return m


def ensure(root, dirs, seed=DEFAULT_SEED, progress=True):
    """Make the set at root unless an identical one is there. Returns (manifest, reused).
    progress: say on stderr what is done and why (not whether it was reused: the caller's summary does)."""
    root = os.path.abspath(root)
    parent, name = os.path.split(root)
    with _locked(root):
        m = read_manifest(root)
        if manifest_matches(m, seed, dirs):
            bad = missing_or_wrong_size(root, dirs)
            if not bad:
                return m, True
            if progress:
                log(f"fileset: {root}: manifest matches but {'; '.join(bad)}: regenerating")
        elif m and progress:
            log(f"fileset: {root}: a different set (version {m.get('version')}, seed {m.get('seed')}, "
                f"{m.get('dirs')} dirs): regenerating")
        if os.path.lexists(root):
            if not os.path.isdir(root) or os.path.islink(root):
                raise OSError(f"{root} exists and is not a directory: not replacing it")
            if os.listdir(root) and not os.path.lexists(os.path.join(root, MANIFEST)):
                raise OSError(f"{root} is not empty and holds no {MANIFEST}: not replacing it (choose another --dir)")
        for stale in os.listdir(parent):  # left by interrupted runs (we hold the lock)
            if stale.startswith((f".{name}.tmp-", f".{name}.old-")):
                shutil.rmtree(os.path.join(parent, stale), ignore_errors=True)
        tag = f"{os.getpid()}-{time.monotonic_ns()}"
        tmp = os.path.join(parent, f".{name}.tmp-{tag}")
        os.mkdir(tmp)
        old = None
        try:
            if progress:
                log(f"fileset: generating {dirs} directories ({dirs * DIR_BYTES / 2**20:.1f} MiB, seed {seed}) "
                    f"in {root}")
            m = generate(tmp, seed, dirs, progress)
            if os.path.lexists(root):
                old = os.path.join(parent, f".{name}.old-{tag}")
                os.rename(root, old)
            os.rename(tmp, root)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            if old and not os.path.lexists(root):  # interrupted between the two renames: put it back
                os.rename(old, root)
            raise
        if old:
            shutil.rmtree(old, ignore_errors=True)
        return m, False


def check(root, seed, dirs, progress=True):
    """Every file read back and compared with the model. Returns a list of problems (empty: all good)."""
    bad = []
    t0 = last = time.monotonic()
    for d in range(dirs):
        for c in range(CLASSES):
            for i in range(FILES_PER_CLASS):
                p = rel_path(d, c, i)
                try:
                    with open(os.path.join(root, p), "rb") as f:
                        got = f.read()
                except OSError as e:
                    bad.append(f"{p}: {e.strerror}")
                    continue
                want = expected_bytes(seed, d, c, i)
                if len(got) != len(want):
                    bad.append(f"{p}: {len(got):,} bytes, expected {len(want):,}")
                elif got != want:
                    at = next(k for k in range(len(want)) if got[k] != want[k])
                    bad.append(f"{p}: content differs from byte {at:,}")
        now = time.monotonic()
        if progress and now - last >= 2:
            last = now
            log(f"fileset: checked {d + 1}/{dirs} directories, {now - t0:.1f} s")
    expected = {dir_name(d) for d in range(dirs)} | {MANIFEST}
    names = {file_name(c, i) for c in range(CLASSES) for i in range(FILES_PER_CLASS)}
    for entry in sorted(set(os.listdir(root)) - expected):
        bad.append(f"{entry}: not part of the set")
    for d in range(dirs):
        dpath = os.path.join(root, dir_name(d))
        if os.path.isdir(dpath):
            for entry in sorted(set(os.listdir(dpath)) - names):
                bad.append(f"{dir_name(d)}/{entry}: not part of the set")
    return bad


# ---- main ----------------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Make (or reuse) a SPECweb99-like file set: directories of 4 classes x 9 files, "
                    "102 B to 921,600 B (5,119,484 B per directory), contents a pure function of the seed, "
                    "and a manifest fileset.json. Prints a one-line summary.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Access model (for --sample and importers): directory by Zipf (alpha 1), class 35/50/14/1 %, "
               "file in class\n3.9/5.9/8.8/17.7/35.3/11.8/7.1/5.0/4.4 % (normalised: they sum to 99.9 %).\n"
               "Exit status: 0 when the set is there (and, with --check, correct), 1 otherwise.")
    ap.add_argument("--dir", help="the set's root (default: the environment variable FILESET if set, else "
                    "var/fileset/ in the repository, which git ignores)")
    ap.add_argument("--size-mb", type=float, default=DEFAULT_SIZE_MB,
                    help=f"target size in MiB (default {DEFAULT_SIZE_MB}): ceil(size / 4.88 MiB) directories, "
                    "at least 1 (64 MiB: 14 directories, 71.7 MB)")
    ap.add_argument("--dirs", type=int, metavar="N",
                    help="N directories, whatever --size-mb says (the study's set of 24,480 files: --dirs 680)")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED,
                    help=f"the contents' seed (default {DEFAULT_SEED}); also seeds --sample")
    ap.add_argument("--check", action="store_true",
                    help="read every file back and compare it with the model byte for byte; exit 1 on a mismatch")
    ap.add_argument("--sample", type=int, metavar="N",
                    help="print N requests drawn from the access model, one path (relative to the root) a line, "
                    "on stdout (the summary goes to stderr then)")
    ap.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = ap.parse_args(argv)
    if not (args.size_mb >= 0 and math.isfinite(args.size_mb)):
        ap.error("--size-mb must be >= 0")
    if args.dirs is not None and args.dirs < 1:
        ap.error("--dirs must be >= 1")
    if args.sample is not None and args.sample < 0:
        ap.error("--sample must be >= 0")
    args.dir = os.path.abspath(args.dir or default_root())
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    dirs = args.dirs or dirs_for_size(args.size_mb * 2**20)
    t0 = time.monotonic()
    try:
        m, reused = ensure(args.dir, dirs, args.seed, progress=not args.quiet)
    except OSError as e:
        log(f"fileset: {e}")
        return 1
    dt = time.monotonic() - t0
    summary = (f"fileset: {'reused' if reused else 'generated'} {args.dir}: {dirs} directories, "
               f"{m['files']:,} files, {m['total_bytes']:,} bytes ({m['total_bytes'] / 2**20:.1f} MiB), "
               f"seed {args.seed}, version {VERSION}" + ("" if reused else f", {dt:.2f} s"))
    rc = 0
    if args.check:
        t1 = time.monotonic()
        bad = check(args.dir, args.seed, dirs, progress=not args.quiet)
        for b in bad[:20]:
            log(f"fileset: check: {b}")
        if len(bad) > 20:
            log(f"fileset: check: ... and {len(bad) - 20} more")
        summary += (f"; check: {len(bad)} problems" if bad else f"; check: all {m['files']:,} files correct") \
            + f" ({time.monotonic() - t1:.2f} s)"
        rc = 1 if bad else 0
    if args.sample is not None:
        log(summary)
        model = AccessModel(dirs, args.seed)
        out = sys.stdout
        for _ in range(args.sample):
            out.write(model.sample()[0] + "\n")
        out.flush()
    else:
        print(summary, flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
