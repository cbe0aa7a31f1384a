"""Drafting methods on the draft-tree seam (``draft_tree``): prompt lookup, Token Recycling,
SuffixDecoding, REST, SAM-Decoding and PIA. Each proposes a tree; ``draft_tree`` verifies it exactly.
"""
