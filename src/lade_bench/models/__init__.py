"""Model loading: the embedded SmolLM2 (GGUF -> cached safetensors) and tiny random test models."""

from lade_bench.models.embedded import converted_smollm2_dir, load_embedded_smollm2
from lade_bench.models.tiny import TINY_ARCHITECTURES, tiny_model

__all__ = ["TINY_ARCHITECTURES", "converted_smollm2_dir", "load_embedded_smollm2", "tiny_model"]
