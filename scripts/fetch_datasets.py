#!/usr/bin/env python3
"""The helper behind scripts/fetch_datasets.sh: downloads the named datasets of
scripts/datasets.json into the data folder tessera-train reads, checks each file's SHA-256,
and converts or unpacks what tessera-train cannot read as published.

Every file lands through DIR/NAME.part and is renamed to NAME only after its SHA-256 passes:
a pinned one (the manifest's), or, where none could be pinned, the one recorded when the file
was first fetched (DATA_DIR/sha256-recorded-on-first-use.tsv). Nothing under the data folder
is written through a symbolic link, a device, a FIFO or a second hard link: those are refused,
naming them. Downloading needs only Python's standard library; converting the Planetoid and
Reddit sets needs numpy and scipy (Debian: python3-numpy python3-scipy), through
scripts/convert_dataset.py.
"""

import argparse
import errno
import fcntl
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import stat
import sys
import textwrap
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile

SCRIPTS = os.path.dirname(os.path.abspath(__file__))
MANIFEST = os.path.join(SCRIPTS, "datasets.json")
RECORD = "sha256-recorded-on-first-use.tsv"
LOCK = ".fetch_datasets.lock"
PROG = "fetch_datasets.sh"
CHUNK = 1 << 20
TIMEOUT_S = 60  # a server silent this long is retried, then given up on
ATTEMPTS = 3  # tries of one download in one run (each resumes where the last stopped)
USER_AGENT = "tessera-fetch-datasets/1"

USAGE = f"""usage: {PROG} [--data-dir DIR] [--from DIR|URL] NAME...
       {PROG} --list [--data-dir DIR]

Downloads the named datasets from where they are published into the folder tessera-train
reads them from, checks every file's SHA-256, and converts what needs converting.

  NAME...          datasets to fetch (--list names them all)
  --data-dir DIR   where they land; default $TESSERA_DATA_DIR, else
                   $XDG_CACHE_HOME/tessera/datasets, else ~/.cache/tessera/datasets
                   (the folder tessera-train --dataset NAME reads by default)
  --from DIR|URL   fetch from a mirror instead ($TESSERA_DATASETS_MIRROR): a folder or a
                   URL that holds each file under the path --list shows, as a data folder
                   filled by this script does; for clusters without internet access
  --list           every dataset: what it is, size, source, licence, published result,
                   how tessera-train reads it, and whether each checksum is pinned or
                   recorded on first use
  --manifest FILE  another manifest than scripts/datasets.json (same layout)
  -h, --help       this text

Checksums: a pinned SHA-256 comes from the manifest, checked against a copy of the published
file. Where none could be pinned, the first download's SHA-256 is recorded in
DATA_DIR/{RECORD} (trust on first use, said as it happens) and every later fetch must match
it. A file whose SHA-256 differs is refused, naming the expected and the got checksum, and
nothing is left under its name. An interrupted download is kept as NAME.part and resumed by
the next run. Exit status: 0 when every NAME was fetched, 1 when one failed, 2 for usage."""


class FetchError(Exception):
    """A refusal or failure, printed as 'fetch_datasets.sh: error: <message>'."""


class Interrupted(Exception):
    """A download that stopped early; the next attempt resumes it."""


def say(message):
    print(message, flush=True)


# ---- the manifest ---------------------------------------------------------------------------

SHA256_FORM = re.compile(r"[0-9a-f]{64}")
STEPS = ("planetoid", "ogb", "reddit")


def checked_relative(path, where):
    """`path` if it is a plain relative path (no '..', no absolute path, no empty part)."""
    parts = path.split("/") if isinstance(path, str) else []
    if not parts or path.startswith("/") or any(p in ("", ".", "..") for p in parts) or \
            "\\" in path or "\0" in path:
        raise FetchError(f"{where}: path {path!r} is not a plain relative path")
    return path


