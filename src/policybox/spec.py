"""PolicySpec: what to run for one agent, and how users write it (never imports policy code).

A spec names a policy class in one of three forms:

* a shorthand: ``random``, ``noop`` or any other name MettaGrid's policy registry knows;
* a dotted path: ``mettagrid.policy.random_agent.RandomMultiAgentPolicy``;
* a file path: ``./bots/greedy.py:Greedy`` (the file's folder is importable inside the cell);
* an agent file: ``./bots/main.py`` -- its last callable is the agent, as Kaggle reads one (its games
  alone take agents; ``policybox.envs.kaggle``).

On the command line a spec is ``CLASS[,data=PATH][,name=NAME][,path=DIR]...[,kw.KEY=VALUE]...[,env.NAME=VALUE]...``
(``class=CLASS`` also works; ``kw`` values are read as JSON when they parse, else as strings;
``env.NAME=VALUE`` passes an environment variable to the policy's cells; a secret is better passed as
``env.NAME=@FILE`` (the file's content) or ``env.NAME=$VAR`` (a variable of policybox's own
environment), so that it never appears on a command line), or
the path of a JSON/YAML spec file, a submission folder, or a submission zip in MettaGrid's format
(see ``policybox.submission``). A submission folder (or the zip's top) holds a ``policy_spec.json``
or, as MettaGrid also reads, a ``cogames.toml`` manifest whose ``[policy]`` table has the same fields
(``class_path``, ``data_path``, ``setup_script``, ``[policy.init_kwargs]``); with both, the JSON
wins, as in MettaGrid. With neither, a ``main.py`` makes it Kaggle's submission format: that agent
file. Relative paths are made absolute here, on the host, because cells do not share
its working folder.

A ``setup_script`` (MettaGrid runs it on the host) is carried, never run, here: it must run once, in
a cell, in a private copy of the submission before the policy is built (``policybox.files.setup_scripts``),
and the spec that comes out of that has none. The engine refuses to start a spec that still has one.
Its checkpoint may be what the script makes, so a spec with a script need not have its ``data_path``
yet.

A spec may declare ``requirements`` (pip requirement lines, or a submission folder's
``requirements.txt``): packages built into an environment of its own before it plays
(``policybox.files.environments``). Only names, extras, versions and markers are taken -- never an
option, a URL or a path: the organiser decides where packages come from.

A spec file or submission is not trusted: an entrant writes it. What is read of it here (the spec file,
``requirements.txt``) is read as ``policybox.untrusted_files`` reads an entrant's file: a regular file
inside its folder, at most ``MAX_SPEC_FILE_BYTES``. Every path it names must resolve,
after symlinks, inside its own folder (so it cannot read or run another team's files), and the
``name`` it declares is kept only as a ``label``: a policy is identified by what the operator typed.
What the operator types in a ``-p`` string is the operator's own and is not confined.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from policybox import untrusted_files
from policybox.errors import SpecError
from policybox.untrusted_files import Folder

if TYPE_CHECKING:
    from policybox.submission import ZipLimits

FILE_CLASS = re.compile(r"^(?P<file>.+\.py):(?P<cls>[A-Za-z_][A-Za-z0-9_.]*)$")
AGENT_FILE = re.compile(r"^(?P<file>.+\.py)$")  # no class: the file's last callable (a Kaggle agent file)
DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
SHORTHAND = re.compile(r"^(kaggle:)?[A-Za-z_][A-Za-z0-9_-]*$")  # kaggle:negamax: a Kaggle game's built-in agent
SPEC_FILE_SUFFIXES = (".json", ".yaml", ".yml")
SUBMISSION_SPEC = "policy_spec.json"
REQUIREMENTS_FILE = "requirements.txt"  # beside a spec, as pip and MettaGrid's policy server read it
SHOWN_REQUIREMENT = 200
SUBMISSION_MANIFEST = "cogames.toml"  # MettaGrid's other submission format: a [policy] table
KAGGLE_AGENT = "main.py"  # Kaggle's submission format: a folder (or zip) whose main.py is the agent file
SUBMISSION_ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz")  # a zip; a tar.gz (Kaggle's format too)
SUBMISSION_FILES = (SUBMISSION_SPEC, SUBMISSION_MANIFEST, KAGGLE_AGENT)  # what makes a folder a submission, in order
ARCHIVE_LITTER = frozenset({"__MACOSX", ".DS_Store"})  # what macOS's "Compress" puts beside a zipped folder
# A field MettaGrid writes into a submission's policy_spec.json that policybox has no use for.
METTAGRID_ONLY_FIELDS = ("policy_env_interface",)
KEYS = "class, data, name, path, kw.X, env.X"
SINGLE_KEYS = {"class": "class_path", "data": "data_path", "name": "name"}  # each may be given once
# A spec names its files; it does not hold them. Its init_kwargs and env (each as JSON), and the spec
# file itself, are capped: a page or a cell reads every spec it is given.
MAX_FIELD_BYTES = 64 * 1024
MAX_SPEC_FILE_BYTES = 1024 * 1024
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# glibc's list of variables it ignores for setuid programs (they load code or files), plus the ones
# policybox sets for the cell itself.
UNSAFE_ENV_PREFIXES = ("LD_", "PYTHON")
UNSAFE_ENV = frozenset(
    [
        "GCONV_PATH",
        "GETCONF_DIR",
        "GLIBC_TUNABLES",
        "HOSTALIASES",
        "LOCALDOMAIN",
        "LOCPATH",
        "MALLOC_TRACE",
        "NIS_PATH",
        "NLSPATH",
        "RESOLV_HOST_CONF",
        "RES_OPTIONS",
        "TMPDIR",
        "TZDIR",
        "HOME",
        "USER",
        "LOGNAME",
    ]
)


class PolicySpec(BaseModel):
    """Everything a cell needs to build one agent's policy."""

    model_config = ConfigDict(extra="forbid")

    class_path: str = Field(description="Shorthand, dotted path `pkg.mod.Class`, or `path/to/file.py:Class`")
    data_path: str | None = Field(default=None, description="Checkpoint file or folder, loaded inside the cell")
    init_kwargs: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments for the class")
    python_path: list[str] = Field(default_factory=list, description="Import roots added only inside the cell")
    name: str | None = Field(default=None, description="Display name; derived from the class if unset")
    label: str | None = Field(
        default=None, description="A display label the submission declared; never used to identify it"
    )
    env: dict[str, str] = Field(default_factory=dict, description="Environment variables passed to its cells")
    requirements: list[str] = Field(
        default_factory=list,
        exclude_if=lambda value: not value,
        description="Packages its cells import that the host lacks (pip requirement lines: pkg==1.2), built once "
        "into an environment of its own (policybox.files.environments); or a requirements.txt beside the spec",
    )
    setup_script: str | None = Field(
        default=None,
        description="A Python script to run once, in a cell, in a private copy of the policy's files before "
        "it is built (MettaGrid's setup_script); a spec prepared from it has none",
    )

    def redacted(self) -> PolicySpec:
        """The spec as results show it: the names of the variables it passes its cells, never their values."""
        return self.model_copy(update={"env": dict.fromkeys(self.env, "***")}) if self.env else self

    @property
    def display_name(self) -> str:
        if self.name:
            return self.name
        file_class = self.file_and_class
        if file_class and not file_class[1]:  # an agent file: its name, or its folder's for a main.py
            file = Path(file_class[0])
            base = file.parent.name if file.name == "main.py" and file.parent.name else file.stem
        else:
            base = file_class[1] if file_class else self.class_path.rsplit(".", 1)[-1]
        return f"{base}:{Path(self.data_path).name}" if self.data_path else base

    @property
    def file_and_class(self) -> tuple[str, str] | None:
        """(file, class) for the file-path form, (file, "") for an agent file, else None."""
        if match := FILE_CLASS.match(self.class_path):
            return match["file"], match["cls"]
        if match := AGENT_FILE.match(self.class_path):
            return match["file"], ""
        return None

    @property
    def is_shorthand(self) -> bool:
        return self.file_and_class is None and "." not in self.class_path


