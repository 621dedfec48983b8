"""policybox: run every agent's policy of a multi-agent episode in its own sandboxed OS process.

The public API is named here and imported on first use (PEP 562), because this module must stay
import-light: every cell imports it before anything else, and must not pull in the host's code.

    import policybox
    summary = policybox.evaluate(["random", "noop"], out="board", episodes=4, steps=100)
    verdict = policybox.versus("noop", "random", out="ab", steps=100).verdict
    result = policybox.run_episode(["random"], agents=4)
    ladder = policybox.Ladder.create("cup", policybox.LadderSettings(settings=policybox.EpisodeSettings(), agents=4))
"""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "evaluate": "policybox.league.evaluate.results_folder",
    "load_summary": "policybox.league.evaluate.results_folder",
    "versus": "policybox.league.evaluate.versus",
    "VersusResult": "policybox.league.evaluate.versus",
    "run_episode": "policybox.episode",
    "EpisodeSettings": "policybox.settings",
    "Limits": "policybox.limits",
    "PolicySpec": "policybox.spec",
    "parse_policy_arg": "policybox.spec",
    "EpisodeResult": "policybox.results",
    "AgentResult": "policybox.results",
    "EpisodeRecord": "policybox.results",
    "Summary": "policybox.league.views.summary",
    "Ladder": "policybox.ladder",
    "LadderSettings": "policybox.ladder",
    "Zygote": "policybox.host.zygote",
    "kept_zygotes": "policybox.host.zygote",
    "kept_workers": "policybox.league.play.worker_pool",
    "PolicyboxError": "policybox.errors",
    "SpecError": "policybox.errors",
    "NotFound": "policybox.errors",
    "ConfigError": "policybox.envs",
    "SandboxUnavailable": "policybox.sandbox",
    "ZygoteError": "policybox.host.zygote",
    "StorageFull": "policybox.storage",
}
__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str) -> Any:
    if name == "__version__":  # on first use too: importlib.metadata costs a ``python -m policybox`` start
        return _version()
    if name not in _EXPORTS:
        raise AttributeError(f"module 'policybox' has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("policybox")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0+unknown"
