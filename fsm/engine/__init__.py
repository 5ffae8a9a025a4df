"""Running machines: the step (the only module importing ``transitions``), the transaction that
commits a step over a store's primitives, the document rules, merging and versions, the control
plane, retry, recovery, and the workspace and its instances.
"""
