"""``python -m edgefl`` runs the command line."""

from edgefl.cli import main

main()
