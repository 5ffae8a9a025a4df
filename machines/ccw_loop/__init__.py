"""ccw-loop: the CCW develop/debug/validate loop as an explicit machine (SPEC section 4.1).

``machine.yaml`` holds the states and the ordered phase rules; ``functions.py`` names the guards,
actions and hooks; ``model.py`` is the ``LoopState`` document the CCW dashboard shares.
"""
