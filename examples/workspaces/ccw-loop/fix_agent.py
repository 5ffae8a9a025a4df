"""A stand-in for the codex agent, so the demo needs no network and no account.

fsm runs it as ``python3 fix_agent.py "<prompt>"`` in the workspace (see fsm.toml). Asked to fix
a failing median test, it does what a real agent would: it rewrites ``median`` in stats.py to take
the mean of the two middle values for an even count. Any other prompt leaves the files alone.
"""

from __future__ import annotations

import sys
from pathlib import Path

BUGGY = "    return ordered[middle]\n"
FIXED = (
    "    if len(ordered) % 2:\n"
    "        return ordered[middle]\n"
    "    return (ordered[middle - 1] + ordered[middle]) / 2\n"
)


def main(prompt: str) -> int:
    """Fix the median bug when the prompt is about it; say what was done."""
    source = Path("stats.py")
    if "median" not in prompt.lower():
        print("fix_agent: the prompt is not about the median; nothing changed")
        return 0
    text = source.read_text(encoding="utf-8")
    if BUGGY not in text:
        print("fix_agent: stats.py has no median bug left to fix")
        return 0
    source.write_text(text.replace(BUGGY, FIXED), encoding="utf-8")
    print("fix_agent: median now averages the two middle values of an even count (stats.py)")
    return 0


if __name__ == "__main__":
    sys.exit(main(" ".join(sys.argv[1:])))
