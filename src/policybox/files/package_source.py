"""PackageSource: where policies' environments take their packages from -- the organiser's index,
extra indexes and find-links, as the settings name them or as this machine's ``pip install`` reaches
them (``pip config list``), with pip's constraint files and certificate bundle -- and how uv is told
(``policybox.files.environments`` builds with it).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from policybox.settings import EpisodeSettings


@dataclass(frozen=True)
class PackageSource:
    """Where environments' packages come from: an index URL (None: uv's default, PyPI), extra indexes and
    find-links folders, the constraint files that cap what may be taken from them (pip's configured
    ones), whether sdists may be built and the certificates HTTPS is checked against; and the settings
    whose sandbox, limits and environment cap a build's cells run under."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    no_index: bool = False  # find-links only: a wheelhouse, offline
    constraints: tuple[str, ...] = ()
    sdists: bool = False
    cert: str | None = None  # the certificate bundle an index over HTTPS is checked against, as pip checks it
    settings: EpisodeSettings = field(default_factory=EpisodeSettings)

    def local(self) -> PackageSource:
        """Only the sources on this machine's disk: its find-links folders and ``file://`` indexes."""
        indexes = [url for url in (self.index_url, *self.extra_index_urls) if url and _is_local(url)]
        links = tuple(link for link in self.find_links if _is_local(link))
        return dataclasses.replace(
            self,
            index_url=indexes[0] if indexes else None,
            extra_index_urls=tuple(indexes[1:]),
            find_links=links,
            no_index=not indexes,
        )

    def is_local(self) -> bool:
        """Whether every source is on this machine's disk (no index named is uv's default: PyPI)."""
        indexes = [] if self.no_index else [self.index_url]
        return all(url is not None and _is_local(url) for url in (*indexes, *self.extra_index_urls, *self.find_links))

    def folders(self) -> list[str]:
        """The folders the sources are in."""
        urls = [url for url in (self.index_url, *self.extra_index_urls, *self.find_links) if url]
        return [url.removeprefix("file://") for url in urls if _is_local(url)]

    def uv_arguments(self) -> list[str]:
        """Where uv takes packages from. pip takes the best version across all its indexes, where uv's
        default stops at the first index that has the package, extra ones first: with more than one
        index, uv is told to choose as pip does."""
        arguments = ["--no-index"] if self.no_index else []
        arguments += ["--index-url", self.index_url] if self.index_url else []
        arguments += [arg for url in self.extra_index_urls for arg in ("--extra-index-url", url)]
        if (0 if self.no_index else 1) + len(self.extra_index_urls) > 1:
            arguments += ["--index-strategy", "unsafe-best-match"]
        return arguments + [arg for link in self.find_links for arg in ("--find-links", link)]

    def build_arguments(self) -> list[str]:
        """Where and how a build's uv takes packages: wheels only unless sdists are allowed, and offline
        from a source all on this disk."""
        binary = [] if self.sdists else ["--only-binary", ":all:"]
        return [*self.uv_arguments(), *binary, *(["--offline"] if self.is_local() else [])]


def package_source(settings: EpisodeSettings) -> PackageSource:
    """The settings' index and find-links if either is given (find-links alone: those folders only, no
    index), else what the host's ``pip install`` reaches; with sdists if the settings allow them, and
    the settings for the build's cells."""
    index_url, find_links = settings.index_url, settings.find_links
    if index_url or find_links:
        links = tuple(_absolute(link) for link in find_links)
        source = PackageSource(index_url, (), links, no_index=index_url is None)
    else:
        source = pip_configured_source()
    cert = pip_configured_source().cert or os.environ.get("SSL_CERT_FILE")  # pip's, else what uv here would take
    return dataclasses.replace(source, sdists=settings.sdists, cert=cert, settings=settings)


def _absolute(link: str) -> str:
    """A find-links folder as an absolute path (uv runs elsewhere); a URL as it is."""
    return link if "://" in link else str(Path(link).expanduser().resolve())


def _is_local(url: str) -> bool:
    return "://" not in url or url.startswith("file://")


@cache
def pip_configured_source() -> PackageSource:
    """pip's configured index, extra indexes, find-links, constraint files and certificate bundle (its
    files and PIP_* variables), each named once."""
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
    index, cert = values.get("index-url", [None])[-1], values.get("cert", [None])[-1]

    def listed_once(name: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(values.get(name, [])))

    extra, links, constraints = listed_once("extra-index-url"), listed_once("find-links"), listed_once("constraint")
    return PackageSource(index, extra, links, constraints=constraints, cert=cert)
