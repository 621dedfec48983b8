"""An entrant that writes to the operator's terminal: it prints, and raises with, the sequences that
clear the screen, set the window title, plant a hyperlink, move the cursor up and erase a line (to
forge a status), a C1 control and rich markup. The tests judge the bytes the terminal received."""

import os
import signal

from mettagrid.policy.policy import AgentPolicy, MultiAgentPolicy

SEQUENCES = (
    "\x1b[2J"  # clear the screen
    "\x1b]0;PWNED-TITLE\x07"  # set the window title, ended by BEL
    "\x1b]8;;http://evil.example/\x1b\\click me\x1b]8;;\x1b\\"  # an OSC 8 hyperlink
    "\x1b[1A\x1b[2KFORGED-STATUS ok"  # up one line, erase it, write a forged status
    "\x9b31mC1-CSI"  # a C1 control sequence introducer (U+009B)
    "[bold red]MARKUP[/]"  # rich markup: shown as written, never as style
    "\r\u202eREVERSED"  # carriage return and a right-to-left override
)


class _Forger(AgentPolicy):
    def __init__(self, policy_env_info, at_step, crash):
        super().__init__(policy_env_info)
        self._at_step, self._crash, self._steps = at_step, crash, 0

    def step(self, observation):
        self._steps += 1
        if self._steps == self._at_step:
            print("log says: " + SEQUENCES, flush=True)
            if self._crash:
                os.kill(os.getpid(), signal.SIGSEGV)
            raise RuntimeError("policy says: " + SEQUENCES + "\ud800")  # and a lone surrogate
        return "noop"


class ForgeTerminal(MultiAgentPolicy):
    """Prints the sequences to its log, then raises with them at step ``at_step``; with
    ``crash=True`` it kills itself instead, so only its log tells what it printed."""

    def __init__(self, policy_env_info, at_step=2, crash=False, **kwargs):
        super().__init__(policy_env_info, **kwargs)
        self._at_step, self._crash = at_step, crash

    def agent_policy(self, agent_id):
        return _Forger(self.policy_env_info, self._at_step, self._crash)
