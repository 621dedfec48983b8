"""The test suite as a house: what several test files share lives in ``conftest.py`` or a module of
``tests/helpers/``, never in a test file, so that no test file imports another (nor its fixtures: a
fixture several files use is conftest's, or a helper module's that conftest loads as a plugin); one
``free_port`` picks the servers' ports.

Read from the source with ``ast``: every import, also those inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

import conftest

TESTS = Path(__file__).parent


def python_files() -> list[Path]:
    return sorted(path for path in TESTS.rglob("*.py") if "__pycache__" not in path.parts)


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def defined(path: Path) -> list[ast.FunctionDef]:
    return [node for node in ast.parse(path.read_text()).body if isinstance(node, ast.FunctionDef)]


def is_fixture(function: ast.FunctionDef) -> bool:
    return any("fixture" in ast.unparse(decorator) for decorator in function.decorator_list)


def test_no_file_of_the_suite_imports_a_test_file():
    test_files = {path.stem for path in TESTS.glob("test_*.py")}
    importing = {
        str(path.relative_to(TESTS)): sorted(imported(path) & test_files)
        for path in python_files()
        if imported(path) & test_files
    }
    assert importing == {}, "move what they share to conftest.py or a module of tests/helpers/"


def test_a_helper_module_with_fixtures_is_loaded_by_conftest_as_a_plugin():
    with_fixtures = {
        f"helpers.{path.stem}" for path in (TESTS / "helpers").glob("*.py") if any(map(is_fixture, defined(path)))
    }
    assert with_fixtures <= set(conftest.pytest_plugins), with_fixtures - set(conftest.pytest_plugins)


def test_one_free_port():
    owners = [
        f"{path.relative_to(TESTS)}:{function.name}"
        for path in python_files()
        for function in defined(path)
        if function.name.strip("_") == "free_port"
    ]
    assert owners == ["helpers/ports.py:free_port"]
