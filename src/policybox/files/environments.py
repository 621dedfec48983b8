"""A submission's own packages: its requirements resolved and installed once with uv, layered on the host's.

A spec may declare ``requirements`` (pip requirement lines; ``policybox.spec`` also reads a submission
folder's ``requirements.txt``). ``with_environment`` gives the spec its environment, as its last import
root (``policybox.layers``), which its cells put on their import path before they import the policy:

* **Built in cells, never on the host.** Resolving, downloading, unpacking, installing and
  byte-compiling are each a job in a cell of their own (``policybox.files.build_policy``, run by
  ``policybox.files.cell_jobs``): under the settings' sandbox, its own uid and CPU limit, its memory
  cgroup inside the host's budget, and a scratch tmpfs of the settings' ``environment_limit_mb`` as
  its disk, which holds uv's cache and temporary files too and is gone with the cell. The host only
  harvests what the cell made (nothing followed, within the cap) and moves it into place. A build
  over a cap -- disk, files, memory, time -- is refused naming the cap.
* **Resolved against the host.** uv resolves the requirements with every package installed here
  pinned at its installed version (a constraints file), so policybox, the game and their pins stay the
  host's: a requirement that conflicts with one is refused with uv's message, which names both.
* **A layer, not a copy.** Of the resolved set, only what the host lacks is installed (``uv pip install
  --target --no-deps``), into a folder named by the hash of that locked set: equal sets share one
  folder, and a set already built is found by its lock, from the first cell, before anything is
  installed. Because the layer never holds a package the host has, the host's zygote (numpy, the
  game, torch if preloaded) serves every environment: a cell's start-up is the host's.
* **Wheels, unless sdists are allowed.** ``--only-binary :all:``, so no package's own code runs while
  it is built, and a wheels-only build's cells may keep the host's network when the source is not all
  on this disk (an index over HTTP): uv installing wheels runs no package code. With ``sdists``
  allowed, requirements that wheels alone cannot meet are built again from source, where package
  code runs: with no network -- offline, from the local folders of the package source (find-links
  folders, ``file://`` indexes), bound in read-only -- and named by the request, never by the lock
  such a build hands back.
* **From the organiser's index, as pip takes it** (``policybox.files.package_source``). What the host's
  ``pip install`` reaches by default (pip's configured index, extra indexes and find-links, read with
  ``pip config list``, and its constraint files), or the settings' ``index_url`` and ``find_links``
  instead; with more than one index, the best version across all of them, as pip chooses (uv's
  ``unsafe-best-match``). uv reads no pip configuration itself, so it is passed on explicitly.
* **Read-only to cells.** The folder is root's (mode 700 at the top); a cell sees its own layer only,
  bound read-only into its private view like its policy files.

A refusal (``EnvironmentRefused``) has a public reason, which names no path of the host's and quotes
no uv output, and a detail -- uv's own words, naming the organiser's indexes and folders -- for the
policy's owner.

Why uv and not pip: uv resolves and installs in a second where pip takes tens (it is what MettaGrid's
policy server uses for the same job), and it can resolve against constraints without installing.
A request -- the requirements, the index settings and the host's packages -- is remembered with the
folder it resolved to, so the next spec that asks the same finds it without resolving again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import importlib.metadata
import json
import os
import re
import tempfile
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from packaging.utils import canonicalize_name

from policybox.errors import PolicyboxError
from policybox.files.build_policy import (
    BUILT,
    CERT,
    CONSTRAINTS,
    HOST,
    INSTALLING,
    OUT_OF_MEMORY,
    REQUIREMENTS,
    environment_name,
)
from policybox.files.harvest import NOT_KEPT
from policybox.files.package_source import PackageSource, package_source
from policybox.files.setup_policy import TIMED_OUT
from policybox.inert import inert
from policybox.layers import LOCK, SITE, environment_of
from policybox.settings import EpisodeSettings
from policybox.spec import PolicySpec
from policybox.storage import writing
from policybox.submission import private_folder

BUILD_TIMEOUT_S = 600.0  # for a build's cell: resolving, and installing (and from source, again)
MAX_ENVIRONMENT_FILES = 100_000  # files and folders a build may make (its scratch tmpfs's inodes)
MAX_LOCK_BYTES = 1 << 20  # a lock is name==version lines: a big one is a build's forgery
MESSAGE_CHARS = 1500  # of uv's output, in a refusal's detail
# How uv says a package has no wheel that fits (with --only-binary :all:, its --no-build).
NO_WHEEL = ("has no usable wheels", "building from source is disabled")
NO_SPACE = os.strerror(errno.ENOSPC)  # a full tmpfs, in uv's words ("... (os error 28)") and Python's
REQUESTS = "requests"
BUILDER = "policybox.files.build_policy.BuildEnvironment"
PIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+")  # what uv's lock lines are (no markers: one host)
INSTALL_FAILED = "its requirements cannot be installed"  # uv's resolve went through, its install did not
RESOLVE_FAILED = "its requirements cannot be resolved beside the host's packages"
FROM_SOURCE_FAILED = "its requirements need a package built from source, and the build failed"


class EnvironmentRefused(PolicyboxError):
    """A spec's requirements cannot be built: unknown, conflicting with the host, no wheel, over a cap,
    or the index unreachable. ``public`` says why in one line that names no path of the host's and
    quotes no uv output (for everyone); ``detail`` is uv's or the build's own output, which names the
    organiser's indexes and folders (for the policy's owner alone). The message is both, naming the
    policy, for the operator. (A full disk of the host's is no fault of the policy's: that is
    ``StorageFull``.)"""

    def __init__(self, policy: str, public: str, detail: str = "") -> None:
        super().__init__(f"policy {policy}: {public}" + (f": {detail}" if detail else ""))
        self.policy, self.public, self.detail = policy, public, detail

    def __reduce__(self) -> tuple[type[EnvironmentRefused], tuple[str, str, str]]:
        return type(self), (self.policy, self.public, self.detail)  # pickled whole: a Ray node raises it


def default_folder() -> Path:
    """Where ``policybox run`` keeps environments unless told: the user's cache."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "policybox" / "environments"


