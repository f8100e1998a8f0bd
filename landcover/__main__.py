"""``python -m landcover`` runs the command line."""

from landcover.cli import main

main()
