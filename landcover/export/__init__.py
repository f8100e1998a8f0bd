"""``landcover export``: a checkpoint's model as ONNX or a torch exported program, described.

:mod:`.describe` says what the model needs (``model.json``), :mod:`.artifacts` writes and
checks the model file, :mod:`.stacmlm` describes it as a STAC item with the Machine Learning
Model extension, and :mod:`.command` writes the three into a folder, whole or not at all.
"""