def load_manifest(path):
    """The manifest's datasets, every field checked: names unique, paths relative, sha256 64 hex
    digits or null, URLs http(s), each step one this script knows."""
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        raise FetchError(f"{path}: cannot read the manifest: {e}") from e
    datasets = manifest.get("datasets") if isinstance(manifest, dict) else None
    if not isinstance(datasets, list) or not datasets:
        raise FetchError(f"{path}: expected an object with a list 'datasets'")
    seen = set()
    for number, ds in enumerate(datasets, 1):
        where = f"{path}: dataset {number}"
        if not isinstance(ds, dict) or not isinstance(ds.get("name"), str):
            raise FetchError(f"{where}: has no name")
        where = f"{path}: dataset '{ds['name']}'"
        if ds["name"] in seen:
            raise FetchError(f"{where}: listed twice")
        seen.add(ds["name"])
        for key in ("what", "source", "licence", "published", "size", "train"):
            if not isinstance(ds.get(key), str):
                raise FetchError(f"{where}: '{key}' missing or not a string")
        files = ds.get("files")
        if not isinstance(files, list) or not files:
            raise FetchError(f"{where}: no 'files'")
        for entry in files:
            if not isinstance(entry, dict):
                raise FetchError(f"{where}: a file entry is not an object")
            checked_relative(entry.get("path"), where)
            if entry["path"].endswith(".part") or entry["path"] == RECORD:
                raise FetchError(f"{where}: path {entry['path']!r} is a name this script uses")
            url = entry.get("url")
            if not isinstance(url, str) or urllib.parse.urlsplit(url).scheme not in ("http",
                                                                                     "https"):
                raise FetchError(f"{where}: {entry['path']}: url {url!r} is not http(s)")
            sha = entry.get("sha256")
            if sha is not None and not (isinstance(sha, str) and SHA256_FORM.fullmatch(sha)):
                raise FetchError(f"{where}: {entry['path']}: sha256 {sha!r} is not 64 lowercase "
                                 "hex digits (or null: recorded on first use)")
            size = entry.get("bytes")
            if size is not None and not (isinstance(size, int) and size >= 0):
                raise FetchError(f"{where}: {entry['path']}: bytes {size!r} is not a size")
        prepare = ds.get("prepare")
        if prepare is not None:
            if not isinstance(prepare, dict) or prepare.get("step") not in STEPS:
                raise FetchError(f"{where}: 'prepare.step' must be one of {', '.join(STEPS)}")
            for key in ("input", "output") + (("folder",) if prepare["step"] == "ogb" else ()):
                checked_relative(prepare.get(key), f"{where}: prepare.{key}")
    return datasets


# ---- the data folder, reached without following links ---------------------------------------


def default_data_dir():
    """tessera-train's default (datasets::default_data_dir): $TESSERA_DATA_DIR, else
    $XDG_CACHE_HOME/tessera/datasets, else $HOME/.cache/tessera/datasets."""
    env = os.environ
    if env.get("TESSERA_DATA_DIR"):
        return env["TESSERA_DATA_DIR"]
    if env.get("XDG_CACHE_HOME"):
        return os.path.join(env["XDG_CACHE_HOME"], "tessera", "datasets")
    if env.get("HOME"):
        return os.path.join(env["HOME"], ".cache", "tessera", "datasets")
    return os.path.join(".cache", "tessera", "datasets")


def kind_of(mode):
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISREG, "a regular file")):
        if test(mode):
            return name
    return "a special file"


DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class DataDir:
    """The data folder. Every path below it is reached one component at a time, relative to an
    open folder and with O_NOFOLLOW, so a link planted anywhere below it is refused, never
    followed. (The data folder itself may be a link: where the user points it.)"""

    def __init__(self, path, create):
        self.path = path
        if create:
            os.makedirs(path, exist_ok=True)
        self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def shown(self, rel):
        return os.path.join(self.path, rel)

    def folder(self, rel_dir):
        """An open fd of the folder `rel_dir` ('' for the data folder), created as needed."""
        fd = os.dup(self.fd)
        done = []
        try:
            for part in rel_dir.split("/") if rel_dir else []:
                done.append(part)
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
                try:
                    child = os.open(part, DIR_FLAGS, dir_fd=fd)
                except OSError as e:
                    if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    st = lstat_at(fd, part)
                    what = kind_of(st.st_mode) if st else "gone"
                    raise FetchError(f"{self.shown('/'.join(done))}: is {what}, not a folder; "
                                     "refusing to follow or write through it") from e
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd


def lstat_at(dir_fd, name):
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def open_regular(dir_fd, name, shown, flags, what="read"):
    """`name` in `dir_fd` opened with `flags`, refused unless it is a regular file (with one link
    when opened for writing): checked before it is opened (opening a device can act) and on the
    open fd (a swap in between)."""
    st = lstat_at(dir_fd, name)
    if st is None:
        raise FileNotFoundError(errno.ENOENT, "missing", shown)
    if not stat.S_ISREG(st.st_mode):
        raise FetchError(f"{shown}: is {kind_of(st.st_mode)}, not a regular file; refusing to "
                         f"{what} it (remove it if it is not yours)")
    if st.st_nlink != 1 and flags & (os.O_WRONLY | os.O_RDWR):
        raise FetchError(f"{shown}: has {st.st_nlink} hard links; refusing to write to it (it "
                         "may be another file's second name)")
    fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    now = os.fstat(fd)
    if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(now.st_mode):
        os.close(fd)
        raise FetchError(f"{shown}: changed while it was opened; refusing it")
    return fd


def sha256_of_fd(fd):
    h = hashlib.sha256()
    while chunk := os.read(fd, CHUNK):
        h.update(chunk)
    return h


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


# ---- checksums recorded on first use --------------------------------------------------------


