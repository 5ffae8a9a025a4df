"""Where documents and journals are kept: the store protocol (:mod:`fsm.store.protocol`), the
file store and its file tricks, the journal files, the memory store, and the choice of store.
Nothing here validates, merges or runs a machine.
"""
