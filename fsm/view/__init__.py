"""Showing machines and instances: diagrams (the only module importing Graphviz), ``fsm ls`` and
its index and filters, history, status, progress lines and terminal output. Reads through the
engine and the store protocol; writes nothing but diagrams and the listing's cache.
"""
