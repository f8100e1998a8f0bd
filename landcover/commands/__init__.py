"""The commands of ``landcover`` but ``train``, and the options commands share.

``predict`` and ``evaluate`` (:mod:`.mapping`), ``export``, ``view``, and the ``data`` and
``cluster`` command groups; :mod:`.options` holds the options several commands take.
:mod:`landcover.cli` assembles them with ``train`` into one typer app and runs it.
"""
