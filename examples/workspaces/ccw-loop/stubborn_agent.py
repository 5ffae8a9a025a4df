"""A stand-in for a fix agent that says it fixed the bug and changed nothing.

The demo's failing ccw-loop scenario makes it the codex agent (its fsm.toml names this script
instead of fix_agent.py). Real agents do this: they answer "fixed" and leave every file as it
was. The loop sees that no file changed, counts each such fix as failed, tries again at once
(there is nothing new to validate) and, after ``max_fix_attempts`` (3), gives up on the test
and ends failed.
"""

from __future__ import annotations

import sys


def main(prompt: str) -> int:
    """Claim success, whatever the prompt says, and touch nothing."""
    print("stubborn_agent: I fixed the median (I did not change any file)")
    return 0


if __name__ == "__main__":
    sys.exit(main(" ".join(sys.argv[1:])))
