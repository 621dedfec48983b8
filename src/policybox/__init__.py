"""policybox: run every agent's policy of a multi-agent episode in its own sandboxed OS process.

Entry points: ``policybox.episode.run_episode`` (one episode) and the ``policybox`` CLI.
This module stays import-light: every cell imports it before anything else.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("policybox")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"
