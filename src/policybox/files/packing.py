"""A policy's files as one deterministic tar, for machines that share no filesystem with the driver.

On a cluster, cells run on nodes that cannot see the files a spec names. The driver packs each policy's
roots (the folder of its class file, its checkpoint, its ``python_path`` folders, its setup script's
folder) once with ``pack`` (in memory: a Ray object; ``pack_to`` streams the same tar into a file, as
``policybox.files.version_files`` keeps a version without ever holding its files in memory);
each node checks the content hash and unpacks the bundle with ``unpack`` into a root-only folder named
by that hash, and plays the spec ``relocate`` points there. Root i is stored as ``i/<its name>``, so a
checkpoint keeps its file name (a loader may go by its suffix; a policy's display name shows it).

The files are an entrant's and hostile. ``pack`` follows a symlink only if it stays inside its root, and
reads each file as ``policybox.untrusted_files`` reads an entrant's: opened part by part from its root
with ``O_NOFOLLOW``, never blocking, and only if ``fstat`` on it says it is a regular file -- so a file
swapped for a symlink or a FIFO after it was looked at is refused, and its size is what was opened.
``unpack`` trusts the archive no more than a submission zip (see ``policybox.submission``): a matching
hash proves the bytes arrived unchanged, not who made them, so only plain files and folders with
relative names below ``i/`` are written, with modes of our choosing.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import stat
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from policybox import untrusted_files
from policybox.errors import PolicyboxError, SpecError
from policybox.spec import PolicySpec, file_path
from policybox.submission import move_into_place, private_folder
from policybox.untrusted_files import Folder

MAX_BYTES = 2 * 1024**3
SKIPPED_FOLDERS = frozenset({"__pycache__"})
SKIPPED_SUFFIX = ".pyc"
FILE_TYPES = (tarfile.REGTYPE, tarfile.AREGTYPE)


class PackingError(PolicyboxError):
    """A policy's files cannot be packed, or a bundle cannot be unpacked safely; the message says which and why."""


@dataclass(frozen=True)
class Bundle:
    """A policy's files in one uncompressed tar, named by the sha256 of its bytes."""

    digest: str
    archive: bytes = field(repr=False)  # up to gigabytes: never in a log line
    roots: tuple[str, ...]


@dataclass(frozen=True)
class Packed:
    """What ``pack_to`` wrote into a file: the tar's sha256 and the roots it holds, in order."""

    digest: str
    roots: tuple[str, ...]


def spec_roots(spec: PolicySpec) -> list[Path]:
    """What the spec needs on another machine: the folder of its class file (importable in the cell, so
    its siblings come too), its checkpoint, its python_path folders, the folder of its setup script;
    a root inside another is dropped."""
    file_class = spec.file_and_class
    wanted = [Path(file_class[0]).parent] if file_class else []
    wanted += [Path(spec.data_path)] if spec.data_path else []
    wanted += [Path(entry) for entry in spec.python_path]
    wanted += [Path(spec.setup_script).parent] if spec.setup_script else []
    for path in wanted:
        if not path.is_absolute():
            raise PackingError(f"policy {spec.display_name}: {path} is not absolute (check the spec with check_spec)")
    unique = list(dict.fromkeys(wanted))
    return [root for root in unique if not any(root != other and root.is_relative_to(other) for other in unique)]


def pack(spec: PolicySpec, *, max_bytes: int = MAX_BYTES) -> Bundle | None:
    """The spec's roots in one tar whose bytes depend only on their contents, in memory; None if it needs no files."""
    buffer = io.BytesIO()
    packed = pack_to(spec, buffer, max_bytes=max_bytes)
    return None if packed is None else Bundle(packed.digest, buffer.getvalue(), packed.roots)


def pack_to(spec: PolicySpec, file: BinaryIO, *, max_bytes: int = MAX_BYTES) -> Packed | None:
    """``pack``'s tar written into ``file`` (empty, seekable), a file at a time; None if it needs no files."""
    roots = spec_roots(spec)
    if not roots:
        return None
    with tarfile.open(fileobj=file, mode="w", format=tarfile.PAX_FORMAT) as tar:
        packer = _Packer(tar, spec.display_name, max_bytes)
        for index, root in enumerate(roots):
            packer.add_root(index, root)
    if file.tell() > max_bytes:  # headers and padding can tip it over: unpack would refuse it
        raise PackingError(f"policy {spec.display_name}: its files come to more than {max_bytes} bytes")
    return Packed(_sha256(file), tuple(str(root) for root in roots))