def parse_policy_arg(
    text: str, base_dir: Path | None = None, limits: ZipLimits | None = None, unpack_into: Path | None = None
) -> PolicySpec:
    """Parse one ``-p`` argument into a checked spec with absolute paths. A zip or a tar.gz is unpacked within
    ``limits`` (default ``ZipLimits()``) into ``unpack_into`` (default: the submissions' own folder,
    ``policybox.submission.submissions_root``)."""
    base = (base_dir or Path.cwd()).resolve()
    text = text.strip()
    if not text:
        raise SpecError("empty policy spec: give a class, e.g. -p random or -p ./bot.py:MyPolicy")
    candidate = base / text
    if "=" not in text and "," not in text:
        if _is_folder(candidate):
            return load_submission_dir(candidate, text)
        if text.endswith(SUBMISSION_ARCHIVE_SUFFIXES):
            from policybox.submission import ZipLimits, unpack_submission  # archives handled only when one is given

            unpacked = unpack_submission(candidate, text, limits or ZipLimits(), unpack_into)
            return load_submission_dir(archive_top(unpacked, text), text)
        if text.endswith(SPEC_FILE_SUFFIXES):
            return load_spec_file(candidate, text)
    return check_spec(_spec_from_pairs(text), base)


def _is_folder(path: Path) -> bool:
    """Whether ``path`` is a folder; a name no folder can have (a part past the filesystem's 255
    bytes: ``Path.is_dir`` raises ENAMETOOLONG) is none, and is read as ``FILE:CLASS`` instead."""
    try:
        return path.is_dir()
    except OSError:
        return False


