"""Coverage of a machine by journals: the edges, guard outcomes, control commands and final
states a machine declares against those its instances' records show taken (a test session's,
through ``pytest --fsm-cov``, or production's, through ``fsm coverage``).
"""
