"""What a machine is: the definition schema, YAML loading and its limits, the static checks,
the loaded machine and its registry of guards and actions, options and inputs, the journal's
records, the context and outcome a machine's functions see. Imports the layers below only.
"""
