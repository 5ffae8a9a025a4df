"""Fixes: proposing them (``proposal``), computing mechanical changes (``mechanical`` on top of
``edit``), applying, verifying and rolling them back (``apply``)."""
