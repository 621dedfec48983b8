"""A submission's files kept as an immutable, content-addressed, root-only copy: a version.

``keep`` takes any ``-p`` form -- a ``file.py:Class``, a submission folder with ``policy_spec.json``
or ``cogames.toml``, a MettaGrid zip, a YAML/JSON spec file, a shorthand -- and parses and checks it
under the rules of every other command (``policybox.spec``: each path an entrant's spec names stays
inside its folder; ``policybox.submission``: a zip is unpacked warily). It packs the spec's files into
one deterministic tar (``policybox.files.packing``), streamed into an unnamed temporary file of ROOT
(never held in memory; gone with the process, whatever ends it), and unpacks that into ``ROOT/files/<sha256 of
the tar>/``: ROOT and ``files`` are 0700, so only root reaches the copy, and a cell reads it once it is
bound back. The spec it returns points into the copy, so editing or deleting the original afterwards
changes nothing; a copy is never written again (storing the same files again reuses it).

A version's **digest** is the sha256 of what makes it play as it does: its spec in canonical JSON
(its paths relative to its copy; without ``name``, which is the operator's to give) and every file
of the copy (path, mode, content). Folder roots go by their position, not their name, so the same
files submitted from another folder, or in a zip made again, give the same digest; a change to a
file, a keyword argument, the setup script or a secret gives another. A spec without files (a
shorthand, a dotted path of an installed package) is digested the same way, with no files.

**Secrets.** ``env.NAME=@FILE`` and ``env.NAME=$VAR`` are read once, when the source is parsed, and
the version keeps the values: a version is immutable, so changing the file or the variable later
changes nothing (submit again for a new version). The values stay in ``Stored.spec``, since its
cells need them, and out of the digest, which may be shown anywhere: there each value is an
HMAC-SHA256 under the store's own key (``ROOT/.digest-key``, 0600, made once), so the digest changes
with a secret yet cannot be checked against guesses without that key. ``spec.redacted()`` is the spec
to show or keep where others read.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from policybox.errors import SpecError
from policybox.files.packing import pack_to, relocate, unpack_from, with_paths
from policybox.spec import PolicySpec, parse_policy_arg
from policybox.submission import private_folder

NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
# A ladder's version as a -p names it: NAME@vN (policybox run --ladder DIR -p walker@v2).
VERSION_REF = re.compile(rf"(?P<name>{NAME_PATTERN.pattern})@v(?P<number>[0-9]{{1,9}})")
FILES = "files"
KEY_FILE = ".digest-key"


def is_version(text: str) -> bool:
    """Whether ``text`` names a ladder's version, ``NAME@vN``, rather than a policy spec."""
    return VERSION_REF.fullmatch(text) is not None


@dataclass(frozen=True)
class Stored:
    """A version: its spec, pointing into its copy (``files``; None for a spec that needs no files), and its digest."""

    spec: PolicySpec
    digest: str
    files: Path | None


def check_name(name: str, what: str = "submission name") -> str:
    """``name`` if it may name a submission (or, as ``what`` says, a team: the same rule), else a
    SpecError saying the rule."""
    if not NAME_PATTERN.fullmatch(name):
        raise SpecError(
            f"{what} {name!r} is not allowed: use 1 to 40 of a-z, 0-9, '_' and '-', starting with a letter or a digit"
        )
    return name


def keep(source: str, root: Path, base_dir: Path | None = None) -> Stored:
    """Keep the policy ``source`` names (a ``-p`` form, relative to ``base_dir``, default the current
    folder) under ``root``, the versions folder."""
    return keep_spec(parse_policy_arg(source, base_dir), root)


def keep_spec(spec: PolicySpec, root: Path) -> Stored:
    """Keep a checked spec (its paths absolute, as ``parse_policy_arg`` and ``check_spec`` give them)."""
    root = private_folder(root).resolve()
    key = _digest_key(root)
    with tempfile.TemporaryFile(dir=root) as tar:  # unnamed: nothing to clean up, however this ends
        packed = pack_to(spec, tar)
        if packed is None:
            return Stored(spec, _digest(spec, key), None)
        files = unpack_from(tar, packed, root / FILES)
        digest = _digest(relocate(spec, packed, Path("/")), key, tar)
    return Stored(relocate(spec, packed, files), digest, files)


def digest_now(spec: PolicySpec, root: Path) -> str:
    """The digest a kept version's spec (``Stored.spec``, pointing into its copy under ``root``) has
    from its files as they are now: its stored digest while nobody changed them. Nothing is written."""
    root = root.resolve()
    with tempfile.TemporaryFile(dir=root) as tar:
        packed = pack_to(spec, tar)
        if packed is None:
            return _digest(spec, _digest_key(root))
        return _digest(relocate(spec, packed, Path("/")), _digest_key(root), tar)


def _digest(spec: PolicySpec, key: bytes, tar: BinaryIO | None = None) -> str:
    """The version's digest (see the module's docstring); the spec of a bundle (the ``tar`` file) is
    relocated to ``/``."""
    folders = _folder_roots(tar) if tar else set()
    shown = spec.model_copy(update={"name": None, "env": {k: _keyed(key, v) for k, v in spec.env.items()}})
    if tar is not None:
        shown = with_paths(shown, lambda raw: _unnamed(PurePosixPath(raw).relative_to("/"), folders))
    content = {"spec": shown.model_dump(mode="json"), "files": _files(tar, folders) if tar else None}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def _folder_roots(tar_file: BinaryIO) -> set[str]:
    """The indexes (as text) of the bundle's roots that are folders: their own names do not count."""
    tar_file.seek(0)
    with tarfile.open(fileobj=tar_file, mode="r:") as tar:
        return {member.name.split("/")[0] for member in tar if member.isdir() and member.name.count("/") == 1}


def _files(tar_file: BinaryIO, folders: set[str]) -> list[list[str | int]]:
    """Every member of the bundle (in its fixed order) as [path without folder roots' names, type, mode, sha256],
    each file hashed a chunk at a time."""
    entries: list[list[str | int]] = []
    tar_file.seek(0)
    with tarfile.open(fileobj=tar_file, mode="r:") as tar:
        for member in tar:
            source = tar.extractfile(member) if member.isfile() else None
            # extractfile gives a BufferedReader; typeshed says IO[bytes], which lacks the readinto file_digest uses.
            content = hashlib.file_digest(source, "sha256").hexdigest() if source else ""  # type: ignore[arg-type]
            entries.append([_unnamed(PurePosixPath(member.name), folders), member.type.decode(), member.mode, content])
    return entries


def _unnamed(path: PurePosixPath, folders: set[str]) -> str:
    """``i/<name>/rest`` as ``i/rest`` when root ``i`` is a folder; a file root keeps its name (a
    loader may go by its suffix)."""
    parts = path.parts
    return str(PurePosixPath(parts[0], *parts[2:])) if parts and parts[0] in folders else str(path)


def _keyed(key: bytes, value: str) -> str:
    return hmac.new(key, value.encode(), hashlib.sha256).hexdigest()


def _digest_key(root: Path) -> bytes:
    """The store's key for secrets in digests: made once, 0600; the first of several runs to make it wins."""
    path = root / KEY_FILE
    if not path.exists():
        fd, staging = tempfile.mkstemp(dir=root, prefix=f"{KEY_FILE}.")  # mode 0600
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(secrets.token_hex(32).encode())
                os.fsync(file.fileno())
            with contextlib.suppress(FileExistsError):
                os.link(staging, path)  # never replaces a key another run made meanwhile
        finally:
            os.unlink(staging)
    return path.read_bytes()
