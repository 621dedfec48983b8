"""A submission's own packages: its requirements resolved and installed once with uv, layered on the host's.

A spec may declare ``requirements`` (pip requirement lines; ``policybox.spec`` also reads a submission
folder's ``requirements.txt``). ``with_environment`` gives the spec its environment, as its last import
root, which its cells put on their import path before they import the policy:

* **Resolved against the host.** uv resolves the requirements with every package installed here
  pinned at its installed version (a constraints file), so policybox, the game and their pins stay the
  host's: a requirement that conflicts with one is refused with uv's message, which names both.
* **A layer, not a copy.** Of the resolved set, only what the host lacks is installed (``uv pip install
  --target --no-deps``), into a folder named by the hash of that locked set: equal sets share one
  folder, and a set already built builds nothing. Because the layer never holds a package the host
  has, the host's zygote (numpy, the game, torch if preloaded) serves every environment: a cell's
  start-up is the host's.
* **Wheels, unless sdists are allowed.** ``--only-binary :all:``: an sdist would run its own code at
  build time, on the host. With ``sdists`` allowed, requirements that wheels alone cannot meet are
  resolved and installed again in a cell (``policybox.files.build_policy``): under the settings'
  sandbox and limits, as a setup script runs, with no network -- offline, from the local folders of
  the package source (find-links folders, ``file://`` indexes), bound in read-only -- and what it
  made is harvested (``policybox.files.cell_jobs``).
* **From the organiser's index.** What the host's ``pip install`` reaches by default (pip's configured
  index, extra indexes and find-links, read with ``pip config list``, and its constraint files), or
  the settings' ``index_url`` and ``find_links`` instead. uv reads no pip configuration itself, so it
  is passed on explicitly.
* **Read-only to cells.** The folder is root's (mode 700 at the top); a cell sees its own layer only,
  bound read-only into its private view like its policy files.

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
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from packaging.utils import canonicalize_name

from policybox.errors import PolicyboxError, SpecError
from policybox.files.build_policy import CONSTRAINTS, HOST, LOCK, REQUIREMENTS, SITE, layer_pins
from policybox.inert import inert
from policybox.settings import EpisodeSettings
from policybox.spec import PolicySpec
from policybox.storage import StorageFull, what_ran_out, writing
from policybox.submission import private_folder

BUILD_TIMEOUT_S = 600.0
MAX_ENVIRONMENT_BYTES = 4 * 1024**3
MESSAGE_CHARS = 1500  # of uv's output, in a refusal
# How uv says a write failed for a full filesystem (Rust's io::Error: "... (os error 28)").
# How uv says a package has no wheel that fits (with --only-binary :all:, its --no-build).
NO_WHEEL = ("has no usable wheels", "building from source is disabled")
FULL_DISK = {f"(os error {errno.ENOSPC})": errno.ENOSPC, f"(os error {errno.EDQUOT})": errno.EDQUOT}
REQUESTS = "requests"
BUILDER = "policybox.files.build_policy.BuildEnvironment"
PIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+")  # what uv's lock lines are (no markers: one host)


class EnvironmentRefused(PolicyboxError):
    """A spec's requirements cannot be built: unknown, conflicting with the host, no wheel, too big or
    slow, or the index unreachable. The message names the policy and gives uv's reason. (A full disk is
    no fault of the policy's: that is ``StorageFull``.)"""


@dataclass(frozen=True)
class PackageSource:
    """Where environments' packages come from: an index URL, extra indexes and find-links folders, and
    the constraint files that cap what may be taken from them (pip's configured ones)."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    no_index: bool = False  # find-links only: a wheelhouse, offline
    constraints: tuple[str, ...] = ()
    sdists: EpisodeSettings | None = None  # sdists allowed: the settings their build's cell runs under

    def local(self) -> PackageSource:
        """Only the sources on this machine's disk: its find-links folders and ``file://`` indexes."""
        indexes = [url for url in (self.index_url, *self.extra_index_urls) if url and _is_local(url)]
        links = tuple(link for link in self.find_links if _is_local(link))
        return PackageSource(indexes[0] if indexes else None, tuple(indexes[1:]), links, no_index=not indexes)

    def folders(self) -> list[str]:
        """The folders the sources are in."""
        urls = [url for url in (self.index_url, *self.extra_index_urls, *self.find_links) if url]
        return [url.removeprefix("file://") for url in urls if _is_local(url)]

    def uv_arguments(self) -> list[str]:
        arguments = ["--no-index"] if self.no_index else []
        arguments += ["--index-url", self.index_url] if self.index_url else []
        arguments += [arg for url in self.extra_index_urls for arg in ("--extra-index-url", url)]
        return arguments + [arg for link in self.find_links for arg in ("--find-links", link)]

    def uv_constraints(self) -> list[str]:
        """What resolving adds: pip's constraint files (installing takes a locked set: none)."""
        return [arg for path in self.constraints for arg in ("--constraint", path)]


