"""Submission archives -- zips in MettaGrid's format, and zips or tar.gz files in Kaggle's -- unpacked safely
into a root-only, content-addressed folder.

MettaGrid packs a submission as a zip with ``policy_spec.json`` (or a ``cogames.toml`` manifest) at
its top (``class_path``, ``data_path`` relative to the zip's top, ``init_kwargs``, ``setup_script``;
see ``mettagrid.policy.submission``).
``-p team.zip`` unpacks it once into ``<tempdir>/policybox-submissions/<sha256[:16]>/`` and loads
that folder like any submission folder, so the same confinement rules apply.

The zip comes from an entrant and is hostile. We check every entry ourselves instead of calling
``ZipFile.extractall``: extractall silently rewrites ``../`` and absolute names instead of refusing
them, keeps no count of files, and would write whatever the archive inflates to. Here an entry is
refused unless it is a plain file or folder with a relative name that stays below the top, the
number of entries, the bytes of each file and of all files are capped (``ZipLimits``), and the bytes
are counted as they are written (a zip's declared sizes are the entrant's word, so they are only a
first, early check). Entry names are checked too -- valid UTF-8 (or the zip's old code page), no NUL,
control character or backslash, at most 255 bytes a part, 1,024 bytes and 32 folders in all -- so a
name the filesystem would refuse is refused here first, by name. A refusal of size is a ``TooLarge``.

A tar.gz (Kaggle's other submission format; told from a zip by its first bytes, not its name) is read
as a stream, entry by entry, under the same rules: plain files and folders only (a symlink, a hard
link, a device is refused by name), the same names, the same caps, its bytes counted as they are
written. What it decompresses to is counted too, headers included, so a gzip bomb stops at the cap;
a header that holds a long name or PAX records (which ``tarfile`` reads whole into memory) is refused
past ``TAR_HEADER_BYTES`` before it is read, and a sparse file before its map is.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import hashlib
import io
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any, BinaryIO

from policybox.errors import PolicyboxError, SpecError

MiB = 1024 * 1024
CHUNK = MiB
ROOT_NAME = "policybox-submissions"
DIGEST_HEX = 16
# A zip entry without Unix mode bits (made on Windows, say) has type 0: a file, or a folder if its name ends in /.
ALLOWED_TYPES = (0, stat.S_IFREG, stat.S_IFDIR)
# What a broken or hostile archive raises while it is read (UnicodeDecodeError: a name flagged UTF-8 that is not).
ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, UnicodeDecodeError)
# Entry names: what Linux takes (NAME_MAX a part; far below PATH_MAX in all, with the folders above it).
MAX_PART_BYTES = 255
MAX_NAME_BYTES = 1024
MAX_DEPTH = 32
# ZipFile reads the whole central directory into memory, an object per entry, before we can count them:
# its size, as the zip's end record gives it, is refused first past this much per entry allowed (and
# some room for a few long names).
CENTRAL_BYTES_PER_ENTRY = 512
CENTRAL_SLACK = 64 * 1024
SHOWN_NAME = 80  # characters of a hostile entry name a message shows
GZIP_MAGIC = b"\x1f\x8b"
TAR_HEADER_BYTES = 64 * 1024  # the most a tar entry's long-name or PAX header may hold
TAR_OVERHEAD_PER_ENTRY = 1536  # a header block and a block of padding, and room for a short PAX record
TAR_ERRORS = (tarfile.TarError, gzip.BadGzipFile, EOFError, zlib.error, UnicodeError)
TAR_HEADERS = (
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
)
TAR_LINKS = {tarfile.SYMTYPE: "a symlink", tarfile.LNKTYPE: "a hard link"}


class TooLarge(SpecError):
    """A submission with more entries or bytes than its ``ZipLimits`` (HTTP 413 over the web page)."""


@dataclass(frozen=True)
class ZipLimits:
    """What a submission zip may unpack to; a ladder sets its own (``LadderSettings``)."""

    max_bytes: int = 512 * MiB
    max_file_bytes: int = 256 * MiB
    max_entries: int = 10_000


def submissions_root() -> Path:
    """Where unpacked submissions live: a folder only the running user may enter."""
    return Path(tempfile.gettempdir()) / ROOT_NAME


def unpack_submission(zip_path: Path, given: str, limits: ZipLimits = ZipLimits(), into: Path | None = None) -> Path:
    """The folder holding the contents of the zip at ``zip_path`` (``given``: as the operator wrote it).

    Unpacked once per content into ``into`` (default ``submissions_root()``, kept for later runs; a
    ladder gives a temporary folder of its own, which goes once the version is kept) and reused
    after: into a temporary sibling first, then renamed into place, so concurrent runs never see
    half a submission.
    """
    if not zip_path.is_file():
        raise SpecError(f"submission zip {given} does not exist")
    root = private_folder(into or submissions_root())
    with zip_path.open("rb") as file:  # hash and unpack the same open file
        target = root / _sha256(file)[:DIGEST_HEX]
        if target.is_dir():
            return target
        staging = Path(tempfile.mkdtemp(dir=root, prefix=f".{target.name}-"))
        try:
            file.seek(0)
            _extract(file, staging, given, limits)
            staging.chmod(0o755)  # readable by a cell's uid once bound back; the root above stays 700
            move_into_place(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


def private_folder(root: Path, error: type[PolicyboxError] = SpecError) -> Path:
    """Make (or check) ``root``: ours, mode 700, not a symlink someone planted in /tmp (else ``error``).

    Shared with ``policybox.files.packing``, whose bundles are as untrusted as a zip and unpacked the same way.
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
    # file_digest reads with readinto, which every binary file has but typeshed's BinaryIO does not declare.
    return hashlib.file_digest(file, "sha256").hexdigest()  # type: ignore[arg-type]


