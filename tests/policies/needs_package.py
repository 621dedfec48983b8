"""Imports a package the host does not have -- its submission's requirements bring it -- and refuses to
play unless it sees the version it was told to expect (so an agent that plays ok saw its own version)."""

import importlib.metadata
import socket
from pathlib import Path

import more_itertools
from mettagrid.policy.noop import NoopPolicy


class NeedsPackage(NoopPolicy):
    def __init__(self, policy_env_info, expect: str, **kwargs):
        found = importlib.metadata.version("more-itertools")
        if more_itertools.__version__ != expect or found != expect:
            raise RuntimeError(f"expected more-itertools {expect}, imported {more_itertools.__version__} ({found})")
        print("more-itertools", more_itertools.__version__, "from", more_itertools.__file__, flush=True)
        super().__init__(policy_env_info, **kwargs)


class NeedsPackageOnline(NeedsPackage):
    """The same, and then it tries to reach a TCP listener on the host and to change its environment for
    whoever uses it next (a file planted beside the package, the package's own code rewritten), printing
    what happened."""

    def __init__(self, policy_env_info, expect: str, port: int, **kwargs):
        super().__init__(policy_env_info, expect, **kwargs)
        package = Path(more_itertools.__file__).parent
        attempt("tcp", lambda: socket.create_connection(("127.0.0.1", port), timeout=3).close())
        attempt("plant", lambda: (package / "planted.py").write_text("print('planted')"))
        attempt("rewrite", lambda: (package / "__init__.py").open("a").write("\nraise SystemExit\n"))


def attempt(name, action):
    try:
        action()
        print(f"{name}: succeeded", flush=True)
    except OSError as exc:
        print(f"{name}: refused {type(exc).__name__}: {exc}", flush=True)