def package_source(settings: EpisodeSettings) -> PackageSource:
    """The settings' index and find-links if either is given (find-links alone: those folders only, no
    index), else what the host's ``pip install`` reaches; with sdists if the settings allow them."""
    index_url, find_links = settings.index_url, settings.find_links
    if index_url or find_links:
        links = tuple(_absolute(link) for link in find_links)
        source = PackageSource(index_url, (), links, no_index=index_url is None)
    else:
        source = pip_configured_source()
    return dataclasses.replace(source, sdists=settings if settings.sdists else None)


def _absolute(link: str) -> str:
    """A find-links folder as an absolute path (uv runs elsewhere); a URL as it is."""
    return link if "://" in link else str(Path(link).expanduser().resolve())


def _is_local(url: str) -> bool:
    return "://" not in url or url.startswith("file://")


@cache
def pip_configured_source() -> PackageSource:
    """pip's configured index, extra indexes, find-links and constraint files (its files and PIP_*
    variables), each named once."""
    try:
        listed = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return PackageSource()  # no pip here: uv's own default (PyPI)
    values: dict[str, list[str]] = {}
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        name = key.rpartition(".")[2]
        values.setdefault(name, []).extend(value.strip().strip("'\"").split())
    index = values.get("index-url", [None])[-1]

    def listed_once(name: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(values.get(name, [])))

    extra, links, constraints = listed_once("extra-index-url"), listed_once("find-links"), listed_once("constraint")
    return PackageSource(index, extra, links, constraints=constraints)


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


def environment_of(spec: PolicySpec) -> str | None:
    """The layer a built spec imports from (``with_environment``), if any."""
    return next((p for p in spec.python_path if Path(p).name == SITE and (Path(p).parent / LOCK).is_file()), None)


def check_one_process(specs: Sequence[PolicySpec]) -> None:
    """Refuse, for inline mode, specs built in different environments: every policy then imports in this
    one process, which holds one version of a package -- the first imported -- for all of them."""
    layers = {layer for spec in specs if (layer := environment_of(spec))}
    if len(layers) > 1:
        raise SpecError(
            f"inline mode plays every policy in this process, which cannot hold {len(layers)} environments' "
            "packages at once: play these policies in process mode"
        )


