"""Seeded question subsets (the hashed train/dev/test assignment, `split_of`, is tested in test_data_corpus.py)."""

from repro.data.splits import sample_rows

ROWS = [{"id": str(i)} for i in range(20)]


def test_a_question_subset_is_seeded_and_kept_in_file_order():
    subset = sample_rows(ROWS, 6, seed=0)
    ids = [int(r["id"]) for r in subset]
    assert len(ids) == 6 and ids == sorted(ids) and ids != list(range(6))  # not simply the first six
    assert sample_rows(ROWS, 6, seed=0) == subset and sample_rows(ROWS, 6, seed=1) != subset
    assert sample_rows(ROWS, None, seed=0) == ROWS and sample_rows(ROWS, 50, seed=0) == ROWS
