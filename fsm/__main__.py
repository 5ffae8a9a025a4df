"""``python -m fsm`` runs the command line."""

from fsm.cli import main_entry

main_entry()
