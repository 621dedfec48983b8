"""An entrant after the other teams' secrets: from inside its cell it walks up from its own file, from
every mount point of its mount table and from every path /proc shows it (processes' working folders,
roots, open files, command lines), to any ladder folder it can reach -- its database and side files,
ladder.json, logs, replays, the version store with every version's files and specs -- and prints all
it could read to its log, the log its team reads.

``Snoop`` does it at start-up as a policy (then plays noop); run as a script (``python
ladder_snoop.py``, e.g. as a submission's setup script) it does the same. The tests judge from
outside that none of another team's secrets reached its log or what the ladder stored of it.
"""

import contextlib
import os
import re
import stat
from pathlib import Path

from mettagrid.policy.noop import NoopPolicy

MARK = "SNOOPED"
# The format of a team's secrets, which the attacker knows (as one knows an API key's prefix): it
# ends with every distinct match it found, so a leak survives any cut of its log to its tail.
SECRET = re.compile(rb"pbx-secret-[0-9a-f]{8,}")
LADDER_FILES = ("ladder.db", "ladder.db-wal", "ladder.db-shm", "ladder.db-journal", "ladder.json", "run.lock")
LADDER_FOLDERS = ("logs", "replays", "versions")
KERNEL = ("/proc", "/sys", "/dev")  # files there are not a ladder's, and some block a reader
PRINTABLE = re.compile(rb"[\x20-\x7e]{6,}")
WHOLE = 64 << 20  # what it reads of a ladder's file
GLANCE = 64 << 10  # of any other file
SHOWN_PER_FILE = 8 << 10
MAX_FILES = 3000
MAX_DEPTH = 8


class Snooper:
    def __init__(self):
        self.tried = 0
        self.shown = {}  # path -> its printable runs (the start of them), for a ladder's files
        self.read = set()
        self.secrets = set()
        self.paths = set()  # paths named in what it read
        self.visited = set()  # folders already looked around

    def try_read(self, path, limit=GLANCE):
        path = str(path)
        if path in self.read or len(self.read) >= MAX_FILES:
            return
        self.tried += 1
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return  # a pipe or a socket (its own channel to the host, say) would block or eat frames
            data = os.read(fd, limit) if limit <= GLANCE else _read_all(fd, limit)
        except OSError:
            return
        finally:
            os.close(fd)
        self.read.add(path)
        self.secrets |= {match.decode() for match in SECRET.findall(data)}
        if limit == WHOLE:
            self.shown[path] = b" | ".join(PRINTABLE.findall(data[: 4 * SHOWN_PER_FILE])).decode()[:SHOWN_PER_FILE]
        if path.startswith("/proc/"):
            for word in re.split(rb"[\x00\s=:,]", data):
                if word.startswith(b"/") and len(word) < 4096:
                    self.paths.add(os.fsdecode(word))

    def walk(self, folder, depth=0):
        """Every file under ``folder`` it may list and read (symlinks followed: one more way in)."""
        if depth > MAX_DEPTH:
            return
        self.tried += 1
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        for entry in entries:
            try:
                if entry.is_dir():
                    self.walk(entry.path, depth + 1)
                else:
                    self.try_read(entry.path, WHOLE)
            except OSError:
                continue

    def around(self, start):
        """Every folder above ``start``: its files, the ladder's files in it (tried even where the
        folder cannot be listed), and, in a ladder's folder, its folders, walked."""
        for folder in [start, *start.parents]:
            if folder in self.visited:
                continue
            self.visited.add(folder)
            for name in LADDER_FILES:
                self.try_read(folder / name, WHOLE)
            if not str(folder).startswith(KERNEL):
                try:
                    for entry in os.scandir(folder):
                        if entry.is_file():
                            self.try_read(entry.path)
                except OSError:
                    pass
            if any(os.path.lexists(folder / name) for name in LADDER_FILES):  # a ladder's folder
                for name in LADDER_FOLDERS:
                    self.walk(folder / name)

    def starts(self):
        """Where to start from: its own file, its mount points, and what /proc shows of processes."""
        found = {Path(__file__).resolve().parent, Path.cwd()}
        with contextlib.suppress(OSError):
            found |= {Path(line.split()[4]) for line in Path("/proc/self/mountinfo").read_text().splitlines()}
        # Its own and the visible pids, and those around its parent's: the host's worker, its zygote.
        near = range(max(1, os.getppid() - 64), os.getppid() + 64)
        pids = {"self", "1", *map(str, near)} | {pid for pid in os.listdir("/proc") if pid.isdigit()}
        roots = []
        for pid in sorted(pids):
            proc = Path("/proc") / pid
            for name in ("environ", "cmdline"):
                self.try_read(proc / name)
            links = [proc / "cwd", proc / "root", proc / "exe"]
            with contextlib.suppress(OSError):
                links += [proc / "fd" / fd for fd in os.listdir(proc / "fd")]
            for link in links:
                if "/fd/" in str(link):
                    self.try_read(link, WHOLE)
                with contextlib.suppress(OSError):
                    found.add(Path(os.readlink(link)))
            if pid not in ("self", str(os.getpid())) and os.access(proc / "root", os.R_OK):
                roots.append(proc / "root")  # another process's view of the filesystem
        found |= {Path(path) for path in self.paths}
        return found | {root / str(path).lstrip("/") for root in roots for path in found}

    def run(self):
        for start in sorted(self.starts()):
            if start.is_absolute():
                self.around(start if start.is_dir() else start.parent)
        own = str(Path(__file__).resolve())
        self.try_read(own)
        for path, shown in sorted(self.shown.items()):
            print(f"{MARK} {path}: {shown}", flush=True)
        print(f"SNOOP-OWN-FILE {'read' if own in self.read else 'unreadable'}", flush=True)
        print(f"SNOOP-SECRETS {' '.join(sorted(self.secrets)) or 'none'}", flush=True)
        print(f"SNOOP-DONE tried {self.tried}, read {len(self.read)} files", flush=True)


def _read_all(fd, limit):
    chunks, size = [], 0
    while size < limit and (chunk := os.read(fd, 1 << 20)):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


class Snoop(NoopPolicy):
    def __init__(self, policy_env_info, **kwargs):
        super().__init__(policy_env_info)
        Snooper().run()


if __name__ == "__main__":
    Snooper().run()
