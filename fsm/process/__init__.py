"""Running programs for a step: the executor (shell commands and agent CLIs, each with a timeout
that kills its whole process tree), the agent CLIs fsm knows and their output formats, secret
redaction, and the records of commands a killed run left running. Imports the foundation only.
"""