def move_into_place(staging: Path, target: Path) -> None:
    """Rename a fully written ``staging`` folder to ``target``, unless another run already put it there."""
    try:
        os.rename(staging, target)
    except OSError:
        if not target.is_dir():  # not another run that got there first
            raise


def _extract(file: BinaryIO, destination: Path, given: str, limits: ZipLimits) -> None:
    """A tar.gz entry by entry (``_extract_tar``); a zip's entries all checked, then written (nothing is
    written for a zip with a bad entry)."""
    if file.read(len(GZIP_MAGIC)) == GZIP_MAGIC:
        file.seek(0)
        _extract_tar(file, destination, given, limits)
        return
    _check_central_directory(file, given, limits)
    try:
        archive = zipfile.ZipFile(file)
    except UnicodeDecodeError as exc:  # the raw name, as bytes: inert in a message
        raise SpecError(f"submission {given}: entry {_shown(exc.object)} is flagged UTF-8 but is not") from None
    except zipfile.BadZipFile:
        raise SpecError(f"submission {given} is not a zip or tar.gz file") from None
    with archive:
        entries = archive.infolist()
        if len(entries) > limits.max_entries:
            raise TooLarge(f"submission {given} holds {len(entries)} entries, more than {limits.max_entries}")
        for entry in entries:
            _check_entry(entry, given, limits)
        declared = _declared_bytes(entries)
        if declared > limits.max_bytes:
            raise TooLarge(f"submission {given} unpacks to {declared} bytes, more than {limits.max_bytes}")
        written = 0
        for entry in entries:
            is_folder = entry.is_dir() or stat.S_ISDIR(entry.external_attr >> 16)
            source = None if is_folder else functools.partial(archive.open, entry)
            try:
                written += _write_entry(source, entry.filename, destination, limits.max_bytes - written, limits, given)
            except ZIP_ERRORS as exc:
                raise SpecError(f"submission {given}: entry {_shown(entry.filename)} cannot be read: {exc}") from None


