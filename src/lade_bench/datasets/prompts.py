"""Turning a sample (and the arm's own earlier answers) into prompt token ids."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lade_bench.datasets import prompt_formats
from lade_bench.datasets.prompt_formats import PLAIN
from lade_bench.datasets.sample import Sample


def _check_turn(sample: Sample, turn_index: int, history: Sequence[tuple[str, str]]) -> None:
    # The history must be exactly this sample's earlier turns: a wrong length or a user message
    # from another sample would silently build a prompt that no arm should see.
    if not 0 <= turn_index < len(sample.turns):
        raise IndexError(f"sample {sample.sample_id!r} has {len(sample.turns)} turn(s); no turn {turn_index}")
    if len(history) != turn_index:
        raise ValueError(
            f"sample {sample.sample_id!r} turn {turn_index}: history must hold the {turn_index} earlier "
            f"(user, assistant) pair(s), got {len(history)}"
        )
    for i, (user, _assistant) in enumerate(history):
        if user != sample.turns[i]:
            raise ValueError(f"sample {sample.sample_id!r}: history[{i}] user message is not turn {i}")


def build_messages(
    sample: Sample,
    turn_index: int,
    history: Sequence[tuple[str, str]],
    system_prompt: str | None = None,
) -> list[dict[str, str]]:
    """Return the chat messages for ``turn_index``: system, earlier (user, assistant) pairs, user turn.

    ``history`` holds the answers of the same arm (for MT-Bench turn 2, that arm's own turn-1
    answer), so the two arms of a comparison can diverge after turn 1 exactly as they would in use.
    """
    _check_turn(sample, turn_index, history)
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    for user, assistant in history:
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
    messages.append({"role": "user", "content": sample.turns[turn_index]})
    return messages


def completion_text(
    sample: Sample,
    turn_index: int,
    history: Sequence[tuple[str, str]],
    system_prompt: str | None = None,
    completion_format: str = PLAIN,
) -> str:
    """Return the raw text a base/code model continues for ``turn_index``.

    Code tasks use ``completion_prefix`` (e.g. HumanEval's function header and docstring) verbatim,
    trailing newline included, since the model must continue the code itself. Other tasks: ``plain``,
    the user turn preceded by any earlier turns and answers, joined by blank lines; ``cued``, each turn
    after its task's label and ending in its answer cue (``datasets.prompt_formats``).
    """
    _check_turn(sample, turn_index, history)
    return prompt_formats.completion_text(sample, turn_index, history, system_prompt, completion_format)


def _encode_plain(tokenizer: Any, text: str) -> list[int]:
    # Encode with no special tokens, then add back only a leading BOS if this tokenizer's own
    # convention for plain text has one (Llama-style models need it; GPT-2-style have none).
    # An EOS that some tokenizers append would end the prompt before generation starts.
    ids = list(tokenizer.encode(text, add_special_tokens=False))
    bos = tokenizer.bos_token_id
    if bos is not None and ids[:1] != [bos]:
        probe = tokenizer.encode("a", add_special_tokens=True)
        if probe and probe[0] == bos:
            ids.insert(0, bos)
    return ids


def render_prompt(
    tokenizer: Any,
    sample: Sample,
    turn_index: int,
    history: Sequence[tuple[str, str]],
    *,
    chat: bool,
    system_prompt: str | None = None,
    completion_format: str = PLAIN,
) -> list[int]:
    """Return the prompt token ids for one turn of one sample.

    Args:
        tokenizer: a transformers tokenizer; with ``chat=True`` it must have a chat template.
        sample: the sample.
        turn_index: 0-based turn to prompt for.
        history: the (user, assistant) pairs of turns ``0 .. turn_index-1`` as produced by the same
            arm; empty for the first turn.
        chat: True for chat models (the tokenizer's chat template with the generation prompt
            appended); False for base/code models (``completion_text``, plain-encoded).
        system_prompt: optional system message (chat) or leading paragraph (completion).
        completion_format: with ``chat=False``, ``cued`` (task label and answer cue) or ``plain``
            (``datasets.prompt_formats``).

    Returns:
        Token ids, list of length prompt_tokens.
    """
    if not chat:
        text = completion_text(sample, turn_index, history, system_prompt, completion_format)
        return _encode_plain(tokenizer, text)
    if getattr(tokenizer, "chat_template", None) is None:
        raise ValueError("tokenizer has no chat template: use chat=False for base or code-completion models")
    messages = build_messages(sample, turn_index, history, system_prompt)
    # The template adds its own BOS where the model wants one, so nothing else is added here.
    out = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    ids = out["input_ids"] if isinstance(out, Mapping) else out
    return [int(i) for i in ids]


def filter_by_prompt_length(
    samples: Sequence[Sample],
    tokenizer: Any,
    max_prompt_tokens: int,
    chat: bool,
    *,
    system_prompt: str | None = None,
    completion_format: str = PLAIN,
) -> tuple[list[Sample], list[str]]:
    """Split samples into those whose prompts fit in ``max_prompt_tokens`` and the ids of the rest.

    Every turn is measured with empty earlier answers, a lower bound on the real later-turn
    prompt (which also holds the arm's own answers): a sample skipped here can never fit, while the
    runner must still budget answer tokens for later turns. Order is preserved.

    Returns:
        (kept samples, skipped sample ids) so the runner can record how many were skipped and why.
    """
    if max_prompt_tokens < 1:
        raise ValueError(f"max_prompt_tokens must be >= 1, got {max_prompt_tokens}")
    kept, skipped = [], []
    for sample in samples:
        longest = max(
            len(
                render_prompt(
                    tokenizer,
                    sample,
                    i,
                    [(sample.turns[j], "") for j in range(i)],
                    chat=chat,
                    system_prompt=system_prompt,
                    completion_format=completion_format,
                )
            )
            for i in range(len(sample.turns))
        )
        if longest <= max_prompt_tokens:
            kept.append(sample)
        else:
            skipped.append(sample.sample_id)
    return kept, skipped
