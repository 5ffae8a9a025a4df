"""Static diagnoses of a skill's markdown and code blocks, one module of rules per area.

``rule`` defines what a rule is; ``context``, ``memory``, ``dataflow`` and ``agent`` hold the
rules of each area; ``run`` runs them and turns findings into issues.
"""
