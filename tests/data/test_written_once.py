"""Arrays written once: reused while what they were made from stands, made again after."""

import os

import numpy as np

from supergcn.data.written_once import array_written_once


def test_a_copy_of_a_replaced_source_is_made_again_and_an_unchanged_one_reused(tmp_path):
    """A float32 copy of a float16 source: reused while the source is the file it was made
    from, made again once the source is replaced (the same shape, other values), and a
    copy from before copies kept their source's record is kept only if newer than the source."""
    source, copy = tmp_path / "half.npy", tmp_path / "wide.npy"
    made = []

    def widen(start, rows):
        made.append(start)
        rows[:] = np.load(source)[start:start + len(rows)]

    def wide():
        return array_written_once(copy, (3, 2), np.float32, widen, 2, made_from=source).tolist()

    np.save(source, np.ones((3, 2), np.float16))
    assert wide() == [[1.0, 1.0]] * 3 and made == [0, 2]
    assert wide() == [[1.0, 1.0]] * 3 and made == [0, 2], "reused"
    replaced = tmp_path / "new.npy"
    np.save(replaced, np.full((3, 2), 2, np.float16))
    replaced.replace(source)  # a new file in its place, as a repaired download
    assert wide() == [[2.0, 2.0]] * 3 and made == [0, 2, 0, 2]
    record = copy.with_name(copy.name + ".source.json")
    record.unlink()  # a copy made before copies kept a record, and newer than its source: kept
    assert wide() == [[2.0, 2.0]] * 3 and len(made) == 4 and record.is_file()
    record.unlink()
    os.utime(copy, ns=(0, 0))  # older than its source: made again
    assert wide() == [[2.0, 2.0]] * 3 and len(made) == 6
