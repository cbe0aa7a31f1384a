"""The baselines lookahead is measured against: autoregressive decoding, assisted generation (a draft
model) and Jacobi decoding (lookahead's window without a pool).
"""