def environment(requirements: Sequence[str], folder: Path, source: PackageSource, policy: str) -> Path:
    """The folder of the environment for ``requirements``: found, or resolved and built under ``folder``."""
    try:
        folder = private_folder(folder.absolute(), EnvironmentRefused)  # a spec's import roots are absolute
    except OSError as exc:  # --environments where no folder can be made
        raise EnvironmentRefused(
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
    """The environment for ``requirements`` in ``folder``: resolved with wheels only and installed, or
    found built; else, where a package has no wheel and sdists are allowed, built from source in a cell."""
    try:
        layer = _resolve(requirements, source, scratch, policy)
    except EnvironmentRefused as wheels_only:
        if source.sdists is None or not any(words in str(wheels_only) for words in NO_WHEEL):
            raise
        staged = _built_from_source(requirements, source, scratch, policy, wheels_only)
        # Named by the request, not by the lock its build wrote: the build's code could have written any
        # lock there, the name of another set's environment among them.
        return _kept(staged, folder / f"from-source-{_request(requirements, source)}", policy)
    built = folder / _name(layer)
    if (built / SITE).is_dir():
        return built
    return _kept(_install(layer, source, scratch, policy), built, policy)


@cache
def host_packages() -> tuple[str, ...]:
    """Every distribution importable here, as ``name==version`` pins (sorted)."""
    pins = {
        canonicalize_name(dist.metadata["Name"]): dist.version
        for dist in importlib.metadata.distributions()
        if dist.metadata["Name"]
    }
    return tuple(f"{name}=={version}" for name, version in sorted(pins.items()))


def _resolve(requirements: Sequence[str], source: PackageSource, scratch: Path, policy: str) -> list[str]:
    """The locked set uv resolves for ``requirements`` beside the host's packages, less what the host has."""
    (scratch / "requirements.in").write_text("\n".join(requirements) + "\n")
    (scratch / "host.txt").write_text("\n".join(host_packages()) + "\n")
    locked = _uv(
        ["pip", "compile", "requirements.in", "--constraint", "host.txt", *source.uv_constraints()]
        + ["--no-header", "--no-annotate"],
        source,
        scratch,
        policy,
        "cannot be resolved beside the host's packages",
    )
    return layer_pins(locked, set(host_packages()))


def _install(layer: list[str], source: PackageSource, scratch: Path, policy: str) -> Path:
    """Install the pins of ``layer`` into a new folder in ``scratch``, beside their ``lock.txt``: that folder."""
    staged = scratch / "environment"
    (staged / SITE).mkdir(parents=True)
    (staged / LOCK).write_text("".join(f"{pin}\n" for pin in layer))
    if layer:
        _uv(
            # Compiled now: a cell can write no bytecode, and would compile every module at each start.
            ["pip", "install", "--no-deps", "--compile-bytecode", "--target", SITE, "-r", LOCK],
            source,
            staged,
            policy,
            "cannot be installed",
        )
    return staged


def _built_from_source(
    requirements: Sequence[str], source: PackageSource, scratch: Path, policy: str, wheels_only: EnvironmentRefused
) -> Path:
    """The environment for ``requirements`` built in a cell, offline, from ``source``'s local folders,
    sdists allowed (``policybox.files.build_policy``), harvested into ``scratch``: that folder."""
    import uv  # the package ships the binary; imported here so that only building needs it

    from policybox.files.cell_jobs import run_job  # the episode loop, which imports this module for inline mode

    assert source.sdists is not None
    local = source.local()
    if not local.folders():
        raise EnvironmentRefused(
            f"{wheels_only}; sdists are allowed, but they are built offline, from local folders (--find-links "
            "DIR or a file:// index), and none is given"
        )
    request = scratch / "request"
    (request / CONSTRAINTS).mkdir(parents=True)
    (request / REQUIREMENTS).write_text("\n".join(requirements) + "\n")
    (request / HOST).write_text("\n".join(host_packages()) + "\n")
    for number, constraint in enumerate(source.constraints):
        (request / CONSTRAINTS / f"{number}.txt").write_text(Path(constraint).read_text())
    job = PolicySpec(
        class_path=BUILDER,
        data_path=str(request),
        python_path=local.folders(),  # bound read-only into the cell, as import roots are (wheels import nothing)
        init_kwargs={"uv": uv.find_uv_bin(), "source": local.uv_arguments()},
        name=f"build of {policy}",
    )
    why, tail = run_job(job, "the build from source", source.sdists, scratch / "built", BUILD_TIMEOUT_S)
    if why:
        told = inert(" ".join(f"{why}: {tail}".split())[-MESSAGE_CHARS:])
        raise EnvironmentRefused(
            f"policy {policy}: its requirements need a package built from source, and the build failed "
            f"(offline, from {', '.join(local.folders())}): {told}"
        )
    if not all(PIN.fullmatch(line) for line in (scratch / "built" / LOCK).read_text().splitlines()):
        raise EnvironmentRefused(
            f"policy {policy}: the build from source left a lock.txt of more than name==version pins"
        )
    return scratch / "built"


def _kept(staged: Path, built: Path, policy: str) -> Path:
    """The environment ``staged`` (``site/`` and ``lock.txt``) moved to ``built`` whole, unless it is over
    its size cap or ``built`` is there already: ``built``."""
    site = staged / SITE
    size = sum(path.stat().st_size for path in site.rglob("*") if path.is_file() and not path.is_symlink())
    if size > MAX_ENVIRONMENT_BYTES:
        raise EnvironmentRefused(
            f"policy {policy}: its environment is {size / 1024**2:.0f} MiB, over the cap of "
            f"{MAX_ENVIRONMENT_BYTES / 1024**2:.0f} MiB"
        )
    _readable_not_writable(site)
    staged.chmod(0o755)
    with contextlib.suppress(FileExistsError, OSError):  # built meanwhile by another process: keep theirs
        staged.rename(built)
    if not (built / SITE).is_dir():
        raise EnvironmentRefused(f"policy {policy}: its environment could not be moved into {built.parent}")
    return built


def _uv(arguments: list[str], source: PackageSource, cwd: Path, policy: str, failed: str) -> str:
    import uv  # the package ships the binary; imported here so that only building needs it

    command = [uv.find_uv_bin(), *arguments, "--python", sys.executable, "--only-binary", ":all:"]
    command += source.uv_arguments()
    environment = {**os.environ, "UV_NO_CONFIG": "1", "NO_COLOR": "1"}
    try:
        done = subprocess.run(
            command, cwd=cwd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, env=environment, check=False
        )
    except subprocess.TimeoutExpired:
        raise EnvironmentRefused(
            f"policy {policy}: its requirements {failed}: uv took longer than {BUILD_TIMEOUT_S:g} s"
        ) from None
    if done.returncode != 0:
        if ran_out := next((number for text, number in FULL_DISK.items() if text in done.stderr), None):
            raise StorageFull(cwd, what_ran_out(ran_out, cwd), "building an environment in")  # not the policy's
        message = inert(" ".join(done.stderr.split())[-MESSAGE_CHARS:])  # uv's lines as one
        raise EnvironmentRefused(f"policy {policy}: its requirements {failed}: {message}")
    return done.stdout


def _readable_not_writable(site: Path) -> None:
    """Every file readable by every user (cells have their own uids), writable by none but root."""
    for path in [site, *site.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)


def _request(requirements: Sequence[str], source: PackageSource) -> str:
    """A request's key: its requirements, where packages come from (sdists or not), and the host's packages."""
    where = [*source.uv_arguments(), *source.uv_constraints(), *(["sdists"] if source.sdists else [])]
    return _digest(json.dumps([sorted(requirements), where, host_packages()]))


def _name(layer: Sequence[str]) -> str:
    """An environment's folder name: the hash of its locked set, for this Python."""
    return _digest("\n".join([_python_tag(), *layer]))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _python_tag() -> str:
    return f"cp{sys.version_info.major}{sys.version_info.minor}-{sys.platform}"


def _write(path: Path, text: str) -> None:
    staged = path.with_name(f".{path.name}.{os.getpid()}")
    staged.write_text(text)
    staged.replace(path)
