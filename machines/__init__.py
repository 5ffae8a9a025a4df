"""The machines bundled with fsm, installed as ``fsm_machines``.

Each package holds a ``machine.yaml`` and the module it names; pyproject registers each one in
the ``fsm.machines`` entry-point group, exactly as a third-party machine registers.
"""