class Records:
    """DATA_DIR/sha256-recorded-on-first-use.tsv: 'sha256 <tab> path <tab> source <tab> when' per
    file whose SHA-256 no manifest pins, written when it was first fetched."""

    HEADER = (f"# SHA-256 of files no manifest pins, recorded when {PROG} first fetched them "
              "(trust on first use).\n# Later fetches must match; delete a line to accept a file "
              "the publisher changed on purpose.\n")

    def __init__(self, data):
        self.data = data
        self.shown = data.shown(RECORD)
        self.by_path = {}  # path -> (sha256, source, when)
        self.added = 0
        try:
            fd = open_regular(data.fd, RECORD, self.shown, os.O_RDONLY)
        except FileNotFoundError:
            return
        with os.fdopen(fd, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip() or line.startswith("#"):
                    continue
                fields = line.rstrip("\n").split("\t")
                if len(fields) != 4 or not SHA256_FORM.fullmatch(fields[0]):
                    raise FetchError(f"{self.shown}:{number}: expected 'sha256<TAB>path<TAB>"
                                     f"source<TAB>when', got {line.strip()[:80]!r}")
                self.by_path[fields[1]] = (fields[0], fields[2], fields[3])

    def get(self, path):
        """(sha256, when) recorded for `path`, or None."""
        found = self.by_path.get(path)
        return (found[0], found[2]) if found else None

    def add(self, path, sha, source):
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.by_path[path] = (sha, source.replace("\t", " "), when)
        self.added += 1
        lines = [self.HEADER] + [f"{s}\t{p}\t{src}\t{w}\n"
                                 for p, (s, src, w) in sorted(self.by_path.items())]
        self._replace("".join(lines))

    def _replace(self, text):
        """A new file renamed over the record (which must be a regular file, if any)."""
        st = lstat_at(self.data.fd, RECORD)
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise FetchError(f"{self.shown}: is {kind_of(st.st_mode)}; refusing to replace it")
        temporary = f".{RECORD}.{os.getpid()}.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW |
                     os.O_CLOEXEC, 0o644, dir_fd=self.data.fd)
        try:
            write_all(fd, text.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temporary, RECORD, src_dir_fd=self.data.fd, dst_dir_fd=self.data.fd)


# ---- getting one file -----------------------------------------------------------------------


class Source:
    """Where files come from: their published URLs, or a mirror (a folder or a base URL) that
    holds each under its path in the data folder."""

    def __init__(self, mirror):
        self.mirror = mirror
        self.is_url = bool(mirror) and re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", mirror) is not None
        if mirror and not self.is_url and not os.path.isdir(mirror):
            raise FetchError(f"--from {mirror}: not a folder (and not a URL such as "
                             "https://host/datasets)")

    def location(self, entry):
        if not self.mirror:
            return entry["url"]
        if self.is_url:
            return self.mirror.rstrip("/") + "/" + urllib.parse.quote(entry["path"])
        return os.path.join(self.mirror, entry["path"])


def open_part(folder_fd, part, shown_part, resume):
    """(fd, bytes already there, their sha256) of NAME.part: an earlier run's partial file when
    `resume`, else a new empty one (an earlier one removed)."""
    st = lstat_at(folder_fd, part)
    if st is not None and (not stat.S_ISREG(st.st_mode) or st.st_nlink != 1):
        what = kind_of(st.st_mode) if not stat.S_ISREG(st.st_mode) else \
            f"a file with {st.st_nlink} hard links"
        raise FetchError(f"{shown_part}: is {what}; refusing to write to it (remove it)")
    if st is not None and resume and st.st_size > 0:
        fd = open_regular(folder_fd, part, shown_part, os.O_RDWR, "resume")
        h = sha256_of_fd(fd)
        return fd, os.lseek(fd, 0, os.SEEK_END), h
    if st is not None:
        if st.st_size > 0:
            say(f"  {shown_part}: an earlier run's partial file, which no checksum could judge "
                "once resumed: starting over")
        os.unlink(part, dir_fd=folder_fd)
    fd = os.open(part, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                 dir_fd=folder_fd)
    return fd, 0, hashlib.sha256()


class Progress:
    """A one-line progress count on a terminal; silent otherwise."""

    def __init__(self, label, total):
        self.label, self.total = label, total
        self.on = sys.stdout.isatty()
        self.last = 0.0

    def update(self, done, final=False):
        now = time.monotonic()
        if not self.on or (not final and now - self.last < 0.5):
            return
        self.last = now
        of = f" of {self.total / 1e6:.1f}" if self.total else ""
        end = "\n" if final else ""
        print(f"\r  {self.label}: {done / 1e6:.1f}{of} MB", end=end, flush=True)


