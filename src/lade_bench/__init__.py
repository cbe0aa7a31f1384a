"""lade_bench: exact Lookahead Decoding and the benchmark suite around it."""

from pathlib import Path

__version__ = "0.1.0"


def custom_generate_path() -> str:
    """Path of the transformers custom generation folder that runs lookahead decoding.

    Use it as ``model.generate(input_ids, custom_generate=lade_bench.custom_generate_path(),
    trust_remote_code=True, max_new_tokens=..., lookahead_n=5, lookahead_w=7, lookahead_g=7)``. A
    ``str``, not a Path: transformers only treats a string ``custom_generate`` as a folder to load.

    Raises:
        FileNotFoundError: if the folder is missing (an install that dropped the package data).
    """
    folder = Path(__file__).resolve().parent / "custom_generate_repo"
    if not (folder / "custom_generate" / "generate.py").is_file():
        raise FileNotFoundError(
            f"{folder / 'custom_generate' / 'generate.py'} is missing: reinstall lade-bench from its repository "
            "(`pip install .`), which ships the folder as package data"
        )
    return str(folder)
