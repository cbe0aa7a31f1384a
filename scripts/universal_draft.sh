# Sourced by the reference scripts that run the assisted arm on Gemma-3-270M with SmolLM2-135M as its
# draft (two tokenizers: transformers' universal assisted decoding), so that the pairing's settings
# live in one place.
#
# Lookbehinds that span every proposal (30 >= num_assistant_tokens=20): transformers re-aligns the
# draft's ids on the last *lookbehind* tokens only, so with its default 10 a round's 20 rejected
# proposals stay in the draft's context (docs/assisted.md: one XSum article, 64 tokens, 40 -> 22
# target steps).
# shellcheck disable=SC2034  # read by the script that sources this file
smollm2_draft_for_gemma=(model@assistant.model=smollm2 assistant.assistant_lookbehind=30 assistant.target_lookbehind=30)
