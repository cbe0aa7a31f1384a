"""Model loading: the embedded SmolLM2 and Gemma-3-270M (GGUF -> cached safetensors), tiny random test models."""

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
