"""The foundation: what every layer stands on and that knows nothing of machines: the error tree,
the clock, JSON reading and writing, safe file primitives, ids, updates, the code cache and
logging set-up. It imports no other part of fsm.
"""
