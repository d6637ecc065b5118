"""``python -m tractkv`` runs the command line."""

from tractkv.cli import main

main()