def with_environments(specs: Sequence[PolicySpec], settings: EpisodeSettings, default: Path) -> list[PolicySpec]:
    """``specs``, each with requirements given its environment (``with_environment``), built under the
    settings' ``environments`` folder or else ``default``, from their index and find-links."""
    if not any(spec.requirements for spec in specs):
        return list(specs)
    folder = Path(settings.environments) if settings.environments else default
    source = package_source(settings)
    return [with_environment(spec, folder, source) for spec in specs]


def with_environment(spec: PolicySpec, folder: Path, source: PackageSource, shown: str | None = None) -> PolicySpec:
    """``spec`` with its environment's layer (built if need be) as its last import root and no requirements
    left to build; as it is if it declares none. EnvironmentRefused says why one cannot be built, naming
    the policy as ``shown`` (default: its display name)."""
    if not spec.requirements:
        return spec
    site = str(environment(spec.requirements, folder, source, shown or spec.display_name) / SITE)
    return spec.model_copy(update={"python_path": [*spec.python_path, site], "requirements": []})


def built_before(requirements: Sequence[str], folder: Path, source: PackageSource) -> Path | None:
    """The environment an earlier call built for this request (the same requirements, source and host
    packages), if it is still there; nothing is resolved or built."""
    try:
        known = folder / (folder / REQUESTS / f"{_request(requirements, source)}.txt").read_text().strip()
    except FileNotFoundError:
        return None
    return known if (known / SITE).is_dir() else None


def unused(folder: Path, used: set[Path]) -> list[Path]:
    """The environments under ``folder`` not in ``used`` (a build under way, a hidden folder, is not one)."""
    if not folder.is_dir():
        return []
    built = [path for path in folder.iterdir() if path.is_dir() and path.name != REQUESTS and path.name[0] != "."]
    return [path for path in built if path not in used]


def forget_removed(folder: Path) -> None:
    """Drop the remembered requests whose environment is no longer there."""
    for memo in (folder / REQUESTS).glob("*.txt"):
        if not (folder / memo.read_text().strip()).is_dir():
            memo.unlink(missing_ok=True)


def as_locked(spec: PolicySpec) -> PolicySpec:
    """A built spec as another machine builds it again: its layer's locked pins as its requirements,
    and no import root of this machine's. Equal host packages there resolve them to the same set, so
    to a folder of the same name (a Ray node's copy); a spec without an environment as it is."""
    site = environment_of(spec)
    if site is None:
        return spec
    lock = (Path(site).parent / LOCK).read_text().split()
    python_path = [entry for entry in spec.python_path if entry != site]
    return spec.model_copy(update={"python_path": python_path, "requirements": lock})


def environment(requirements: Sequence[str], folder: Path, source: PackageSource, policy: str) -> Path:
    """The folder of the environment for ``requirements``: found, or resolved and built under ``folder``."""
    try:
        folder = private_folder(folder.absolute(), PolicyboxError)  # a spec's import roots are absolute
    except OSError as exc:  # --environments where no folder can be made: the operator's to fix
        raise PolicyboxError(
            f"cannot make the environments' folder {folder} ({exc.strerror}): give --environments a folder "
            "that can be made and written"
        ) from None
    if (known := built_before(requirements, folder, source)) is not None:
        return known
    memo = folder / REQUESTS / f"{_request(requirements, source)}.txt"
    with writing(folder, "building an environment in"):
        with tempfile.TemporaryDirectory(prefix=".building-", dir=folder) as scratch:
            built = _built(requirements, source, Path(scratch), folder, policy)
        memo.parent.mkdir(mode=0o700, exist_ok=True)
        _write(memo, built.name)
    return built


