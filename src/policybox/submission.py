"""Submission zips in MettaGrid's format, unpacked safely into a root-only, content-addressed folder.

MettaGrid packs a submission as a zip with ``policy_spec.json`` (or a ``cogames.toml`` manifest) at
its top (``class_path``, ``data_path`` relative to the zip's top, ``init_kwargs``, ``setup_script``;
see ``mettagrid.policy.submission``).
``-p team.zip`` unpacks it once into ``<tempdir>/policybox-submissions/<sha256[:16]>/`` and loads
that folder like any submission folder, so the same confinement rules apply.

The zip comes from an entrant and is hostile. We check every entry ourselves instead of calling
``ZipFile.extractall``: extractall silently rewrites ``../`` and absolute names instead of refusing
them, keeps no count of files, and would write whatever the archive inflates to. Here an entry is
refused unless it is a plain file or folder with a relative name that stays below the top, the
number of entries is capped, and the bytes are counted as they are written (a zip's declared sizes
are the entrant's word, so they are only a first, early check).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from policybox.errors import PolicyboxError, SpecError

MAX_FILES = 10_000
MAX_BYTES = 2 * 1024**3
CHUNK = 1024 * 1024
ROOT_NAME = "policybox-submissions"
DIGEST_HEX = 16
# A zip entry without Unix mode bits (made on Windows, say) has type 0: a file, or a folder if its name ends in /.
ALLOWED_TYPES = (0, stat.S_IFREG, stat.S_IFDIR)
# What a broken or hostile archive raises while it is read.
ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError)


def submissions_root() -> Path:
    """Where unpacked submissions live: a folder only the running user may enter."""
    return Path(tempfile.gettempdir()) / ROOT_NAME


def unpack_submission(zip_path: Path, given: str) -> Path:
    """The folder holding the contents of the zip at ``zip_path`` (``given``: as the operator wrote it).

    Unpacked once per content and reused after: into a temporary sibling first, then renamed into
    place, so concurrent runs never see half a submission.
    """
    if not zip_path.is_file():
        raise SpecError(f"submission zip {given} does not exist")
    root = private_folder(submissions_root())
    with zip_path.open("rb") as file:  # hash and unpack the same open file
        target = root / _sha256(file)[:DIGEST_HEX]
        if target.is_dir():
            return target
        staging = Path(tempfile.mkdtemp(dir=root, prefix=f".{target.name}-"))
        try:
            file.seek(0)
            _extract(file, staging, given)
            staging.chmod(0o755)  # readable by a cell's uid once bound back; the root above stays 700
            move_into_place(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


def private_folder(root: Path, error: type[PolicyboxError] = SpecError) -> Path:
    """Make (or check) ``root``: ours, mode 700, not a symlink someone planted in /tmp (else ``error``).

    Shared with ``policybox.league.packing``, whose bundles are as untrusted as a zip and unpacked the same way.
    """
    with contextlib.suppress(FileExistsError):
        root.mkdir(mode=0o700, parents=True)
        root.chmod(0o700)
    info = os.lstat(root)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise error(
            f"{root} must be a folder owned by uid {os.geteuid()} with mode 700; "
            "it is not, so nothing will be unpacked there"
        )
    return root


def _sha256(file: BinaryIO) -> str:
    digest = hashlib.sha256()
    while chunk := file.read(CHUNK):
        digest.update(chunk)
    return digest.hexdigest()


def move_into_place(staging: Path, target: Path) -> None:
    """Rename a fully written ``staging`` folder to ``target``, unless another run already put it there."""
    try:
        os.rename(staging, target)
    except OSError:
        if not target.is_dir():  # not another run that got there first
            raise


def _extract(file: BinaryIO, destination: Path, given: str) -> None:
    """Check every entry, then write them; nothing is written for an archive with a bad entry."""
    try:
        archive = zipfile.ZipFile(file)
    except zipfile.BadZipFile:
        raise SpecError(f"submission {given} is not a zip file") from None
    with archive:
        entries = archive.infolist()
        if len(entries) > MAX_FILES:
            raise SpecError(f"submission {given} holds {len(entries)} entries, more than {MAX_FILES}")
        for entry in entries:
            _check_entry(entry, given)
        declared = _declared_bytes(entries)
        if declared > MAX_BYTES:
            raise SpecError(f"submission {given} unpacks to {declared} bytes, more than {MAX_BYTES}")
        written = 0
        for entry in entries:
            try:
                written = _write_entry(archive, entry, destination, written, given)
            except ZIP_ERRORS as exc:
                raise SpecError(f"submission {given}: entry {entry.filename!r} cannot be read: {exc}") from None


def _declared_bytes(entries: list[zipfile.ZipInfo]) -> int:
    """What the archive says it unpacks to: refuses an honest bomb early, before anything is written."""
    return sum(entry.file_size for entry in entries)


def _check_entry(entry: zipfile.ZipInfo, given: str) -> None:
    name = PurePosixPath(entry.filename)
    kind = stat.S_IFMT(entry.external_attr >> 16)
    if name.is_absolute():
        raise SpecError(f"submission {given}: entry {entry.filename!r} is an absolute path")
    if ".." in name.parts:
        raise SpecError(f"submission {given}: entry {entry.filename!r} climbs out with '..'")
    if not name.parts:
        raise SpecError(f"submission {given}: entry {entry.filename!r} has no name")
    if kind not in ALLOWED_TYPES:
        what = "a symlink" if kind == stat.S_IFLNK else f"not a plain file or folder (mode {kind:#o})"
        raise SpecError(f"submission {given}: entry {entry.filename!r} is {what}")


def _write_entry(archive: zipfile.ZipFile, entry: zipfile.ZipInfo, destination: Path, written: int, given: str) -> int:
    """Write one checked entry below ``destination``; the running byte count, never past MAX_BYTES."""
    parts = PurePosixPath(entry.filename).parts
    is_folder = entry.is_dir() or stat.S_ISDIR(entry.external_attr >> 16)
    try:
        folder = _make_folders(destination, parts if is_folder else parts[:-1])
        if is_folder:
            return written
        with archive.open(entry) as source, new_file(folder / parts[-1]) as sink:
            while chunk := source.read(CHUNK):
                written += len(chunk)
                if written > MAX_BYTES:
                    raise SpecError(f"submission {given} unpacks to more than {MAX_BYTES} bytes")
                sink.write(chunk)
    except FileExistsError:
        raise SpecError(f"submission {given}: entry {entry.filename!r} is written twice") from None
    except (NotADirectoryError, IsADirectoryError):
        raise SpecError(f"submission {given}: entry {entry.filename!r} clashes with a file of the same name") from None
    return written


def _make_folders(destination: Path, parts: tuple[str, ...]) -> Path:
    folder = destination
    for part in parts:
        folder = folder / part
        try:
            folder.mkdir(mode=0o755)
        except FileExistsError:
            if not folder.is_dir():  # an earlier entry wrote a file here (we never make symlinks)
                raise NotADirectoryError(folder) from None
            continue
        folder.chmod(0o755)  # whatever the umask
    return folder


@contextlib.contextmanager
def new_file(path: Path, mode: int = 0o644) -> Iterator[BinaryIO]:
    """A new file with ``mode`` whatever the umask; never an existing file, never through a symlink.

    Shared with ``policybox.league.harvest``, which copies what a setup script made as warily."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    os.fchmod(fd, mode)
    with os.fdopen(fd, "wb") as file:
        yield file
