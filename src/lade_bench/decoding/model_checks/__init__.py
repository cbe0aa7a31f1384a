"""The model checks every drafting method runs before its first step: a real probe of the model's masked,
position-explicit forward against its causal one (``model_probe``) and the support decision built on it
(``support``). Above ``core``, below every method room.
"""