def _built(requirements: Sequence[str], source: PackageSource, scratch: Path, folder: Path, policy: str) -> Path:
    """The environment for ``requirements`` in ``folder``: built from wheels alone, or found built; else,
    where a package has no wheel and sdists are allowed, built from source, offline."""
    try:
        return _build(requirements, dataclasses.replace(source, sdists=False), scratch / "wheels", folder, policy)
    except EnvironmentRefused as wheels_only:
        if not source.sdists or not any(words in wheels_only.detail for words in NO_WHEEL):
            raise
        refused = wheels_only
    local = source.local()
    if not local.folders():
        raise EnvironmentRefused(
            policy,
            f"{refused.public}; sdists are allowed, but they are built offline, from local folders "
            "(--find-links DIR or a file:// index), and none is given",
            refused.detail,
        )
    # Named by the request, not by the lock its build wrote: the build's code could have written any lock
    # there, the name of another set's environment among them.
    named = folder / f"from-source-{_request(requirements, source)}"
    return named if (named / SITE).is_dir() else _build(requirements, local, scratch / "sources", folder, policy, named)


def _build(
    requirements: Sequence[str],
    source: PackageSource,
    scratch: Path,
    folder: Path,
    policy: str,
    named: Path | None = None,
) -> Path:
    """The environment for ``requirements`` from ``source``, built in a cell and kept in ``folder`` under
    the hash of its lock, or as ``named``; or the environment of that lock, if the folder holds it (the
    cell is told which it holds, and then installs nothing)."""
    known = [] if named else [path.name for path in folder.iterdir() if (path / SITE).is_dir()]
    staged = _in_cell(_request_files(requirements, source, known, scratch / "request"), source, scratch, policy)
    layer = _pins(staged / LOCK, policy)
    built = named or folder / environment_name(layer)
    if (built / SITE).is_dir():
        return built
    if not layer:
        (staged / SITE).mkdir(exist_ok=True)  # an empty layer: the host has it all
    elif not named and not (staged / SITE).is_dir():  # the cell found it built, and a prune has removed it since
        return _build(requirements, source, scratch / "again", folder, policy)
    return _kept(staged, built, policy)


def _request_files(requirements: Sequence[str], source: PackageSource, known: list[str], request: Path) -> Path:
    """The request a build's cell reads, as a folder: the requirements, the host's packages, pip's
    constraint files and certificate bundle, and the names of the environments ``known`` to be built."""
    (request / CONSTRAINTS).mkdir(parents=True)
    (request / REQUIREMENTS).write_text("\n".join(requirements) + "\n")
    (request / HOST).write_text("\n".join(host_packages()) + "\n")
    (request / BUILT).write_text("".join(f"{name}\n" for name in known))
    copies = {request / CONSTRAINTS / f"{number}.txt": path for number, path in enumerate(source.constraints)}
    for copy, path in {**copies, **({request / CERT: source.cert} if source.cert else {})}.items():
        try:
            copy.write_bytes(Path(path).read_bytes())  # copied: the cell sees no folder of the host's
        except FileNotFoundError:  # pip's configuration names it: the operator's to fix
            raise PolicyboxError(f"pip's configuration names {path}, which is not there") from None
    return request


@cache
def host_packages() -> tuple[str, ...]:
    """Every distribution importable here, as ``name==version`` pins (sorted)."""
    pins = {
        canonicalize_name(dist.metadata["Name"]): dist.version
        for dist in importlib.metadata.distributions()
        if dist.metadata["Name"]
    }
    return tuple(f"{name}=={version}" for name, version in sorted(pins.items()))


def _in_cell(request: Path, source: PackageSource, scratch: Path, policy: str) -> Path:
    """Build ``request`` (``policybox.files.build_policy``) in a cell of its own, under the build's
    settings (``build_settings``), and harvest what it made: the folder it is in, in ``scratch``. The
    cell keeps the host's network for a wheels-only build from a source not all on this disk alone: no
    entrant code runs there."""
    import uv  # the package ships the binary; imported here so that only building needs it

    from policybox.files.cell_jobs import run_job  # the episode loop, which imports this module for inline mode

    job = PolicySpec(
        class_path=BUILDER,
        data_path=str(request),
        python_path=source.folders(),  # bound read-only into the cell, as import roots are (wheels import nothing)
        init_kwargs={"uv": uv.find_uv_bin(), "source": source.build_arguments()},
        name=f"build of {policy}",
    )
    online = not source.sdists and not source.is_local()
    settings, out = build_settings(source.settings), scratch / "harvested" / "environment"  # its parent: private
    why, tail = run_job(job, "the build", settings, out, BUILD_TIMEOUT_S, online=online)
    if why:
        raise _refusal(policy, source, why, tail)
    return out


