"""BuildEnvironment: the job that builds a spec's environment with uv, in a cell of its own.

``policybox.files.environments`` builds every environment in a cell (``policybox.files.cell_jobs``),
never on the host. Its checkpoint is the request, bound read-only: the requirements, the host's
packages as constraints, pip's constraint files and certificate bundle, and the names of the
environments the host has built already. It runs uv twice: ``pip compile`` of the requirements
against the constraints, which leaves ``lock.txt`` in ``COPY`` -- the pins of the resolved set that
the host lacks -- and then, unless that set is empty or the host has it built already (by its name,
``environment_name``), ``pip install --no-deps --compile-bytecode --target`` of the lock, which leaves
``site/`` beside it.

Where packages come from, and how they may be taken, is the host's to say (``source``: uv's index and
find-links arguments, its index strategy, ``--only-binary :all:`` unless sdists are allowed,
``--offline`` for a source all on local disk). Everything uv downloads, unpacks, caches and
byte-compiles stays in the cell's scratch folder -- uv's cache and ``TMPDIR`` are there -- which is a
tmpfs of the environment's cap, inside the cell's memory limit, and gone with the cell. The host
harvests ``COPY``.

A build that fails says how. uv does not say that the kernel's OOM killer took one of its processes
(a byte-compiling worker, most likely), but the cell's memory cgroup counts it: then the reason says
``OUT_OF_MEMORY``.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from packaging.utils import canonicalize_name

from policybox.files.setup_policy import COPY, CellJob
from policybox.layers import LOCK, SITE

REQUIREMENTS = "requirements.in"
HOST = "host.txt"
CONSTRAINTS = "constraints"
BUILT = "built.txt"
CERT = "cert.pem"  # the certificate bundle an index over HTTPS is checked against, if the host has one
LOCKED = "locked.txt"
OUT_OF_MEMORY = "out of memory"
RESOLVING, INSTALLING = "uv (resolving)", "uv (installing)"  # how the job names its two commands
# Where a process's memory cgroup counts the OOM killer's kills ("oom_kill N"), by /proc/self/cgroup's
# controllers field: v1's memory hierarchy, or v2's single one.
OOM_COUNTERS = {"memory": "/sys/fs/cgroup/memory{}/memory.oom_control", "": "/sys/fs/cgroup{}/memory.events"}


class BuildEnvironment(CellJob):
    """Builds the request with ``uv`` (a path), given where and how to take packages (``source``: uv's
    arguments)."""

    def __init__(
        self,
        *env_info: object,
        uv: str,
        source: list[str],
        timeout_s: float,
        workdir: str | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(*env_info, timeout_s=timeout_s, workdir=workdir)
        self._uv_binary, self._source = uv, source

    def run(self, files: Path, tail: bytearray) -> str | None:
        failure = self._build(files, self._workdir / COPY, tail)
        return f"{failure} ({OUT_OF_MEMORY})" if failure and _oom_kills() else failure

    def _build(self, files: Path, out: Path, tail: bytearray) -> str | None:
        out.mkdir()
        constraints = [arg for path in sorted((files / CONSTRAINTS).glob("*")) for arg in ("--constraint", str(path))]
        resolve = ["pip", "compile", str(files / REQUIREMENTS), "--constraint", str(files / HOST), *constraints]
        resolve += ["--no-header", "--no-annotate", "--output-file", LOCKED]
        if failure := self._uv(RESOLVING, resolve, files, tail):
            return failure
        have = set((files / HOST).read_text().split())
        layer = layer_pins((self._workdir / LOCKED).read_text(), have)
        (out / LOCK).write_text("".join(f"{pin}\n" for pin in layer))
        if not layer or environment_name(layer) in (files / BUILT).read_text().split():
            return None  # nothing to install, or the host has this set already
        (out / SITE).mkdir()
        # Compiled now: a cell can write no bytecode, and would compile every module at each start.
        install = ["pip", "install", "--no-deps", "--compile-bytecode", "--target", str(out / SITE)]
        return self._uv(INSTALLING, [*install, "-r", str(out / LOCK)], files, tail)

    def _uv(self, what: str, arguments: list[str], files: Path, tail: bytearray) -> str | None:
        cache, temp = self._workdir / "cache", self._workdir / "tmp"
        temp.mkdir(exist_ok=True)
        env = {**os.environ, "UV_CACHE_DIR": str(cache), "TMPDIR": str(temp), "UV_NO_CONFIG": "1", "NO_COLOR": "1"}
        if (files / CERT).is_file():  # what the host's pip trusts: a cell has none of the host's variables
            env["SSL_CERT_FILE"] = str(files / CERT)
        command = [self._uv_binary, *arguments, "--python", sys.executable, *self._source]
        return self.command(what, command, self._workdir, tail, env)


def environment_name(layer: Sequence[str]) -> str:
    """An environment's folder name: the hash of its locked set, for this Python."""
    python = f"cp{sys.version_info.major}{sys.version_info.minor}-{sys.platform}"
    return hashlib.sha256("\n".join([python, *layer]).encode()).hexdigest()[:32]


def _oom_kills() -> int:
    """How many of this cell's processes the kernel's OOM killer killed, as its memory cgroup counts
    them (0 where no count can be read)."""
    kills = 0
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        _, controllers, path = line.split(":", 2)
        counter = next((file for key, file in OOM_COUNTERS.items() if key in controllers.split(",")), None)
        for entry in _read(Path(counter.format(path))).splitlines() if counter else []:
            key, _, value = entry.partition(" ")
            kills += int(value) if key == "oom_kill" and value.strip().isdigit() else 0
    return kills


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def layer_pins(locked: str, have: set[str]) -> list[str]:
    """The pins of uv's locked output (``name==version`` lines) that are not among ``have``, the host's
    pins (canonical names), sorted."""
    pins = [line.strip() for line in locked.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return sorted(pin for pin in pins if canonical_pin(pin) not in have)


def canonical_pin(pin: str) -> str:
    """``Name[extra]==1.0 ; marker`` as ``name==1.0``."""
    name, _, version = pin.partition("==")
    return f"{canonicalize_name(name.split('[')[0].strip())}=={version.split(';')[0].strip()}"