def _sha256(file: BinaryIO) -> str:
    """The whole file's sha256, read a chunk at a time."""
    file.seek(0)
    # file_digest reads with readinto, which every binary file has but typeshed's BinaryIO does not declare.
    return hashlib.file_digest(file, "sha256").hexdigest()  # type: ignore[arg-type]


class _Packer:
    """Writes roots into one tar: entries sorted, owner and times zeroed, modes normalised, symlinks
    followed only inside their root, and stops as soon as the archive passes ``max_bytes``."""

    def __init__(self, tar: tarfile.TarFile, shown: str, max_bytes: int) -> None:
        self.tar = tar
        self.shown = shown
        self.max_bytes = max_bytes

    def add_root(self, index: int, root: Path) -> None:
        self.tar.addfile(_entry(str(index), tarfile.DIRTYPE, _mode(True)))
        try:
            self._add(root, f"{index}/{root.name}", root.resolve(), ())
        except OSError as exc:
            reason = exc.strerror or exc
            raise PackingError(f"policy {self.shown}: cannot pack {exc.filename or root}: {reason}") from None

    def _add(self, path: Path, name: str, inside: Path, ancestors: tuple[Path, ...]) -> None:
        real = path.resolve()
        if not real.is_relative_to(inside):
            raise PackingError(f"policy {self.shown}: {path} is a symlink to {real}, outside its root {inside}")
        info = os.stat(real)
        if stat.S_ISDIR(info.st_mode):
            self._add_folder(path, name, inside, (*ancestors, real))
        elif stat.S_ISREG(info.st_mode):
            self._add_file(real, name, Folder(inside, f"its root {inside}"))
        else:
            raise PackingError(f"policy {self.shown}: {path} is not a regular file or folder")

    def _add_folder(self, path: Path, name: str, inside: Path, ancestors: tuple[Path, ...]) -> None:
        if ancestors[-1] in ancestors[:-1]:
            raise PackingError(f"policy {self.shown}: {path} is a symlink to a folder that holds it (a loop)")
        self.tar.addfile(_entry(name, tarfile.DIRTYPE, _mode(True)))
        for child in sorted(os.listdir(path)):
            if child not in SKIPPED_FOLDERS and not child.endswith(SKIPPED_SUFFIX):
                self._add(path / child, f"{name}/{child}", inside, ancestors)

    def _add_file(self, real: Path, name: str, inside: Folder) -> None:
        try:
            with untrusted_files.opened(real, str(real), inside) as (file, info):
                if self.tar.offset + info.st_size > self.max_bytes:
                    raise PackingError(f"policy {self.shown}: its files come to more than {self.max_bytes} bytes")
                entry = _entry(name, tarfile.REGTYPE, _mode(False, info.st_mode & 0o111 != 0), info.st_size)
                self.tar.addfile(entry, file)
        except SpecError as exc:  # changed since it was looked at: a symlink or a FIFO now
            raise PackingError(f"policy {self.shown}: {exc}") from None


def _entry(name: str, kind: bytes, mode: int, size: int = 0) -> tarfile.TarInfo:
    """A tar header that says nothing of the machine that packed it (TarInfo's defaults: mtime, uid and
    gid 0, no user or group names), so the same files always give the same bytes."""
    entry = tarfile.TarInfo(name)
    entry.type, entry.mode, entry.size = kind, mode, size
    return entry


def _mode(folder: bool, executable: bool = False) -> int:
    return 0o755 if folder or executable else 0o644


def unpack(bundle: Bundle, base: Path, *, max_bytes: int = MAX_BYTES) -> Path:
    """``base/<digest>/`` holding the bundle's files, unpacked once per node and reused after."""
    return unpack_from(io.BytesIO(bundle.archive), bundle, base, max_bytes=max_bytes)