def build_settings(settings: EpisodeSettings) -> EpisodeSettings:
    """The settings a build's cell runs under: their sandbox and limits, but a scratch tmpfs -- uv's
    cache and temporary files, and the environment -- of the environment's cap, with as many files and
    any one of them as big; for memory, a cell's own limit on top of that disk, since a tmpfs's pages
    count as its cell's memory. Spawned: a build imports nothing a zygote would have ready, and a zygote
    of its own would cost more to start than the cell."""
    cap, limits = settings.environment_limit_mb, settings.limits
    build = {"disk_limit_mb": cap, "disk_limit_files": MAX_ENVIRONMENT_FILES, "file_size_limit_mb": cap}
    limits = limits.model_copy(update={**build, "memory_limit_mb": limits.memory_limit_mb + cap})
    return settings.model_copy(update={"limits": limits, "launcher": "spawn"})


def _refusal(policy: str, source: PackageSource, why: str, tail: str) -> EnvironmentRefused:
    """A build that failed ``why``, its output ending ``tail``, as a refusal: in public, the cap it ran
    into, if it ran into one, else the step that failed; in detail, its own words."""
    limits = build_settings(source.settings).limits
    if OUT_OF_MEMORY in why:  # the build's cell counted an OOM kill, or the host did, of the cell itself
        public = f"its build ran out of memory (limit {limits.memory_limit_mb} MiB)"
    elif TIMED_OUT in why:
        public = f"its build took longer than {BUILD_TIMEOUT_S:g} s, the cap"
    elif NO_SPACE in f"{why} {tail}":
        public = (
            f"its environment needs more than {limits.disk_limit_mb} MiB of disk or {limits.disk_limit_files} "
            "files, the cap"
        )
    elif NOT_KEPT in why:  # over the cap where no tmpfs held it (no root), or not plain files and folders
        public = (
            f"what its build made cannot be kept: more than {limits.disk_limit_mb} MiB or "
            f"{limits.disk_limit_files} files, or not plain files and folders"
        )
    else:
        public = FROM_SOURCE_FAILED if source.sdists else INSTALL_FAILED if INSTALLING in why else RESOLVE_FAILED
    where = f"offline, from {', '.join(source.folders())}: " if source.sdists else ""
    return EnvironmentRefused(policy, public, inert(" ".join(f"{where}{why}: {tail}".split())[-MESSAGE_CHARS:]))


def _pins(lock: Path, policy: str) -> list[str]:
    """The pins of a lock a build's cell made (harvested: a plain file of ours), refused unless it is
    a few name==version lines: a build from source has its code's say in it."""
    try:
        pins = lock.read_text(encoding="utf-8").splitlines() if lock.stat().st_size <= MAX_LOCK_BYTES else [""]
    except (OSError, UnicodeDecodeError):
        pins = [""]
    if not all(PIN.fullmatch(pin) for pin in pins):
        raise EnvironmentRefused(policy, "its build left a lock.txt of more than name==version pins")
    return pins


def _kept(staged: Path, built: Path, policy: str) -> Path:
    """The environment ``staged`` (``site/`` and ``lock.txt``, harvested: readable by every user and
    writable by root alone) moved to ``built`` whole, unless ``built`` is there already: ``built``."""
    if not (staged / SITE).is_dir():
        raise EnvironmentRefused(policy, "its build made no site folder")
    staged.chmod(0o755)
    with contextlib.suppress(FileExistsError, OSError):  # built meanwhile by another process: keep theirs
        staged.rename(built)
    if not (built / SITE).is_dir():
        raise EnvironmentRefused(policy, "its environment could not be moved into place", str(built.parent))
    return built


def _request(requirements: Sequence[str], source: PackageSource) -> str:
    """A request's key: its requirements, where packages come from (sdists or not), and the host's packages."""
    where = [*source.uv_arguments(), *source.constraints, *(["sdists"] if source.sdists else [])]
    return _digest(json.dumps([sorted(requirements), where, host_packages()]))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _write(path: Path, text: str) -> None:
    staged = path.with_name(f".{path.name}.{os.getpid()}")
    staged.write_text(text)
    staged.replace(path)
