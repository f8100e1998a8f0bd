"""The command groups of ``landcover`` (``data``, ``cluster``) and the options commands share.

:mod:`landcover.cli` assembles them with ``train``, ``predict`` and ``evaluate`` into one
typer app and runs it.
"""