class Download:
    """One file being downloaded into NAME.part: its fd, the bytes it holds and their sha256."""

    def __init__(self, url, fd, offset, h, limit):
        self.url, self.fd, self.offset, self.h, self.limit = url, fd, offset, h, limit
        self.progress = Progress(url.rsplit("/", 1)[-1], limit)

    def transfer(self):
        """Appends what the URL serves from byte self.offset. Raises Interrupted when it stops
        early (self.offset says where), FetchError when the server refuses."""
        headers = {"User-Agent": USER_AGENT}
        if self.offset:
            headers["Range"] = f"bytes={self.offset}-"
        try:
            response = urllib.request.urlopen(urllib.request.Request(self.url, headers=headers),
                                              timeout=TIMEOUT_S)
        except urllib.error.HTTPError as e:
            if e.code == 416 and self.offset:  # nothing past offset: the part may be whole
                return
            if e.code >= 500 or e.code == 429:
                raise Interrupted(f"HTTP {e.code} {e.reason}") from e
            raise FetchError(f"{self.url}: HTTP {e.code} {e.reason}") from e
        except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
            raise Interrupted(getattr(e, "reason", None) or e) from e
        with response:
            self.start(response)
            length = response.headers.get("Content-Length")
            end = self.offset + int(length) if length and length.isdigit() else None
            try:
                while chunk := response.read(CHUNK):
                    self.append(chunk)
            except (http.client.HTTPException, OSError) as e:
                raise Interrupted(e or type(e).__name__) from e
            if end is not None and self.offset < end:
                raise Interrupted(f"the server closed the connection at byte {self.offset} of "
                                  f"{end}")

    def start(self, response):
        """Checks that a range request got the range, or starts over when the server sent the
        whole file."""
        if self.offset and response.status == 206:
            match = re.match(r"bytes (\d+)-", response.headers.get("Content-Range", ""))
            if not match or int(match.group(1)) != self.offset:
                raise FetchError(f"{self.url}: asked for bytes from {self.offset}, the server "
                                 f"sent '{response.headers.get('Content-Range')}'")
        elif self.offset:
            say(f"  {self.url}: the server does not resume downloads (it sent the whole file); "
                "starting over")
            os.ftruncate(self.fd, 0)
            os.lseek(self.fd, 0, os.SEEK_SET)
            self.offset, self.h = 0, hashlib.sha256()

    def append(self, chunk):
        write_all(self.fd, chunk)
        self.h.update(chunk)
        self.offset += len(chunk)
        if self.limit is not None and self.offset > self.limit:
            raise FetchError(f"{self.url}: sent more than the {self.limit} bytes the manifest "
                             "records for it; refusing the rest")
        self.progress.update(self.offset)


def download(url, folder_fd, part, shown_part, resume, limit):
    """Downloads `url` into NAME.part (resuming an earlier run's part when `resume`), trying
    ATTEMPTS times, each resuming where the last stopped; returns (sha256 hex, the byte an
    earlier run's part was resumed from or 0)."""
    fd, offset, h = open_part(folder_fd, part, shown_part, resume)
    if offset:
        say(f"  resuming {shown_part} at byte {offset} (a partial file of an earlier run)")
    job = Download(url, fd, offset, h, limit)
    try:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                job.transfer()
                break
            except Interrupted as e:
                if attempt == ATTEMPTS and job.offset == 0:
                    raise FetchError(f"cannot download {url}: {e}. Without internet access, "
                                     "fetch from a mirror: --from DIR|URL (see --help)") from e
                if attempt == ATTEMPTS:
                    raise FetchError(f"{url}: the download stopped after {job.offset} bytes "
                                     f"({e}), {ATTEMPTS} times; the partial file is kept as "
                                     f"{shown_part}: run the same command again to resume it") \
                        from e
                say(f"  {url}: cannot reach it ({e}); trying again" if job.offset == 0 else
                    f"  {url}: interrupted after {job.offset} bytes ({e}); resuming")
                time.sleep(min(2 ** attempt, 10) if job.offset == 0 else 0.2)
        job.progress.update(job.offset, final=True)
        os.fsync(fd)
    except BaseException:
        if job.offset == 0:  # nothing to resume: leave no empty NAME.part behind
            os.unlink(part, dir_fd=folder_fd)
        raise
    finally:
        os.close(fd)
    return job.h.hexdigest(), offset


def copy_from_folder(path, folder_fd, part, shown_part, limit):
    """Copies the mirror folder's file `path` into NAME.part; returns its sha256 hex."""
    try:
        source = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError as e:
        raise FetchError(f"{path}: not in the mirror folder (a mirror holds each file under the "
                         "path --list shows)") from e
    except OSError as e:
        raise FetchError(f"{path}: cannot read it: {e.strerror}") from e
    try:
        mode = os.fstat(source).st_mode
        if not stat.S_ISREG(mode):
            raise FetchError(f"{path}: is {kind_of(mode)}, not a regular file; refusing to copy it")
        fd, _, h = open_part(folder_fd, part, shown_part, resume=False)
        try:
            copied = 0
            while chunk := os.read(source, CHUNK):
                write_all(fd, chunk)
                h.update(chunk)
                copied += len(chunk)
                if limit is not None and copied > limit:
                    raise FetchError(f"{path}: larger than the {limit} bytes the manifest records")
            os.fsync(fd)
        finally:
            os.close(fd)
    finally:
        os.close(source)
    return h.hexdigest()


