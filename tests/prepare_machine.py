"""Install the system packages the test suite needs, when they are missing: Debian's Chromium and its driver.

Run by the README's test command (and so by ``.ci/run``) before pytest, on every run: with everything
there it prints nothing and takes milliseconds; otherwise it runs ``apt-get update`` and ``apt-get
install`` and prints one line saying what it installed, or fails (exit 1) with one line saying why.
Python packages are the ``test`` extra's business, not this script's; PostgreSQL comes as a wheel.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Each program the tests run, and the Debian packages that bring it. fonts-dejavu-core: without
# recommends Chromium pulls no font, and a page with no font renders its text as nothing.
NEEDED = {
    "/usr/bin/chromium": ["chromium", "fonts-dejavu-core"],
    "/usr/bin/chromedriver": ["chromium-driver"],
}
# Recommends would add ~90 desktop packages (upower, printing, ...) a headless test never uses.
APT_INSTALL = ["apt-get", "install", "-y", "-q", "--no-install-recommends"]
# Another apt (a second test run, unattended upgrades) may hold the lock for a while: wait, do not fail.
APT_OPTIONS = ["-o", "DPkg::Lock::Timeout=300"]


class CannotPrepare(Exception):
    """This machine lacks something the tests need and it cannot be installed here."""


def missing_programs() -> list[str]:
    """The needed programs that are not on this machine."""
    return [program for program in NEEDED if not os.access(program, os.X_OK)]


def packages_for(programs: list[str]) -> list[str]:
    """The Debian packages that bring ``programs``, each once, in a stable order."""
    return list(dict.fromkeys(package for program in programs for package in NEEDED[program]))


def apt(arguments: list[str], log: Path) -> None:
    """Run one apt-get command, its output appended to ``log``; a failure raises with the first error."""
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    with log.open("a") as out:
        run = subprocess.run(
            [*arguments[:2], *APT_OPTIONS, *arguments[2:]],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=environment,
        )
    if run.returncode != 0:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
        # The first error says why (no network shows as update's "W: Failed to fetch ...", not as an error).
        errors = [line for line in lines if line.startswith(("E:", "W: Failed to fetch"))]
        reason = (errors or lines or ["no output"])[0]
        raise CannotPrepare(f"`{' '.join(arguments)}` failed (exit {run.returncode}): {reason} (full output: {log})")


def install(packages: list[str]) -> None:
    """``apt-get update``, then install ``packages``; raises ``CannotPrepare`` saying why it could not."""
    if shutil.which("apt-get") is None:
        raise CannotPrepare("this is not a Debian-like machine (no apt-get): install them by hand")
    if os.geteuid() != 0:
        raise CannotPrepare(f"installing them needs root: run `sudo apt-get install -y {' '.join(packages)}`")
    log = Path(tempfile.mkstemp(prefix="policybox-apt-", suffix=".log")[1])
    apt(["apt-get", "update", "-q"], log)
    apt([*APT_INSTALL, *packages], log)
    still_missing = missing_programs()
    if still_missing:
        raise CannotPrepare(f"apt-get succeeded, yet {', '.join(still_missing)} is still missing (output: {log})")
    log.unlink()


def main() -> int:
    programs = missing_programs()
    if not programs:
        return 0  # the usual case, on every test run: say nothing
    packages = packages_for(programs)
    try:
        install(packages)
    except CannotPrepare as error:
        print(f"prepare_machine: the tests need {' '.join(packages)}, missing here; {error}", file=sys.stderr)
        return 1
    print(f"prepare_machine: installed {' '.join(packages)} with apt-get")
    return 0


if __name__ == "__main__":
    sys.exit(main())
