"""A samples table written as a file: a CSV or Parquet file of the columns of
:data:`benchlab.names.long_format.SAMPLE_COLUMNS` (at least ``task, config, question, value``).

Read the way pyarrow reads it, which is what defines the table: the name columns
(:data:`NAME_COLUMNS`) as categoricals, every other column's type inferred from the file's first
block (a later value that does not fit it is refused), a row with too many or too few fields
refused, pyarrow's null markers as missing values. A CSV is read twice only where its head's
types do not hold for the whole file: first told the types pyarrow infers from its head, then,
where a value past the head does not fit them, inferring from the first block as before.

How a name column becomes a categorical depends on how its names lie in the file, never what the
table holds: where the head repeats each name over runs of rows (a sweep's samples grouped by
task and config), the column is parsed as text and encoded run by run; otherwise the parser
encodes it value by value.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlab.errors import DataError
from benchlab.names.long_format import SAMPLE_COLUMNS, SAMPLE_REQUIRED

if TYPE_CHECKING:
    from collections.abc import Callable

    import pandas as pd

#: Columns that hold names: text even when they look like numbers ("1.0" and "1" are two
#: configs), kept as categoricals, since a sweep's samples repeat a few names millions of times.
NAME_COLUMNS = ("benchmark", "task", "config", "cluster", "metric")

#: pyarrow infers a CSV column's type from the file's first block and refuses a later value that
#: does not fit it: the first 32 MiB decide, as they always have for a samples CSV.
_INFER_BLOCK = 32 << 20
#: The head of a CSV whose inferred types the typed read is told: a guess the typed read checks
#: (a value past the head that does not fit sends the read back to inference), ten thousand rows
#: of a samples CSV. pyarrow parses the whole head to infer it: 4 ms for 256 KiB, 16-22 ms for
#: 1 MiB.
_HEAD_BLOCK = 256 << 10
#: pyarrow's blocks when told the types: on a 4-million-row samples CSV, 4 MiB blocks cost
#: 89,000-91,000 page faults and 0.3-0.6 s of system time, 32 MiB blocks 131,000 and 0.8-1.0 s
#: (docs/performance.md, the question-level analysis).
_TYPED_BLOCK = 4 << 20
#: A name column whose head runs at least this many rows per name on average is encoded run by
#: run (:func:`_categorical_of_runs`): on a 4-million-row samples CSV grouped by task and config
#: the parse and the frame take 0.62 s (median of six; fastest 0.49 s) where with the parser's
#: own dictionaries they take 0.74 s (0.65 s). On names that change every few rows, comparing neighbours
#: first is work on top of the hashing, so the parser encodes those.
_RUN_LENGTH = 16


def read_samples_csv(path: Path) -> pd.DataFrame:
    """A CSV of the samples columns (at least ``task, config, question, value``), read as pyarrow
    reads it (see the module's docstring); a question id keeps its inferred type (numbered
    questions are their own codes in the analysis)."""
    import pyarrow as pa
    from pyarrow import csv as pacsv

    pool = _read_pool()
    names_type = pa.dictionary(pa.int32(), pa.string())
    text = {c: names_type for c in NAME_COLUMNS}
    text["question_hash"] = pa.string()
    try:
        with path.open("rb") as f:
            header = f.readline().decode("utf-8", errors="replace").strip().split(",")
        names = {h.strip().strip('"') for h in header}
        convert = pacsv.ConvertOptions(column_types={c: t for c, t in text.items() if c in names},
                                       strings_can_be_null=True)
        head, runs = _head(path, convert, pool)
        arrow = None if head is None else _read_typed(path, head, pool, runs)
        widen = {} if arrow is None or head is None else {
            name: t.to_pandas_dtype() for name, t in zip(head.names, head.types, strict=True)
            if pa.types.is_integer(t) and arrow.schema.field(name).type != t}
        if arrow is None:
            # Inferring from the first block, as ever: what the typed read must match, and what
            # words a malformed file's error.
            arrow = pacsv.read_csv(path, read_options=pacsv.ReadOptions(block_size=_INFER_BLOCK),
                                   convert_options=convert, memory_pool=pool)
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataError(f"{path}: not a readable CSV ({str(exc).strip().splitlines()[0]})") from None
    _check_columns(set(arrow.column_names), path)
    held = [arrow]
    del arrow
    return _samples_frame(_frame(held, pool, widen=widen, runs=runs), path,
                          line_of=lambda row: _csv_line(path, row))


def _head(path: Path, convert: Any, pool: Any) -> tuple[Any, frozenset[str]]:
    """The column types pyarrow infers from the head of the CSV, and the name columns whose head
    holds runs of :data:`_RUN_LENGTH` rows or more per name; None for the types where the head
    cannot be read or names a column twice (the typed read then does not try)."""
    import numpy as np
    import pyarrow as pa
    from pyarrow import csv as pacsv

    try:
        with pacsv.open_csv(path, read_options=pacsv.ReadOptions(block_size=_HEAD_BLOCK),
                            convert_options=convert, memory_pool=pool) as head:
            schema = head.schema
            try:
                batch = head.read_next_batch()
            except StopIteration:
                batch = None
    except (pa.ArrowInvalid, OSError):
        return None, frozenset()
    if len(set(schema.names)) != len(schema.names):
        return None, frozenset()
    runs = set()
    for name, kind in zip(schema.names, schema.types, strict=True):
        if batch is None or batch.num_rows == 0 or not pa.types.is_dictionary(kind):
            continue
        codes = batch.column(name).indices.fill_null(-1).to_numpy(zero_copy_only=False)
        if (1 + np.count_nonzero(codes[1:] != codes[:-1])) * _RUN_LENGTH <= len(codes):
            runs.add(name)
    return schema, frozenset(runs)


def _read_typed(path: Path, head: Any, pool: Any, runs: frozenset[str] = frozenset()) -> Any:
    """The CSV as an Arrow table, each column converted to the type inferred from its head;
    None where a value past the head does not convert (or a row is malformed).

    Inference is the dearer half of pyarrow's read: told the types, it converts each block once.
    Inference only widens a type as it sees more values (integer, then real, then text), so
    where every value converts to the head's types, the first block infers those same types.

    Integer columns are parsed as 32-bit integers first (the frame widens them back to the head's
    type, :func:`_frame`): half the memory to fill, which on a 4-million-row table is a good part
    of the parse's cost. pyarrow refuses a value that does not fit, and the read is then done again
    with the head's own types: the table is the same either way.

    The ``runs`` name columns are read as text, for the frame to encode run by run.
    """
    import pyarrow as pa
    from pyarrow import csv as pacsv

    types = {name: pa.string() if name in runs else kind
             for name, kind in zip(head.names, head.types, strict=True)}
    narrow = {**types, **{n: pa.int32() for n, t in types.items() if pa.types.is_int64(t)}}
    for told in ([narrow, types] if narrow != types else [types]):
        try:
            return pacsv.read_csv(path, read_options=pacsv.ReadOptions(block_size=_TYPED_BLOCK),
                                  convert_options=pacsv.ConvertOptions(column_types=told, strings_can_be_null=True),
                                  memory_pool=pool)
        except pa.ArrowInvalid as exc:
            if told is narrow and "int32" in str(exc):
                continue  # a value past 32 bits: the head's own types, as pyarrow would infer them
            return None
        except OSError:
            return None
    return None


def read_samples_parquet(path: Path) -> pd.DataFrame:
    """A Parquet file of the samples columns: the compact form of a sweep's millions of answers."""
    import pyarrow as pa
    from pyarrow import dataset as ds
    from pyarrow import parquet as pq

    pool = _read_pool()
    try:
        schema = pq.read_schema(path)
        # Text name columns come back as the file's own dictionaries (Parquet stores repeated
        # text that way) rather than as millions of strings to encode again.
        text = [c for c in NAME_COLUMNS if c in schema.names
                and (pa.types.is_string(schema.field(c).type) or pa.types.is_large_string(schema.field(c).type))]
        # Read through a dataset scanner, the reader that takes a memory pool (see _read_pool).
        fmt = ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(dictionary_columns=text))
        arrow = ds.dataset(path, format=fmt).to_table(batch_size=_PARQUET_BATCH, memory_pool=pool)
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataError(f"{path}: not a readable Parquet file ({str(exc).strip().splitlines()[0]})") from None
    _check_columns(set(arrow.column_names), path)
    held = [arrow]
    del arrow
    return _samples_frame(_frame(held, pool), path, line_of=lambda row: row + 1)