def _check_central_directory(file: BinaryIO, given: str, limits: ZipLimits) -> None:
    """Refuse a zip whose table of entries is too large to read, before ``ZipFile`` reads it whole.

    The end record is found with zipfile's own reader (``_EndRecData``: private, but the one the
    ZipFile class uses; it reads the last 64 KiB, never more)."""
    try:
        end = zipfile._EndRecData(file)  # type: ignore[attr-defined]  # noqa: SLF001 -- private, see the docstring
    except OSError:
        end = None
    if not end:
        raise SpecError(f"submission {given} is not a zip or tar.gz file")
    entries = end[zipfile._ECD_ENTRIES_TOTAL]  # type: ignore[attr-defined]  # noqa: SLF001
    size = end[zipfile._ECD_SIZE]  # type: ignore[attr-defined]  # noqa: SLF001
    if entries > limits.max_entries:
        raise TooLarge(f"submission {given} holds {entries} entries, more than {limits.max_entries}")
    if size > (cap := limits.max_entries * CENTRAL_BYTES_PER_ENTRY + CENTRAL_SLACK):
        raise TooLarge(
            f"submission {given}: its table of entries is {size} bytes, more than {limits.max_entries} entries need "
            f"({cap})"
        )
    file.seek(0)


def _declared_bytes(entries: list[zipfile.ZipInfo]) -> int:
    """What the archive says it unpacks to: refuses an honest bomb early, before anything is written."""
    return sum(entry.file_size for entry in entries)


def _check_entry(entry: zipfile.ZipInfo, given: str, limits: ZipLimits) -> None:
    name = PurePosixPath(entry.filename)
    kind = stat.S_IFMT(entry.external_attr >> 16)
    shown = _shown(entry.orig_filename)
    if problem := _name_problem(entry.orig_filename, name):  # as stored: ZipInfo cuts filename at a NUL
        raise SpecError(f"submission {given}: entry {shown} {problem}")
    if kind not in ALLOWED_TYPES:
        what = "a symlink" if kind == stat.S_IFLNK else f"not a plain file or folder (mode {kind:#o})"
        raise SpecError(f"submission {given}: entry {shown} is {what}")
    if entry.file_size > limits.max_file_bytes:
        cap = limits.max_file_bytes
        raise TooLarge(f"submission {given}: entry {shown} unpacks to {entry.file_size} bytes, more than {cap}")


def _name_problem(raw: str, name: PurePosixPath) -> str | None:
    """What is wrong with an entry's name, if anything (said after the name in a message)."""
    if any("\udc80" <= character <= "\udcff" for character in raw):  # bytes a tar's name could not decode
        return "is not valid UTF-8"
    if any(ord(character) < 32 or ord(character) == 127 for character in raw):
        return "holds a NUL or another control character"
    if "\\" in raw:
        return "holds a backslash: folders are separated by /"
    if name.is_absolute():
        return "is an absolute path"
    if ".." in name.parts:
        return "climbs out with '..'"
    if not name.parts:
        return "has no name"
    if len(raw.encode()) > MAX_NAME_BYTES:
        return f"is longer than {MAX_NAME_BYTES} bytes"
    if len(name.parts) > MAX_DEPTH:
        return f"is more than {MAX_DEPTH} folders deep"
    if any(len(part.encode()) > MAX_PART_BYTES for part in name.parts):
        return f"has a part longer than {MAX_PART_BYTES} bytes"
    return None


def _shown(name: str | bytes) -> str:
    """An entry's name as a message shows it: quoted, escaped (inert), and cut if long."""
    return repr(name[:SHOWN_NAME]) + ("..." if len(name) > SHOWN_NAME else "")


def _write_entry(
    source: Callable[[], IO[bytes]] | None, name: str, destination: Path, room: int, limits: ZipLimits, given: str
) -> int:
    """Write one checked entry below ``destination``: a folder (``source`` None), or a file whose bytes
    ``source`` opens; counted as they are written, never past the file cap nor past ``room`` (what the
    submission's cap leaves)."""
    parts = PurePosixPath(name).parts
    written = 0
    try:
        folder = _make_folders(destination, parts if source is None else parts[:-1])
        if source is None:
            return 0
        with source() as reader, new_file(folder / parts[-1]) as sink:
            while chunk := reader.read(CHUNK):
                written += len(chunk)
                if written > limits.max_file_bytes:
                    raise TooLarge(
                        f"submission {given}: entry {_shown(name)} unpacks to more than {limits.max_file_bytes} bytes"
                    )
                if written > room:
                    raise TooLarge(f"submission {given} unpacks to more than {limits.max_bytes} bytes")
                sink.write(chunk)
    except FileExistsError:
        raise SpecError(f"submission {given}: entry {_shown(name)} is written twice") from None
    except (NotADirectoryError, IsADirectoryError):
        raise SpecError(f"submission {given}: entry {_shown(name)} clashes with a file of the same name") from None
    return written


