"""The one chunking helper for IN-clauses (no database needed)."""

import pytest

from andreas.store.chunks import CHUNK, chunks


def test_chunks_keep_order_and_bound_the_size():
    parts = list(chunks(range(2 * CHUNK + 5)))
    assert [len(p) for p in parts] == [CHUNK, CHUNK, 5]
    assert [x for p in parts for x in p] == list(range(2 * CHUNK + 5))


def test_no_items_no_chunks():
    assert list(chunks([])) == []
    assert list(chunks(iter("abc"), 2)) == [["a", "b"], ["c"]]


def test_size_must_be_positive():
    with pytest.raises(ValueError, match="chunk size 0"):
        list(chunks([1], 0))