#: Rows a Parquet scan hands over at a time: a million, not the scanner's default 131,072, so
#: that a 4-million-row file is a few chunks to convert, not thirty.
_PARQUET_BATCH = 1 << 20


def _read_pool() -> Any:
    """The Arrow memory pool a samples file is read into: the C library's ``malloc``.

    pyarrow's default pool (mimalloc in the Linux wheels) maps fresh memory for each block it
    parses; in the short process that reads one samples file that cost more system time than
    the parse itself (a 4-million-row CSV: 1.2-1.7 s of system time against 0.3-0.7 s with
    ``malloc``; its Parquet form: 0.84-1.19 s against 0.25-0.30 s), and every reader of such a
    file is such a process.
    """
    import pyarrow as pa

    return pa.system_memory_pool()


def _frame(held: list[Any], pool: Any = None, *, floats: tuple[str, ...] = ("value",),
           widen: dict[str, Any] | None = None, runs: frozenset[str] = frozenset()) -> pd.DataFrame:
    """The Arrow table ``held`` hands over (a one-item list, emptied: the caller keeps no
    reference, so each column's Arrow buffers are freed once it is converted) as a pandas frame,
    its dictionary columns and its ``runs`` text columns as categoricals, each column converted on
    its own into the frame (no block of like-typed columns copied together), two at a time.

    pyarrow's own conversion unifies the dictionaries of every chunk (one a block of CSV, one
    a Parquet row group): a fifth of reading a 4-million-row samples CSV. The names are few, so
    mapping each chunk's small dictionary onto the names seen so far and gathering the codes
    costs one array pass a column. Every array a read allocates is new memory the kernel must
    hand over page by page, which on a 4-million-row table costs more system time than the
    conversion itself; so the codes are gathered straight into the categorical's own small
    integer type, the ``floats`` columns (numbers in the file) straight into reals, and a
    converted column's buffers go back to the allocator for the next one to reuse. The copies
    and gathers run in numpy and Arrow without the interpreter's lock, so two columns convert at
    once on two cores (the parse before them already uses every core).
    """
    import pandas as pd

    arrow = held.pop()
    work = [(name, arrow.column(name)) for name in arrow.column_names]
    del arrow
    if len(work) < 2 or (os.cpu_count() or 1) < 2:
        return pd.DataFrame({name: _column(name, column, pool, floats, widen, runs) for name, column in work},
                            copy=False)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="benchlab-samples") as threads:
        futures = [(name, threads.submit(_column, name, column, pool, floats, widen, runs)) for name, column in work]
        del work  # each task's column is freed once it is converted
        return pd.DataFrame({name: future.result() for name, future in futures}, copy=False)


