"""Import a policy class named by a PolicySpec -- only ever inside the cell (or inline mode)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from policybox.spec import PolicySpec


def add_import_roots(spec: PolicySpec) -> None:
    for root in reversed(spec.python_path):
        if root not in sys.path:
            sys.path.insert(0, root)


def load_policy_class(spec: PolicySpec, resolve_shorthand: Any) -> Any:
    """The object ``spec.class_path`` names (checked to be a policy later, by the env's cell half)."""
    add_import_roots(spec)
    file_class = spec.file_and_class
    if file_class and not file_class[1]:
        return _last_callable(Path(file_class[0]))
    if file_class:
        return _attribute(_import_file(Path(file_class[0])), file_class[1], spec.class_path)
    if not spec.is_shorthand:
        return _import_dotted(spec.class_path)
    class_path = resolve_shorthand(spec.class_path)
    try:
        return _import_dotted(class_path)
    except ImportError as exc:  # a bundled policy whose optional dependencies are not installed
        raise ImportError(_missing_dependency(spec.class_path, class_path, exc)) from exc


def _missing_dependency(shorthand: str, class_path: str, exc: ImportError) -> str:
    needs = f"needs {exc.name!r}" if isinstance(exc, ModuleNotFoundError) and exc.name else "cannot be imported"
    return (
        f"policy shorthand {shorthand!r} ({class_path}) {needs}: {exc}. For MettaGrid's network policies "
        "(lstm, stateless, puffer...) install policybox's torch extra, as "
        "docs/neural-networks.md shows"
    )


def _import_file(path: Path) -> Any:
    if not path.is_file():
        raise FileNotFoundError(f"policy file {path} does not exist")
    # A policy file may import its sibling modules, as it would when run as a script.
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module_name = f"policybox_policy_{path.stem}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise ImportError(f"cannot import {path} as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    module_spec.loader.exec_module(module)
    return module


def _last_callable(path: Path) -> Any:
    """An agent file's agent, found as Kaggle finds it: the file run in a namespace of its own (not as
    ``__main__``), its folder importable; the last callable it defines or imports."""
    if not path.is_file():
        raise FileNotFoundError(f"agent file {path} does not exist")
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    namespace: dict[str, Any] = {"__file__": str(path)}
    exec(compile(path.read_bytes(), str(path), "exec"), namespace)  # inside the cell: this is the agent's own code
    found = [value for value in namespace.values() if callable(value)]
    if not found:
        raise TypeError(f"agent file {path} defines no callable: its last function is the agent")
    return found[-1]


def _import_dotted(class_path: str) -> Any:
    parts = class_path.split(".")
    # Try the longest importable module prefix, then walk attributes (allows Outer.Inner classes).
    for split in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:split])
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue  # this prefix is not a module; try a shorter one
            raise  # the module exists but one of its own imports is missing
        return _attribute(module, ".".join(parts[split:]), class_path)
    raise ModuleNotFoundError(f"no module found for policy class {class_path!r}")


def _attribute(module: Any, dotted: str, class_path: str) -> Any:
    value = module
    for name in dotted.split("."):
        if not hasattr(value, name):
            where = getattr(module, "__file__", None) or getattr(module, "__name__", module)
            raise AttributeError(f"no class {dotted!r} in {where}; it defines {_classes(module)}")
        value = getattr(value, name)
    return value


def _classes(module: Any) -> str:
    """The classes a module defines itself (not those it imports), to name in a message."""
    own = sorted(
        name
        for name, value in vars(module).items()
        if isinstance(value, type) and getattr(value, "__module__", None) == module.__name__
    )
    return ", ".join(own) if own else "no classes"