def unpack_from(file: BinaryIO, packed: Bundle | Packed, base: Path, *, max_bytes: int = MAX_BYTES) -> Path:
    """``base/<digest>/`` holding the files of the tar in ``file`` (seekable; ``packed`` says its
    digest and roots), unpacked once and reused after.

    Several processes may unpack the same bundle at once: each writes a temporary sibling and renames
    it into place, so none ever sees half a bundle, and a loser drops its copy for the winner's.
    """
    _verify(file, packed.digest, max_bytes)
    try:
        root = private_folder(base, PackingError)
        target = root / packed.digest
        if target.is_dir():
            return target
        file.seek(0)
        with tarfile.open(fileobj=file, mode="r:") as tar:
            members = _checked_members(tar, packed)
            staging = Path(tempfile.mkdtemp(dir=root, prefix=f".{packed.digest[:16]}-"))
            try:
                tar.extractall(staging, members=members, filter=_normalised)
                staging.chmod(0o755)  # readable by a cell's uid once bound back; base stays 700
                move_into_place(staging, target)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    except (OSError, tarfile.TarError) as exc:
        raise PackingError(f"bundle {packed.digest[:16]} cannot be unpacked: {exc}") from None
    return target


def _verify(file: BinaryIO, digest: str, max_bytes: int) -> None:
    """Size first (cheap), then the hash; an uncompressed tar of plain files unpacks to less than its size."""
    size = file.seek(0, io.SEEK_END)
    if size > max_bytes:
        raise PackingError(f"bundle {digest[:16]} is {size} bytes, more than {max_bytes}")
    actual = _sha256(file)
    if actual != digest:
        raise PackingError(f"bundle {digest[:16]}: content hash mismatch (the archive hashes to {actual[:16]})")


def _checked_members(tar: tarfile.TarFile, bundle: Bundle | Packed) -> list[tarfile.TarInfo]:
    """Every member, each checked before anything is written: a bad one refuses the whole bundle."""
    tops = {str(index) for index in range(len(bundle.roots))}
    seen: set[PurePosixPath] = set()
    members = tar.getmembers()
    for member in members:
        name = _checked_name(member, tops, bundle.digest[:16])
        if name in seen:
            raise PackingError(f"bundle {bundle.digest[:16]}: member {member.name!r} appears twice")
        seen.add(name)
    return members


def _checked_name(member: tarfile.TarInfo, tops: set[str], shown: str) -> PurePosixPath:
    name = PurePosixPath(member.name)
    if member.type not in (*FILE_TYPES, tarfile.DIRTYPE) or member.sparse is not None:
        what = "a symlink" if member.issym() else "a hard link" if member.islnk() else "not a plain file or folder"
        raise PackingError(f"bundle {shown}: member {member.name!r} is {what}")
    if name.is_absolute():
        raise PackingError(f"bundle {shown}: member {member.name!r} is an absolute path")
    if ".." in name.parts:
        raise PackingError(f"bundle {shown}: member {member.name!r} climbs out with '..'")
    if not name.parts or name.parts[0] not in tops:
        raise PackingError(f"bundle {shown}: member {member.name!r} is outside its roots' folders {sorted(tops)}")
    return name


def _normalised(member: tarfile.TarInfo, destination: str) -> tarfile.TarInfo:
    """tarfile's "data" filter (a second guard: no links, devices, or names leaving ``destination``),
    with our own modes, as umask and the archive's say would otherwise decide them."""
    member = tarfile.data_filter(member, destination)
    return member.replace(mode=_mode(member.isdir(), bool(member.mode and member.mode & 0o111)), deep=False)


def relocate(spec: PolicySpec, bundle: Bundle | Packed, folder: Path) -> PolicySpec:
    """The spec with every path moved into ``folder`` (where ``unpack`` put the bundle); all else kept."""
    roots = [Path(root) for root in bundle.roots]

    def moved(raw: str) -> str:
        path = Path(raw)
        for index, root in enumerate(roots):
            if path.is_relative_to(root):
                return str(folder / str(index) / root.name / path.relative_to(root))
        raise PackingError(f"policy {spec.display_name}: {raw} is under none of the bundle's roots")

    return with_paths(spec, moved)


def with_paths(spec: PolicySpec, moved: Callable[[str], str]) -> PolicySpec:
    """The spec with every path it names (class file, checkpoint, python_path, setup script) passed
    through ``moved``; all else kept."""
    update: dict[str, object] = {"python_path": [moved(entry) for entry in spec.python_path]}
    if spec.data_path:
        update["data_path"] = moved(spec.data_path)
    if spec.setup_script:
        update["setup_script"] = moved(spec.setup_script)
    if file_class := spec.file_and_class:
        update["class_path"] = file_path(moved(file_class[0]), file_class[1])
    return spec.model_copy(update=update, deep=True)