def place(folder_fd, part, name, shown):
    """Gives NAME.part its final name, never replacing anything there (a link included)."""
    try:
        os.link(part, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd, follow_symlinks=False)
    except FileExistsError as e:
        os.unlink(part, dir_fd=folder_fd)
        raise FetchError(f"{shown}: appeared while it was downloaded; refusing to replace it") \
            from e
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK):
            raise
        if lstat_at(folder_fd, name) is not None:  # a file system without hard links
            raise FetchError(f"{shown}: appeared while it was downloaded; refusing to replace "
                             "it") from e
        os.rename(part, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
        return
    os.unlink(part, dir_fd=folder_fd)


def mismatch(shown, source, expected, how, got, records):
    text = (f"checksum mismatch for {shown} (from {source}): expected sha256 {expected} ({how}), "
            f"got {got}; nothing was kept under {shown}")
    if how.startswith("recorded"):
        text += (f". If the publisher changed the file on purpose, delete its line from "
                 f"{records.shown} and fetch again")
    return FetchError(text)


def fetch_file(data, records, source, entry):
    """One manifest file into the data folder, checked; says what it did."""
    rel = entry["path"]
    shown = data.shown(rel)
    folder_fd = data.folder(os.path.dirname(rel))
    try:
        name = os.path.basename(rel)
        part, shown_part = name + ".part", shown + ".part"
        expected, how = entry.get("sha256"), "pinned"
        if expected is None and records.get(rel):
            expected, when = records.get(rel)
            how = f"recorded on first use {when}".rstrip()
        st = lstat_at(folder_fd, name)
        if st is not None:
            fd = open_regular(folder_fd, name, shown, os.O_RDONLY, "check")
            try:
                got = sha256_of_fd(fd).hexdigest()
            finally:
                os.close(fd)
            if expected is None:
                records.add(rel, got, "present before the first fetch")
                say(f"  {rel}: present; sha256 {got} recorded on first use (none is pinned)")
            elif got != expected:
                raise FetchError(f"{shown}: exists, but its sha256 is {got}, expected {expected} "
                                 f"({how}); move it away to fetch it again")
            else:
                say(f"  {rel}: present, sha256 ok ({how})")
            return
        location = source.location(entry)
        limit = entry.get("bytes")
        say(f"  {rel} <- {location}")
        if source.mirror and not source.is_url:
            got, resumed_from = copy_from_folder(location, folder_fd, part, shown_part, limit), 0
        else:
            # An earlier run's part is resumed only when a checksum can judge the result.
            got, resumed_from = download(location, folder_fd, part, shown_part,
                                         expected is not None, limit)
            if expected is not None and got != expected and resumed_from:
                say(f"  {rel}: wrong checksum after resuming an earlier run's partial file at "
                    f"byte {resumed_from}; downloading it again from the start")
                got, _ = download(location, folder_fd, part, shown_part, False, limit)
        if expected is not None and got != expected:
            os.unlink(part, dir_fd=folder_fd)
            raise mismatch(shown, location, expected, how, got, records)
        place(folder_fd, part, name, shown)
        if expected is None:
            records.add(rel, got, location)
            say(f"  {rel}: sha256 {got} recorded on first use (none is pinned)")
        else:
            say(f"  {rel}: sha256 ok ({how})")
    finally:
        os.close(folder_fd)


# ---- what needs converting or unpacking ----------------------------------------------------


def output_state(data, rel):
    """(fd of its folder, made as needed, name, lstat or None) of an output path."""
    folder_fd = data.folder(os.path.dirname(rel))
    name = os.path.basename(rel)
    return folder_fd, name, lstat_at(folder_fd, name)


def import_converter():
    """scripts/convert_dataset.py as a module (numpy and scipy needed)."""
    sys.path.insert(0, SCRIPTS)
    sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
    try:
        import convert_dataset  # here: numpy and scipy are needed only to convert
    except SystemExit as e:  # it exits naming the missing module and the Debian packages
        raise FetchError(str(e.code)) from e
    finally:
        sys.path.remove(SCRIPTS)
    return convert_dataset


def prepare_planetoid(data, prepare):
    convert_dataset = import_converter()
    try:
        convert_dataset.convert_planetoid(data.shown(prepare["input"]), None,
                                          data.shown(prepare["output"]), False)
    except convert_dataset.ConvertError as e:
        raise FetchError(f"converting {data.shown(prepare['input'])}.*: {e}") from e


def staging_folder(parent_fd, name):
    """A new empty folder .NAME.unpacking-PID beside NAME (an earlier run's leftover removed)."""
    for leftover in os.listdir(parent_fd):
        if leftover.startswith(f".{name}.unpacking-"):
            shutil.rmtree(leftover, dir_fd=parent_fd)
    staging = f".{name}.unpacking-{os.getpid()}"
    os.mkdir(staging, 0o755, dir_fd=parent_fd)
    return staging


def member_parts(name, shown, top):
    """The path parts of zip member `name` below its top folder `top` ('' for none), refused
    unless it is a plain relative path under it."""
    parts = name.split("/")
    if top:
        if parts[0] != top:
            raise FetchError(f"{shown}: member '{name}' is outside '{top}/'; refusing the archive")
        parts = parts[1:]
    if name.startswith("/") or "\\" in name or "\0" in name or \
            any(p in (".", "..") for p in parts) or "" in parts[:-1]:
        raise FetchError(f"{shown}: member '{name}' is not a plain relative path; refusing the "
                         "archive")
    return parts


def open_archive(data, rel):
    folder_fd = data.folder(os.path.dirname(rel))
    try:
        fd = open_regular(folder_fd, os.path.basename(rel), data.shown(rel), os.O_RDONLY)
    finally:
        os.close(folder_fd)
    f = os.fdopen(fd, "rb")
    try:
        archive = zipfile.ZipFile(f)
    except (zipfile.BadZipFile, OSError) as e:
        f.close()
        raise FetchError(f"{data.shown(rel)}: not a readable zip archive: {e}") from e
    size = os.fstat(fd).st_size
    unpacked = sum(info.file_size for info in archive.infolist())
    if unpacked > max(4 << 30, 8 * size):
        archive.close()
        raise FetchError(f"{data.shown(rel)}: would unpack to {unpacked} bytes from {size}; "
                         "refusing it")
    return archive


def extract_member(archive, info, folder_fd, parts):
    """Writes member `info` to `parts` below `folder_fd` (folders made as needed); a member named
    twice is refused by O_EXCL."""
    fd = os.dup(folder_fd)
    try:
        for part in parts[:-1]:
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
            child = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
        out = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW |
                      os.O_CLOEXEC, 0o644, dir_fd=fd)
        with os.fdopen(out, "wb") as target, archive.open(info) as member:
            shutil.copyfileobj(member, target, CHUNK)
    finally:
        os.close(fd)


