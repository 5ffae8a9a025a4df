"""Helpers of the guarantee tests (``tests/test_guarantee_*.py``): a simulated dashboard, forked
``fsm`` commands, kill points."""