def _spec_from_pairs(text: str) -> PolicySpec:
    fields: dict[str, Any] = {"init_kwargs": {}, "python_path": [], "env": {}}
    for index, item in enumerate(part.strip() for part in text.split(",")):
        key, sep, value = item.partition("=")
        if not sep and index == 0:
            key, value = "class", item
        elif not sep:
            raise SpecError(f"policy spec {text!r}: {item!r} is not KEY=VALUE (keys: {KEYS})")
        key = key.strip()
        if key in SINGLE_KEYS and SINGLE_KEYS[key] in fields:
            raise SpecError(f"policy spec {text!r}: {key}= is given twice; give it once")
        if key == "class":
            fields["class_path"] = value
        elif key == "data":
            fields["data_path"] = value
        elif key == "name":
            fields["name"] = value
        elif key == "path":
            fields["python_path"].append(value)
        elif key.startswith(("kw.", "env.")) and len(key) > key.index(".") + 1:
            group, name = ("init_kwargs", key[3:]) if key.startswith("kw.") else ("env", key[4:])
            if name in fields[group]:
                raise SpecError(f"policy spec {text!r}: {key}= is given twice; give it once")
            fields[group][name] = _kw_value(value) if group == "init_kwargs" else _env_value(name, value)
        else:
            raise SpecError(f"policy spec {text!r}: unknown key {key!r} (keys: {KEYS})")
    if "class_path" not in fields:
        raise SpecError(f"policy spec {text!r} names no class: add class=NAME")
    return PolicySpec(**fields)


def _env_value(name: str, value: str) -> str:
    """``@FILE``: the file's content (one trailing newline dropped); ``$VAR``: policybox's own variable."""
    if value.startswith("@"):
        try:
            return Path(value[1:]).expanduser().read_text().removesuffix("\n")
        except OSError as exc:
            raise SpecError(f"env.{name}: cannot read {value[1:]!r} ({exc.strerror})") from None
    if value.startswith("$"):
        if value[1:] not in os.environ:
            raise SpecError(f"env.{name}: variable {value[1:]!r} is not set in policybox's environment")
        return os.environ[value[1:]]
    return value


def _check_env_names(spec: PolicySpec, origin: str) -> None:
    """Variables that would let a policy run code before its sandbox (as the dynamic linker reads
    them when a spawned cell starts) or move its scratch folder are refused."""
    for name in spec.env:
        if not ENV_NAME.match(name) or name.startswith(UNSAFE_ENV_PREFIXES) or name in UNSAFE_ENV:
            raise SpecError(f"{origin}: env.{name} may not be set for a policy (unsafe or reserved name)")


def _check_sizes(spec: PolicySpec, origin: str) -> None:
    """init_kwargs and env are each at most MAX_FIELD_BYTES as JSON (a checkpoint belongs in data_path)."""
    for field in ("init_kwargs", "env"):
        size = len(json.dumps(getattr(spec, field), default=str).encode())
        if size > MAX_FIELD_BYTES:
            raise SpecError(
                f"{origin}: {field} is {size} bytes as JSON, more than {MAX_FIELD_BYTES}: put large data in a file "
                "the spec names (data_path)"
            )


