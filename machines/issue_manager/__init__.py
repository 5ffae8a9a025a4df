"""issue-manager: list issues, plan each, queue the solutions, execute them one by one, report.

The machine of seed 003 (the ``codex-issue-plan-execute`` skill) made explicit: ``machine.yaml``
holds the states and transitions, :mod:`.functions` the guards, actions and hooks, :mod:`.model`
the state document, and the other modules the domain (issues file, solutions, planning,
execution, side files, report).
"""
