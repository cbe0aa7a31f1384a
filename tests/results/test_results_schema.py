import typing

import numpy as np
import pyarrow as pa
import pytest

from lade_bench.methods import method_names
from lade_bench.results import ARMS, COLUMN_NAMES, COLUMNS, KEY_COLUMNS, ROW_SCHEMA, Row, validate_row


def test_everything_derives_from_one_column_list():
    assert ROW_SCHEMA.names == list(COLUMN_NAMES) == [c.name for c in COLUMNS]
    assert list(typing.get_type_hints(Row)) == list(COLUMN_NAMES)
    assert set(KEY_COLUMNS) <= set(COLUMN_NAMES)
    assert ROW_SCHEMA.field("accept_lengths").type == pa.list_(pa.int32())
    assert ROW_SCHEMA.field("output_ids").type == pa.list_(pa.int32())
    assert not ROW_SCHEMA.field("cell_id").nullable
    assert ROW_SCHEMA.field("error").nullable
    assert ARMS == method_names()


def test_the_arms_are_the_registrys_when_asked():
    import lade_bench.results as results
    from lade_bench.methods import Method, register, unregister

    register(Method("zz_later", lambda request: None, label="Later", color="#000004"))
    try:
        assert results.ARMS[-1] == "zz_later"
    finally:
        unregister("zz_later")
    assert "zz_later" not in results.ARMS


def test_valid_row_is_normalised(make_row):
    row = make_row(
        turn=np.int64(1),
        temperature=1,  # int in a float column
        accept_lengths=(np.int32(1), 3),
        do_sample=np.bool_(False),
        wall_time_s=np.float32(0.5),
    )
    out = validate_row(row)
    assert list(out) == list(COLUMN_NAMES)
    assert type(out["turn"]) is int and out["turn"] == 1
    assert type(out["temperature"]) is float
    assert out["accept_lengths"] == [1, 3] and all(type(x) is int for x in out["accept_lengths"])
    assert out["do_sample"] is False
    assert type(out["wall_time_s"]) is float


@pytest.mark.parametrize(
    ("override", "column"),
    [
        ({"turn": "0"}, "turn"),
        ({"repeat": True}, "repeat"),  # bool is not an int here
        ({"wall_time_s": "fast"}, "wall_time_s"),
        ({"do_sample": 0}, "do_sample"),
        ({"sample_id": 3}, "sample_id"),
        ({"accept_lengths": [1, "2"]}, "accept_lengths"),
        ({"accept_lengths": "12"}, "accept_lengths"),
        ({"output_ids": [2**31]}, "output_ids"),
        ({"model": None}, "model"),
        ({"new_tokens": None}, "new_tokens"),
        ({"arm": "medusa"}, "arm"),
        ({"arm": "ar", "matches_ar": True}, "matches_ar"),
        ({"do_sample": True, "matches_ar": False}, "matches_ar"),
    ],
)
def test_bad_value_names_the_column(make_row, override, column):
    with pytest.raises(ValueError, match=f"'{column}'"):
        validate_row(make_row(**override))


def test_missing_and_unknown_columns_are_named(make_row):
    row = make_row()
    del row["decode_steps"], row["rouge2"]
    with pytest.raises(ValueError, match="missing column.*decode_steps, rouge2"):
        validate_row(row)
    with pytest.raises(ValueError, match="unknown column.*walltime"):
        validate_row({**make_row(), "walltime": 1.0})


def test_errored_row_may_omit_measurements(make_row):
    nulls = dict.fromkeys(
        [
            "prompt_tokens",
            "new_tokens",
            "decode_steps",
            "wall_time_s",
            "forward_time_s",
            "accept_lengths",
            "tokens_per_s",
            "compression_ratio",
            "output_ids",
            "output_text",
        ]
    )
    out = validate_row(make_row(**nulls, matches_ar=None, error="CUDA out of memory"))
    assert out["error"] == "CUDA out of memory" and out["new_tokens"] is None


def test_quality_and_shape_columns_are_nullable(make_row):
    out = validate_row(make_row(arm="ar", matches_ar=None, ngram=None, window=None, guesses=None, rouge1=0.5))
    assert out["ngram"] is None and out["rouge1"] == 0.5