def _kw_value(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value


def load_spec_file(path: Path, given: str | None = None) -> PolicySpec:
    """Read a JSON or YAML spec file; its paths are relative to, and confined to, the file's folder.

    ``given`` is the path as the operator wrote it: it becomes the spec's ``name`` (its identity in
    the results) and is how error messages show the file.
    """
    shown = given or str(path)
    inside = Folder.at(path.parent, f"the spec file's folder {Path(shown).parent}")
    raw = _read_spec_file(inside.root / path.name, shown, inside)
    return _identified(check_spec(_validate(raw, shown), path.parent, inside, shown), shown)


def load_submission_dir(folder: Path, given: str | None = None) -> PolicySpec:
    """A submission folder: ``policy_spec.json`` (or else ``cogames.toml``) inside it, its paths relative
    to and confined to the folder. The first of them that is there at all (a symlink or a FIFO too) is
    the one read: what may not be read is refused, not passed over."""
    shown = given or str(folder)
    inside = Folder.at(folder, f"the submission folder {shown}")
    name = next((name for name in SUBMISSION_FILES if os.path.lexists(inside.root / name)), None)
    if name is None:
        raise SpecError(
            f"policy folder {shown} has no {SUBMISSION_SPEC} (nor a {SUBMISSION_MANIFEST}, nor a Kaggle {KAGGLE_AGENT})"
        )
    shown_file = str(Path(shown) / name)
    if name == KAGGLE_AGENT:  # Kaggle's submission: its main.py's last callable is the agent
        raw: Any = {"class_path": KAGGLE_AGENT}
    else:
        read = _read_manifest if name == SUBMISSION_MANIFEST else _read_spec_file
        raw = _without_mettagrid_fields(read(inside.root / name, shown_file, inside))
    raw = _with_requirements_file(raw, inside, shown)
    spec = check_spec(_validate(raw, shown_file), folder, inside, shown_file)
    if str(inside.root) not in spec.python_path:
        spec.python_path.insert(0, str(inside.root))
    return _identified(spec, shown)


def archive_top(unpacked: Path, given: str) -> Path:
    """The folder of an unpacked submission archive (``given``: as it was sent) that holds its spec: its top,
    or the one folder it holds (``zip -r delta.zip delta/`` puts ``delta/policy_spec.json`` inside), macOS's
    litter beside it aside. Any other archive without a spec at its top is refused, with the command that
    zips it right. The folder is the one ``policybox.submission`` wrote (plain files and folders only);
    its one folder is taken only as a folder, never through a link."""
    if any(os.path.lexists(unpacked / name) for name in SUBMISSION_FILES):
        return unpacked
    with os.scandir(unpacked) as entries:
        top = sorted((entry for entry in entries if entry.name not in ARCHIVE_LITTER), key=lambda entry: entry.name)
    folders = [entry for entry in top if entry.is_dir(follow_symlinks=False)]
    holding = [entry.name for entry in folders if any(os.path.lexists(Path(entry.path) / n) for n in SUBMISSION_FILES)]
    if len(top) == 1 and holding:
        return unpacked / holding[0]
    archive = Path(given).name
    tar = archive.endswith((".tar.gz", ".tgz"))
    pack = f"tar -czf ../{shlex.quote(archive)} ." if tar else f"zip -r ../{shlex.quote(archive)} ."
    where = f" (it is in its folder {holding[0]}/)" if holding else ""
    raise SpecError(
        f"submission {given} has no {SUBMISSION_SPEC} (nor a {SUBMISSION_MANIFEST}, nor a Kaggle {KAGGLE_AGENT}) at "
        f"its top{where}: pack the files of your submission folder, not the folder, e.g. "
        f"cd {shlex.quote(holding[0]) if holding else 'FOLDER'} && {pack}"
    )


def _with_requirements_file(raw: Any, inside: Folder, shown: str) -> Any:
    """A submission's spec with the lines of the ``requirements.txt`` beside it as its requirements."""
    path = inside.root / REQUIREMENTS_FILE
    if not isinstance(raw, dict) or not os.path.lexists(path):
        return raw
    shown_file = str(Path(shown) / REQUIREMENTS_FILE)
    if raw.get("requirements"):
        raise SpecError(f"{shown}: requirements are declared in its spec and in {REQUIREMENTS_FILE}: keep one of them")
    try:
        return {**raw, "requirements": _read_text(path, shown_file, inside).splitlines()}
    except UnicodeDecodeError:
        raise SpecError(f"{shown_file} is not UTF-8 text") from None


def _read_spec_file(path: Path, shown: str, inside: Folder) -> Any:
    try:
        data = untrusted_files.read(path, shown, inside, MAX_SPEC_FILE_BYTES)
    except untrusted_files.Missing:
        raise SpecError(f"policy spec file {shown} does not exist") from None
    try:
        text = data.decode()
        return yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else json.loads(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise SpecError(f"policy spec file {shown} is not valid {path.suffix[1:].upper()}: {exc}") from None


def _read_manifest(path: Path, shown: str, inside: Folder) -> Any:
    """A ``cogames.toml``'s ``[policy]`` table (MettaGrid's ``load_policy_manifest``), as a spec mapping."""
    try:
        manifest = tomllib.loads(_read_text(path, shown, inside))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SpecError(f"policy manifest {shown} is not valid TOML: {exc}") from None
    table = manifest.get("policy")
    if not isinstance(table, dict):
        raise SpecError(f"policy manifest {shown} has no [policy] table (with class_path = ...)")
    return table


def _read_text(path: Path, shown: str, inside: Folder) -> str:
    """A spec file's text, read as ``policybox.untrusted_files`` reads an entrant's file: inside its folder,
    regular, at most MAX_SPEC_FILE_BYTES (UnicodeDecodeError if not UTF-8)."""
    return untrusted_files.read(path, shown, inside, MAX_SPEC_FILE_BYTES).decode()


def _without_mettagrid_fields(raw: Any) -> Any:
    """Drop what MettaGrid's own tools write into ``policy_spec.json`` but policybox does not use:
    ``policy_env_interface`` describes the game the policy was packed for, and policybox gives each
    policy the game it actually plays."""
    if not isinstance(raw, dict):
        return raw
    return {key: value for key, value in raw.items() if key not in METTAGRID_ONLY_FIELDS}


def _identified(spec: PolicySpec, given: str) -> PolicySpec:
    """Identify a spec that came from a file by the operator's argument; what it declared is a label."""
    return spec.model_copy(update={"label": spec.name or spec.label, "name": given})


def _validate(raw: Any, origin: str) -> PolicySpec:
    if not isinstance(raw, dict):
        raise SpecError(f"{origin}: a policy spec must be a mapping with at least class_path")
    try:
        return PolicySpec.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'spec'}: {e['msg']}" for e in exc.errors())
        raise SpecError(f"{origin}: invalid policy spec: {problems}") from None


def file_path(file: str, cls: str) -> str:
    """The class path of a class in ``file`` (``file.py:Class``), or of the agent file itself (``cls`` empty)."""
    return f"{file}:{cls}" if cls else file


def check_spec(
    spec: PolicySpec, base_dir: Path, inside: Folder | None = None, origin: str = "policy spec"
) -> PolicySpec:
    """Check the class form and that every named file exists; return a copy with absolute paths.

    With ``inside`` (a spec an entrant wrote), every path must also resolve inside that folder.
    """
    spec = spec.model_copy(deep=True)
    _check_env_names(spec, origin)
    _check_sizes(spec, origin)

    def place(field: str, raw: str, what: str, value: str | None = None, must_exist: bool = True) -> Path:
        path = (base_dir / Path(raw).expanduser()).resolve()
        if inside is not None:
            inside.check(path, origin, field, raw if value is None else value)
        if must_exist and not path.exists():
            raise SpecError(f"{what} {raw!r} does not exist (looked for {path})")
        return path

    file_class = spec.file_and_class
    if file_class:
        file = place("class_path", file_class[0], "policy file", spec.class_path)
        spec.class_path = file_path(str(file), file_class[1])
    elif not (DOTTED.match(spec.class_path) or SHORTHAND.match(spec.class_path)):
        raise SpecError(
            f"policy {spec.class_path!r} is neither a shorthand (random), a dotted path (pkg.mod.Class), "
            "a file path (path/to/file.py:Class) nor an agent file (path/to/main.py)"
        )
    if spec.setup_script is not None:
        script = place("setup_script", spec.setup_script, "setup script")
        if script.suffix != ".py" or not script.is_file():
            raise SpecError(f"{origin}: setup_script {spec.setup_script!r} must be a Python file (.py)")
        spec.setup_script = str(script)
    if spec.data_path is not None:  # a setup script may make it
        spec.data_path = str(place("data_path", spec.data_path, "checkpoint (data)", must_exist=not spec.setup_script))
    spec.python_path = [
        str(place(f"python_path[{index}]", entry, "python path folder")) for index, entry in enumerate(spec.python_path)
    ]
    spec.requirements = _requirements(spec.requirements, origin)
    return spec


def _requirements(lines: list[str], origin: str) -> list[str]:
    """``lines`` as requirements uv may be given: each a name with optional extras, versions and
    markers. Options (``--index-url``, ``-e``), URLs and paths are refused: a spec does not choose
    where packages come from, the organiser does."""
    cleaned = []
    for raw in lines:
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if not line.isprintable():
            raise SpecError(f"{origin}: requirement {ascii(line[:SHOWN_REQUIREMENT])} holds a control character")
        try:
            requirement = Requirement(line)
        except InvalidRequirement as exc:
            raise SpecError(
                f"{origin}: requirement {line[:SHOWN_REQUIREMENT]!r} is not a package requirement ({exc})"
            ) from None
        if requirement.url:
            raise SpecError(
                f"{origin}: requirement {line[:SHOWN_REQUIREMENT]!r} names a URL; give a name and versions "
                "(pkg==1.2): packages come from the organiser's index"
            )
        cleaned.append(str(requirement))
    return cleaned