def prepare_ogb(data, prepare):
    """Unpacks an OGB zip (its top folder, e.g. arxiv/) into the folder the ogb package leaves,
    whole or not at all: into a staging folder, renamed when complete."""
    parent_fd, name, st = output_state(data, prepare["output"])
    shown = data.shown(prepare["input"])
    try:
        if st is not None:
            raise FetchError(f"{data.shown(prepare['output'])}: exists as {kind_of(st.st_mode)}")
        staging = staging_folder(parent_fd, name)
        try:
            staging_fd = os.open(staging, DIR_FLAGS, dir_fd=parent_fd)
            try:
                with open_archive(data, prepare["input"]) as archive:
                    for info in archive.infolist():
                        if info.filename.startswith("__MACOSX/"):
                            continue
                        parts = member_parts(info.filename, shown, prepare["folder"])
                        if not info.is_dir() and parts and parts[-1]:
                            extract_member(archive, info, staging_fd, parts)
                raw = lstat_at(staging_fd, "raw")
            finally:
                os.close(staging_fd)
            if raw is None or not stat.S_ISDIR(raw.st_mode):
                raise FetchError(f"{shown}: holds no {prepare['folder']}/raw/ folder: not an OGB "
                                 "node-property dataset")
            os.rename(staging, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
        except BaseException:
            if lstat_at(parent_fd, staging) is not None:
                shutil.rmtree(staging, dir_fd=parent_fd)
            raise
        say(f"  unpacked {shown} into {data.shown(prepare['output'])}")
    except (zipfile.BadZipFile, OSError) as e:
        raise FetchError(f"{shown}: cannot unpack it: {e}") from e
    finally:
        os.close(parent_fd)


REDDIT_MEMBERS = ("reddit_data.npz", "reddit_graph.npz")


def prepare_reddit(data, prepare):
    """reddit.zip (reddit_data.npz: feature [N, 602], label [N], node_types [N] with 1 train,
    2 val, 3 test; reddit_graph.npz: the adjacency, a scipy sparse matrix [N, N]) becomes the npz
    layout of convert_dataset.py: adjacency without self-loops, dense features, the split."""
    convert_dataset = import_converter()
    import numpy as np  # convert_dataset imported them: they are there
    import scipy.sparse as sp

    shown = data.shown(prepare["input"])
    out = data.shown(prepare["output"])
    parent_fd, _, _ = output_state(data, prepare["output"])
    staging = staging_folder(parent_fd, "reddit")
    staged = os.path.join(os.path.dirname(out), staging)
    try:
        staging_fd = os.open(staging, DIR_FLAGS, dir_fd=parent_fd)
        try:
            with open_archive(data, prepare["input"]) as archive:
                found = {}
                for info in archive.infolist():
                    base = info.filename.rsplit("/", 1)[-1]
                    if base in REDDIT_MEMBERS and not info.filename.startswith("__MACOSX/"):
                        member_parts(info.filename, shown, "")
                        if base in found:
                            raise FetchError(f"{shown}: holds {base} twice")
                        found[base] = info
                        extract_member(archive, info, staging_fd, [base])
                missing = [m for m in REDDIT_MEMBERS if m not in found]
                if missing:
                    raise FetchError(f"{shown}: holds no {', '.join(missing)}")
        finally:
            os.close(staging_fd)
        where = os.path.join(staged, "reddit_data.npz")
        try:
            with np.load(where, allow_pickle=False) as arrays:
                features = np.asarray(arrays["feature"], dtype=np.float32)
                labels = np.asarray(arrays["label"])
                node_types = np.asarray(arrays["node_types"])
            adjacency = sp.load_npz(os.path.join(staged, "reddit_graph.npz")).tocoo()
        except (OSError, KeyError, ValueError, zipfile.BadZipFile) as e:
            raise FetchError(f"{shown}: {REDDIT_MEMBERS}: not Reddit's arrays: {e}") from e
        n = features.shape[0] if features.ndim == 2 else -1
        if n < 0 or labels.shape != (n,) or node_types.shape != (n,) or \
                adjacency.shape != (n, n):
            raise FetchError(f"{shown}: shapes disagree: feature {features.shape}, label "
                             f"{labels.shape}, node_types {node_types.shape}, graph "
                             f"{adjacency.shape}")
        keep = adjacency.row != adjacency.col
        matrix = sp.csr_matrix((np.ones(int(keep.sum()), np.float32),
                                (adjacency.row[keep], adjacency.col[keep])), shape=(n, n))
        del adjacency, keep
        matrix.data[:] = 1  # an edge listed twice was summed into one entry
        matrix = convert_dataset.checked_csr(matrix, f"{shown}: reddit_graph.npz")
        labels = convert_dataset.class_ids(labels, f"{shown}: reddit_data.npz label")
        split = {key: np.flatnonzero(node_types == value)
                 for key, value in (("train_idx", 1), ("val_idx", 2), ("test_idx", 3))}
        convert_dataset.check_output(out, [], False)
        convert_dataset.write_npz(out, matrix, features, labels, split)
    except convert_dataset.ConvertError as e:
        raise FetchError(f"converting {shown}: {e}") from e
    finally:
        shutil.rmtree(staging, dir_fd=parent_fd)
        os.close(parent_fd)


PREPARE = {"planetoid": prepare_planetoid, "ogb": prepare_ogb, "reddit": prepare_reddit}


def prepared(data, ds):
    """True when the dataset's converted or unpacked output is already there (its downloads are
    then not needed again); refuses an output of the wrong kind (a link, a device...)."""
    step = ds.get("prepare")
    if step is None:
        return False
    folder_fd, _, st = output_state(data, step["output"])
    os.close(folder_fd)
    wanted = stat.S_ISDIR if step["step"] == "ogb" else stat.S_ISREG
    if st is not None and not wanted(st.st_mode):
        raise FetchError(f"{data.shown(step['output'])}: is {kind_of(st.st_mode)}; refusing to "
                         "write there")
    return st is not None


def prepare(data, ds):
    """Converts or unpacks the downloads into what tessera-train reads, where a step is needed."""
    step = ds.get("prepare")
    if step is not None:
        PREPARE[step["step"]](data, step)


# ---- the commands ---------------------------------------------------------------------------


def train_hint(ds, data_dir):
    spec = ds["train"].replace("{data}", data_dir)
    if ":" not in ds["train"]:
        return f"tessera-train --dataset {spec}"
    return (f"not a name tessera-train knows yet; it reads the files as "
            f"tessera-train --dataset {spec}")


def fetch(datasets, names, data_dir, mirror):
    source = Source(mirror)
    data = DataDir(data_dir, create=True)
    lock = open_regular_or_create(data, LOCK)
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting for another {PROG} writing to {data_dir} ...")
            fcntl.flock(lock, fcntl.LOCK_EX)
        records = Records(data)
        failed = []
        by_name = {ds["name"]: ds for ds in datasets}
        for name in names:
            ds = by_name[name]
            say(f"{name}: {ds['what']}")
            try:
                if prepared(data, ds):
                    output = data.shown(ds["prepare"]["output"])
                    say(f"  {output}: already there (remove it to fetch and prepare it anew)")
                else:
                    for entry in ds["files"]:
                        fetch_file(data, records, source, entry)
                    prepare(data, ds)
                say(f"  ready: {train_hint(ds, data_dir)}")
            except (FetchError, OSError) as e:
                message = f"{e.filename}: {e.strerror}" if isinstance(e, OSError) and \
                    e.filename else e
                print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)
                failed.append(name)
        if records.added:
            say(f"{records.added} checksum(s) recorded on first use in {records.shown}: no "
                "published copy was at hand to pin them, so these downloads are trusted as they "
                "came, and every later fetch must match them.")
        if failed:
            print(f"{PROG}: not fetched: {', '.join(failed)}", file=sys.stderr)
            return 1
        return 0
    finally:
        os.close(lock)
        os.close(data.fd)


