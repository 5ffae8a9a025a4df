"""A stand-in planning agent for the issue-manager sample workspace.

The machine runs it as ``python3 plan_agent.py PROMPT`` (``[agent.codex]`` in fsm.toml) for an
issue without a solution file. It reads the issue id from the prompt ("Plan a solution for issue
ISS-4: ...") and prints a solution as a fenced JSON block, as a real agent would answer; for an
issue it has no plan for, it prints a failed answer, which leaves the issue registered with the
reason as its error.
"""

from __future__ import annotations

import json
import re
import sys

PLANS = {
    "ISS-4": {
        "description": "Write a changelog for 0.2.0, then check it",
        "tasks": [
            {
                "id": "T1",
                "title": "Write CHANGELOG.md",
                "command": (
                    "printf '# Changelog\\n\\n## 0.2.0\\n- Fixed the greeting typo\\n'"
                    " > CHANGELOG.md"
                ),
                "depends_on": [],
                "acceptance": {"criteria": ["CHANGELOG.md has a 0.2.0 section"]},
            },
            {
                "id": "T2",
                "title": "Check the changelog",
                "command": "grep -q '^## 0.2.0$' CHANGELOG.md",
                "depends_on": ["T1"],
            },
        ],
    }
}


def main(argv: list[str]) -> int:
    """Answer the planning prompt in ``argv[1]``."""
    prompt = argv[1] if len(argv) > 1 else ""
    found = re.search(r"Plan a solution for issue (\S+):", prompt)
    if found is None:
        print("plan_agent.py only plans issues; it got another request", file=sys.stderr)
        return 2
    issue_id = found.group(1)
    plan = PLANS.get(issue_id)
    if plan is None:
        answer: dict[str, object] = {
            "status": "failed",
            "error_message": f"the stand-in planner has no plan for {issue_id}",
        }
    else:
        answer = {"id": f"SOL-{issue_id}-1", **plan}
    print(f"Plan for {issue_id}:")
    print("```json")
    print(json.dumps(answer, indent=2))
    print("```")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
