"""Model loading: embedded SmolLM2, Gemma-3-270M and Qwen2.5-Coder (GGUF -> cached safetensors), tiny test models."""

from lade_bench.models.embedded import converted_smollm2_dir, load_embedded_smollm2
from lade_bench.models.gemma3 import converted_gemma3_dir, load_embedded_gemma3
from lade_bench.models.tiny import TINY_ARCHITECTURES, tiny_model

__all__ = [
    "TINY_ARCHITECTURES",
    "converted_gemma3_dir",
    "converted_smollm2_dir",
    "load_embedded_gemma3",
    "load_embedded_smollm2",
    "tiny_model",
]
