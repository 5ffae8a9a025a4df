"""review-queue: review a queue of files with an agent, one file per step (an fsm machine).

The package registers the machine for fsm through its entry point (see pyproject.toml); fsm
finds ``machine.yaml`` beside this file.
"""
