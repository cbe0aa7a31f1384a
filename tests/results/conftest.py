import pytest

from .results_helpers import make_row as _make_row


@pytest.fixture
def make_row():
    return _make_row