def open_regular_or_create(data, name):
    try:
        return open_regular(data.fd, name, data.shown(name), os.O_RDWR, "lock")
    except FileNotFoundError:
        pass
    try:
        return os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                       0o644, dir_fd=data.fd)
    except FileExistsError:
        return open_regular(data.fd, name, data.shown(name), os.O_RDWR, "lock")


def common_base(urls):
    base = os.path.commonprefix(urls)
    return base[:base.rfind("/") + 1]


def file_state(entry, data, records):
    """What --list says of one file: its checksum (pinned, recorded or not yet) and whether the
    data folder holds it."""
    here = data is not None and os.path.lexists(data.shown(entry["path"]))
    if entry.get("sha256"):
        state = f"sha256 pinned {entry['sha256'][:16]}..."
    elif records and records.get(entry["path"]):
        sha, when = records.get(entry["path"])
        state = f"sha256 recorded on first use {when}: {sha[:16]}..."
    else:
        state = "sha256 to be recorded on first use"
    return f"{state}{'' if here else ', not fetched'}"


def list_datasets(datasets, data_dir):
    """--list: everything about each dataset, and what the data folder holds of it."""
    data = DataDir(data_dir, create=False) if os.path.isdir(data_dir) else None
    records = Records(data) if data else None
    say(f"Datasets {PROG} fetches into {data_dir} (--data-dir, $TESSERA_DATA_DIR).\n"
        "sha256 pinned: the manifest's, checked against a copy of the published file. Recorded on "
        "first use:\nno copy was at hand to pin it, so the first download's is written to\n"
        f"{os.path.join(data_dir, RECORD)} and every later fetch must match it.\n")
    for ds in datasets:
        say(f"{ds['name']}: {ds['what']}")
        for label in ("size", "source", "licence", "published"):
            say(f"    {label:<10} {ds[label]}")
        say(f"    {'tessera':<10} {train_hint(ds, data_dir)}")
        step = ds.get("prepare")
        if step:
            what = "unpacked" if step["step"] == "ogb" else "converted"
            here = data is not None and os.path.lexists(data.shown(step["output"]))
            say(f"    {'then':<10} {what} into {step['output']}{'' if here else ', not yet'}")
        urls = [entry["url"] for entry in ds["files"]]
        base = common_base(urls) if len(urls) > 1 else ""
        say(f"    {'url':<10} {base or urls[0]}{'...' if base else ''}")
        for entry in ds["files"]:
            say(f"    {'file':<10} {entry['path']}: {file_state(entry, data, records)}")
        say("")
    if data:
        os.close(data.fd)
    return 0


