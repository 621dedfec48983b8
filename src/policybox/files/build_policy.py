"""BuildEnvironment: the policy under which an environment is built from source (sdists), in a cell of its own.

``policybox.files.environments`` starts it when the organiser allows sdists and a spec's requirements
cannot be met with wheels alone. Its checkpoint is the request folder (bound read-only): the
requirements, the host's packages as constraints (and pip's constraint files). It runs uv twice, as
the host does for wheels -- ``pip compile`` against the constraints, then ``pip install --no-deps
--target`` of what the host lacks -- but here, where a package's build may run any code it likes:
under the cell's sandbox and limits, able to write only its scratch folder, with no network
(``--offline``: the packages come from the local folders the host bound in). What it leaves in
``COPY`` -- ``lock.txt`` and ``site/`` -- the host harvests and keeps.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from packaging.utils import canonicalize_name

from policybox.files.setup_policy import COPY, CellJob

REQUIREMENTS = "requirements.in"
HOST = "host.txt"
CONSTRAINTS = "constraints"
LOCKED = "locked.txt"
LOCK = "lock.txt"
SITE = "site"


class BuildEnvironment(CellJob):
    """Resolves and installs the request with ``uv`` (a path), given where packages come from (``source``:
    uv's index and find-links arguments, all local)."""

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
        out = self._workdir / COPY
        (out / SITE).mkdir(parents=True)
        constraints = [arg for path in sorted((files / CONSTRAINTS).glob("*")) for arg in ("--constraint", str(path))]
        resolve = ["pip", "compile", str(files / REQUIREMENTS), "--constraint", str(files / HOST), *constraints]
        resolve += ["--no-header", "--no-annotate", "--output-file", LOCKED]
        if failure := self._uv("resolving", resolve, tail):
            return failure
        have = set((files / HOST).read_text().split())
        layer = layer_pins((self._workdir / LOCKED).read_text(), have)
        (out / LOCK).write_text("".join(f"{pin}\n" for pin in layer))
        if not layer:
            return None
        install = [
            "pip",
            "install",
            "--no-deps",
            "--compile-bytecode",
            "--target",
            str(out / SITE),
            "-r",
            str(out / LOCK),
        ]
        return self._uv("installing", install, tail)

    def _uv(self, what: str, arguments: list[str], tail: bytearray) -> str | None:
        cache, temp = self._workdir / "cache", self._workdir / "tmp"
        temp.mkdir(exist_ok=True)
        env = {**os.environ, "UV_CACHE_DIR": str(cache), "TMPDIR": str(temp), "UV_NO_CONFIG": "1", "NO_COLOR": "1"}
        command = [self._uv_binary, *arguments, "--python", sys.executable, "--offline", *self._source]
        return self.command(f"uv ({what})", command, self._workdir, tail, env)


def layer_pins(locked: str, have: set[str]) -> list[str]:
    """The pins of uv's locked output (``name==version`` lines) that are not among ``have``, the host's
    pins (canonical names), sorted."""
    pins = [line.strip() for line in locked.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return sorted(pin for pin in pins if canonical_pin(pin) not in have)


def canonical_pin(pin: str) -> str:
    """``Name[extra]==1.0 ; marker`` as ``name==1.0``."""
    name, _, version = pin.partition("==")
    return f"{canonicalize_name(name.split('[')[0].strip())}=={version.split(';')[0].strip()}"