def _column(name: str, column: Any, pool: Any, floats: tuple[str, ...], widen: dict[str, Any] | None,
            runs: frozenset[str] = frozenset()) -> Any:
    """One Arrow column of a samples table as the frame's column (see :func:`_frame`)."""
    import numpy as np
    import pyarrow as pa

    if pa.types.is_dictionary(column.type):
        return _categorical(column, pool)
    if name in runs and pa.types.is_string(column.type):
        return _categorical_of_runs(column, pool)
    if name in floats and (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)
                           or pa.types.is_boolean(column.type)):
        # Converted into its reals at once (a missing value as NaN), not first into a frame
        # column of the file's type and then copied again.
        return _gathered(column, np.float64)
    if pa.types.is_integer(column.type) and column.null_count == 0:
        # Integers with no missing value keep their type, as pyarrow's conversion gives them;
        # gathered chunk by chunk into one array (pyarrow's conversion costs three times as much
        # on a 4-million-row table).
        return _gathered(column, (widen or {}).get(name, column.type.to_pandas_dtype()))
    return pa.table({name: column}).to_pandas(memory_pool=pool)[name]


def _gathered(column: Any, dtype: Any) -> Any:
    """A chunked Arrow array of numbers as one numpy array of ``dtype``, each chunk copied once."""
    import numpy as np

    out = np.empty(len(column), dtype)
    at = 0
    for chunk in column.chunks:
        out[at:at + len(chunk)] = chunk.to_numpy(zero_copy_only=False)
        at += len(chunk)
    return out