def _extract_tar(file: BinaryIO, destination: Path, given: str, limits: ZipLimits) -> None:
    """Write a tar.gz's entries as they come, each checked first (see the module's docstring)."""
    stream = _Capped(gzip.GzipFile(fileobj=file), limits.max_bytes + limits.max_entries * TAR_OVERHEAD_PER_ENTRY, given)
    written = entries = 0
    try:
        with tarfile.open(fileobj=stream, mode="r|", tarinfo=_BoundedTarInfo) as archive:
            for member in archive:
                entries += 1
                if entries > limits.max_entries:
                    raise TooLarge(f"submission {given} holds more than {limits.max_entries} entries")
                _check_member(member, given, limits)
                source = None if member.isdir() else functools.partial(_member_bytes, archive, member)
                written += _write_entry(source, member.name, destination, limits.max_bytes - written, limits, given)
    except _Refused as exc:
        refusal = TooLarge if exc.too_large else SpecError
        raise refusal(f"submission {given}: entry {_shown(exc.name)} {exc.problem}") from None
    except TAR_ERRORS as exc:
        raise SpecError(f"submission {given} is not a zip or a readable tar.gz file: {exc}") from None


def _check_member(member: tarfile.TarInfo, given: str, limits: ZipLimits) -> None:
    shown = _shown(member.name)
    if problem := _name_problem(member.name, PurePosixPath(member.name)):
        raise SpecError(f"submission {given}: entry {shown} {problem}")
    if member.type in TAR_LINKS:
        raise SpecError(f"submission {given}: entry {shown} is {TAR_LINKS[member.type]}")
    if member.type not in (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.DIRTYPE):
        raise SpecError(f"submission {given}: entry {shown} is not a plain file or folder (tar type {member.type!r})")
    if member.size > limits.max_file_bytes:
        cap = limits.max_file_bytes
        raise TooLarge(f"submission {given}: entry {shown} unpacks to {member.size} bytes, more than {cap}")


def _member_bytes(archive: tarfile.TarFile, member: tarfile.TarInfo) -> IO[bytes]:
    reader = archive.extractfile(member)
    assert reader is not None  # a plain file's
    return reader


class _Refused(Exception):
    """An entry refused as ``tarfile`` reads its header, before it reads what follows."""

    def __init__(self, name: str, problem: str, too_large: bool = False) -> None:
        self.name, self.problem, self.too_large = name, problem, too_large


class _BoundedTarInfo(tarfile.TarInfo):
    """Refuses a long-name or PAX header past ``TAR_HEADER_BYTES`` before ``tarfile`` reads it into memory,
    and a sparse file before it reads the sparse map (a chain of blocks it keeps, as long as the entrant
    likes); ``_proc_member`` is where tarfile dispatches on an entry's type: private, stable since Python 2."""

    def _proc_member(self, archive: tarfile.TarFile) -> Any:
        if self.type in TAR_HEADERS and self.size > TAR_HEADER_BYTES:
            raise _Refused(self.name, f"has a header of {self.size} bytes, more than {TAR_HEADER_BYTES}", True)
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise _Refused(self.name, "is a sparse file, not a plain file")
        return super()._proc_member(archive)  # type: ignore[misc]


class _Capped(io.RawIOBase):
    """The decompressed stream, refused (``TooLarge``) once more than ``cap`` bytes have been read of it."""

    def __init__(self, source: io.BufferedIOBase, cap: int, given: str) -> None:
        self._source, self._cap, self._given, self._read = source, cap, given, 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        chunk = self._source.read(min(size, CHUNK) if size >= 0 else CHUNK)
        self._read += len(chunk)
        if self._read > self._cap:
            raise TooLarge(f"submission {self._given} unpacks to more than {self._cap} bytes")
        return chunk


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

    Shared with ``policybox.files.harvest``, which copies what a setup script made as warily."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    os.fchmod(fd, mode)
    with os.fdopen(fd, "wb") as file:
        yield file
