"""A submission's own Python environment, as the tests build one: a submission that needs a version of
more-itertools, a local package index of wheels made on the spot, and an sdist that tries to escape
when built."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import zipfile
from pathlib import Path

from conftest import POLICIES

INDEX = "file:///opt/pypi/simple"
OLD, NEW = "10.8.0", "11.1.0"


def submission(folder: Path, expect: str, requirements: str | None, cls: str = "NeedsPackage", **kwargs) -> Path:
    """A submission folder whose policy refuses to play unless it imports more-itertools ``expect``."""
    folder.mkdir(parents=True)
    (folder / "bot.py").write_text((POLICIES / "needs_package.py").read_text())
    spec = {"class_path": f"bot.py:{cls}", "init_kwargs": {"expect": expect, **kwargs}}
    (folder / "policy_spec.json").write_text(json.dumps(spec))
    if requirements is not None:
        (folder / "requirements.txt").write_text(requirements)
    return folder


def trojan_sdist(tmp_path: Path, port: int = 9, build: str = "") -> Path:
    """A wheelhouse holding setuptools and ``trojan-1.0``, a package offered only as an sdist whose
    setup.py, when it is built, tries to plant a file in ``tmp_path`` and to reach 127.0.0.1:``port``
    (printing how each went), runs ``build`` and makes a module saying where it was built. Returns the
    wheelhouse; the file would be ``tmp_path/built-on-the-host``."""
    package = tmp_path / "src" / "trojan-1.0"
    package.mkdir(parents=True)
    (package / "setup.py").write_text(
        "import socket, sys\nfrom pathlib import Path\n"
        "from setuptools import setup\n"
        "def attempt(name, action):\n"
        "    try:\n        action()\n        print(f'{name}: succeeded', flush=True)\n"
        "    except OSError as exc:\n        print(f'{name}: refused {exc}', flush=True)\n"
        f"attempt('plant', lambda: Path({str(tmp_path / 'built-on-the-host')!r}).write_text('ran'))\n"
        f"attempt('tcp', lambda: socket.create_connection(('127.0.0.1', {port}), timeout=3).close())\n"
        f"{build}\n"
        "Path('trojan.py').write_text(f'VALUE = {\"built as uid \" + str(__import__(\"os\").getuid())!r}\\n')\n"
        "setup(name='trojan', version='1.0', py_modules=['trojan'])\n"
    )
    (package / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: trojan\nVersion: 1.0\n")
    wheelhouse = tmp_path / "sdists"
    wheelhouse.mkdir()
    for wheel in Path("/opt/pypi/files").glob("setuptools-*-py3-none-any.whl"):  # all a build would need
        (wheelhouse / wheel.name).write_bytes(wheel.read_bytes())
    subprocess.run(
        ["tar", "-czf", str(wheelhouse / "trojan-1.0.tar.gz"), "-C", str(package.parent), package.name], check=True
    )
    return wheelhouse


def wheel(folder: Path, name: str, version: str, files: dict[str, bytes]) -> Path:
    """A pure-Python wheel of ``files`` (path in the wheel: content), with its metadata and RECORD."""
    dist = f"{name}-{version}"
    entries = {
        **files,
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: policybox-tests\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = [f"{path},sha256={_digest(data)},{len(data)}" for path, data in entries.items()]
    path = folder / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name_in_wheel, data in entries.items():
            archive.writestr(name_in_wheel, data)
        archive.writestr(f"{dist}.dist-info/RECORD", "\n".join([*record, f"{dist}.dist-info/RECORD,,", ""]))
    return path


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def package_index(root: Path, projects: dict[str, list[tuple[str, dict[str, bytes]]]]) -> Path:
    """A PEP 503 index in ``root``: each project's folder holds its page and its wheels (versions, each
    a wheel's files). Returns the index folder."""
    for project, versions in projects.items():
        folder = root / project
        folder.mkdir(parents=True)
        wheels = [wheel(folder, project, version, files) for version, files in versions]
        links = "".join(
            f'<a href="{w.name}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}">{w.name}</a>\n' for w in wheels
        )
        (folder / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
    return root