def _categorical(column: Any, pool: Any = None) -> pd.Categorical:
    """A chunked Arrow dictionary array as a categorical, categories in order of appearance (as
    pyarrow's conversion orders them), missing values as code -1."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    from pyarrow import compute as pc

    names: dict[str, int] = {}
    maps = [[-1 if s is None else names.setdefault(s, len(names)) for s in chunk.dictionary.to_pylist()]
            for chunk in column.chunks]
    # The type pandas keeps the codes in (the smallest that holds them), so that they are
    # gathered once, not gathered and then narrowed.
    dtype = pd.api.types.pandas_dtype(np.min_scalar_type(-len(names) - 1))
    codes = np.empty(len(column), dtype)
    at = 0
    for chunk, to_names in zip(column.chunks, maps, strict=True):
        # The chunk's codes into the names seen so far; its last slot, -1, is a missing value's.
        to_name = np.array([*to_names, -1], dtype)
        indices = chunk.indices
        if indices.null_count:
            indices = pc.coalesce(indices, pa.scalar(len(to_name) - 1, indices.type), memory_pool=pool)
        np.take(to_name, indices.to_numpy(zero_copy_only=False), out=codes[at:at + len(chunk)])
        at += len(chunk)
    return pd.Categorical.from_codes(codes, categories=list(names), validate=False)


def _categorical_of_runs(column: Any, pool: Any = None) -> pd.Categorical:
    """A chunked Arrow text array as a categorical, as :func:`_categorical` makes it (categories
    in order of appearance, missing values as code -1), by its runs of equal values.

    Comparing a value with the one before it is cheaper than hashing it, so each chunk is first
    cut into runs; only the runs' values are hashed, and their codes are repeated over the runs'
    lengths. On names that change every row this does the hashing as well, not instead: the
    head decides which columns come here (:data:`_RUN_LENGTH`).
    """
    import numpy as np
    import pandas as pd
    from pyarrow import compute as pc

    names: dict[str, int] = {}
    chunks = []
    for chunk in column.chunks:
        runs = pc.run_end_encode(chunk, memory_pool=pool)
        values = pc.dictionary_encode(runs.values, memory_pool=pool)
        to_names = [-1 if s is None else names.setdefault(s, len(names)) for s in values.dictionary.to_pylist()]
        chunks.append((to_names, values.indices, runs.run_ends, len(chunk)))
    dtype = pd.api.types.pandas_dtype(np.min_scalar_type(-len(names) - 1))
    codes = np.empty(len(column), dtype)
    at = 0
    for to_names, indices, ends, length in chunks:
        # A run's code; its value's last slot, -1, is a missing value's (dictionary_encode
        # leaves a missing value out of the dictionary, its index missing).
        to_name = np.array([*to_names, -1], dtype)
        index = indices.fill_null(len(to_name) - 1).to_numpy(zero_copy_only=False)
        lengths = np.diff(ends.to_numpy(zero_copy_only=False), prepend=0)
        codes[at:at + length] = np.repeat(to_name[index], lengths)
        at += length
    return pd.Categorical.from_codes(codes, categories=list(names), validate=False)


def _check_columns(names: set[str], path: Path) -> None:
    missing = [c for c in SAMPLE_REQUIRED if c not in names]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(missing)}; a samples table has "
                        f"{', '.join(SAMPLE_REQUIRED)} (optional: benchmark, seed, repeat, cluster, metric, "
                        "question_hash)")


def _csv_line(path: Path, row: int) -> int:
    """The line of ``path`` that holds data row ``row`` (from 0): pyarrow skips empty lines, so a
    row's index is not its line less the header's. Read only to name a bad value's line."""
    with path.open("rb") as f:
        f.readline()  # the header
        line = 1
        for raw in f:
            line += 1
            if raw.strip(b"\r\n"):
                if row == 0:
                    return line
                row -= 1
    return line


def _samples_frame(df: pd.DataFrame, path: Path, *, line_of: Callable[[int], int]) -> pd.DataFrame:
    """The samples table of a frame read from ``path``, values checked, optional columns filled;
    ``line_of`` gives the line (or row) of the file that holds a row of the frame."""
    import numpy as np
    import pandas as pd

    if not pd.api.types.is_numeric_dtype(df["value"]):
        values = pd.to_numeric(df["value"], errors="coerce")
        bad = values.isna() & df["value"].notna()
        if bad.any():
            row = int(bad.to_numpy().nonzero()[0][0])
            raise DataError(f"{path}:{line_of(row)} column 'value': expected a number, got "
                            f"{df['value'].iloc[row]!r}")
        df["value"] = values
    df["value"] = df["value"].astype(float)
    n = len(df)
    for col in SAMPLE_COLUMNS:
        if col in df.columns:
            continue
        if col in ("seed", "repeat"):
            df[col] = np.zeros(n, np.int64)
        else:
            # Categoricals: a default repeated over millions of rows costs one small code each.
            fill = {"benchmark": "", "metric": "value"}.get(col)
            df[col] = pd.Categorical.from_codes(np.full(n, -1 if fill is None else 0, np.int8),
                                                categories=[] if fill is None else [fill], validate=False)
    return df[list(SAMPLE_COLUMNS)]