def main(argv):
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `--list | head` ends quietly
    synopsis = USAGE.split("\n\n", 1)[0].removeprefix("usage: ")
    parser = argparse.ArgumentParser(prog=PROG, usage=synopsis, add_help=False)
    parser.add_argument("names", nargs="*")
    parser.add_argument("--data-dir")
    parser.add_argument("--from", dest="mirror",
                        default=os.environ.get("TESSERA_DATASETS_MIRROR") or None)
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--manifest", default=MANIFEST)
    parser.add_argument("-h", "--help", action="store_true")
    args = parser.parse_args(argv)
    if args.help:
        try:
            names = ", ".join(ds["name"] for ds in load_manifest(args.manifest))
        except FetchError as e:
            names = f"(none: {e})"
        print(f"{USAGE}\n\n" + textwrap.fill(f"Known datasets: {names}.", 94))
        return 0
    try:
        datasets = load_manifest(args.manifest)
        data_dir = args.data_dir or default_data_dir()
        known = [ds["name"] for ds in datasets]
        if args.list:
            return list_datasets(datasets, data_dir)
        if not args.names:
            print(f"{PROG}: error: name at least one dataset (known: {', '.join(known)}); "
                  "--help for the options", file=sys.stderr)
            return 2
        unknown = [name for name in args.names if name not in known]
        if unknown:
            print(f"{PROG}: error: unknown dataset{'s' if len(unknown) > 1 else ''} "
                  f"{', '.join(repr(n) for n in unknown)}; known: {', '.join(known)}",
                  file=sys.stderr)
            return 2
        return fetch(datasets, list(dict.fromkeys(args.names)), data_dir, args.mirror)
    except FetchError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; a partial download is kept as NAME.part and resumed by the "
              "next run", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
