"""`hpdsl train --data` from Hugging Face `datasets` (the optional extra `hpdsl[data]`), read as a token file.

`--data hf:NAME[:SPLIT]` loads a dataset with `datasets.load_dataset` (SPLIT
defaults to train; a name the hub or the local datasets cache knows), and a
folder is one written by `Dataset.save_to_disk` (a `DatasetDict`'s folder gives
its train split). Its rows are either token ids already (the `input_ids`
column, or `--data-column`), or text (the `text` column, or `--data-column`)
tokenised by `--tokenizer` (a transformers tokenizer's name or folder), each
document followed by the tokenizer's end-of-sequence id. The ids are written
once, in order, to a flat uint32 token file in hpdsl's cache folder, keyed by
the source, the tokenizer, the column and the dataset's fingerprint, and the
job reads that file as it reads any token file (hpdsl/torch/data.py): sharded
over dp and cp, and resumable from the step alone.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from hpdsl.errors import InputError

PREFIX = "hf:"
"""What marks `--data` as a dataset name for `datasets.load_dataset`."""
SAVED = ("dataset_info.json", "state.json", "dataset_dict.json")
"""The files `save_to_disk` writes into a dataset's folder (a DatasetDict's: dataset_dict.json)."""
_BATCH = 1000  # rows tokenised and written at a time
_MAX_ID = 2**32 - 1


def is_dataset(data: str) -> bool:
    """Return whether `--data` names a Hugging Face dataset (hf:NAME or a folder), not a token file."""
    return data.startswith(PREFIX) or Path(data).is_dir()


def dataset_refusal(data: str) -> str | None:
    """Return why `--data` cannot be read as a dataset before any is loaded (None: it may be)."""
    if data.startswith(PREFIX) and not data[len(PREFIX):].split(":")[0]:
        return f"--data {data}: expected hf:NAME or hf:NAME:SPLIT, found no name"
    if not data.startswith(PREFIX) and not any((Path(data) / name).is_file() for name in SAVED):
        return (f"--data {data}: a folder, but not one `datasets` saved (found none of {', '.join(SAVED)}); "
                "expected a folder written by Dataset.save_to_disk, a token file or hf:NAME[:SPLIT]")
    if importlib.util.find_spec("datasets") is None:
        return (f"--data {data}: reading a Hugging Face dataset needs the `datasets` package, which is not "
                "installed; install it with pip install 'hpdsl[data]' (or use a .bin/.npy token file)")
    return None


def token_file(data: str, *, tokenizer: str | None = None, column: str | None = None) -> Path:
    """Return the uint32 token file of dataset `data` (made once, then read from hpdsl's cache folder)."""
    problem = dataset_refusal(data)
    if problem:
        raise InputError(problem)
    dataset = _load(data)
    name = column or ("text" if tokenizer else "input_ids")
    if name not in dataset.column_names:
        found = ", ".join(dataset.column_names) or "none"
        hint = "pass --data-column" if tokenizer else "pass --tokenizer NAME to tokenise a text column, or --data-column"
        raise InputError(f"--data {data}: no column {name!r} (found {found}); {hint}")
    key = json.dumps([data, tokenizer, name, getattr(dataset, "_fingerprint", None)])
    path = _cache() / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.bin"
    if path.is_file():
        return path
    rows = _tokenised(dataset, name, tokenizer, data) if tokenizer else _ids(dataset, name, data)
    return _write(rows, path, data)


def _load(data: str) -> Any:
    """Return the dataset `data` names (a DatasetDict gives its train split)."""
    import datasets

    try:
        if data.startswith(PREFIX):
            name, _, split = data[len(PREFIX):].partition(":")
            return datasets.load_dataset(name, split=split or "train")
        loaded = datasets.load_from_disk(data)
    except (OSError, ValueError, FileNotFoundError, KeyError) as error:
        raise InputError(f"--data {data}: `datasets` cannot load it ({type(error).__name__}: {error})") from None
    if isinstance(loaded, datasets.DatasetDict):
        if "train" not in loaded:
            raise InputError(f"--data {data}: a DatasetDict without a train split (found {', '.join(loaded)}); "
                             "pass a split's own folder")
        return loaded["train"]
    return loaded


def _ids(dataset: Any, column: str, data: str) -> Iterator[np.ndarray]:
    """Yield each row of a pre-tokenised column as int64 ids."""
    for batch in dataset.iter(batch_size=_BATCH):
        for row in batch[column]:
            if not isinstance(row, (list, tuple)) or not all(isinstance(i, int) for i in row):
                raise InputError(f"--data {data}: column {column!r} holds {type(row).__name__}, not lists of token "
                                 "ids; pass --tokenizer NAME to tokenise text")
            yield np.asarray(row, dtype=np.int64)


def _tokenised(dataset: Any, column: str, tokenizer: str, data: str) -> Iterator[np.ndarray]:
    """Yield each text row tokenised by `tokenizer`, followed by its end-of-sequence id when it has one."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(tokenizer)
    except (OSError, ValueError) as error:
        raise InputError(f"--tokenizer {tokenizer}: transformers cannot load it ({error})") from None
    eos = [] if tok.eos_token_id is None else [int(tok.eos_token_id)]
    for batch in dataset.iter(batch_size=_BATCH):
        texts = batch[column]
        if not all(isinstance(t, str) for t in texts):
            raise InputError(f"--data {data}: column {column!r} is not text; drop --tokenizer for token ids")
        for ids in tok(texts, add_special_tokens=False)["input_ids"]:
            yield np.asarray([*ids, *eos], dtype=np.int64)


def _write(rows: Iterator[np.ndarray], path: Path, data: str) -> Path:
    """Write the rows' ids to `path` as one uint32 stream (atomically); return it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".part")
    try:
        with os.fdopen(handle, "wb") as out:
            for ids in rows:
                if ids.size and (ids.min() < 0 or ids.max() > _MAX_ID):
                    raise InputError(f"--data {data}: token id {int(ids.min() if ids.min() < 0 else ids.max())} "
                                     "is not a uint32")
                out.write(ids.astype(np.uint32).tobytes())
                count += ids.size
        if count == 0:
            raise InputError(f"--data {data}: holds no tokens")
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return path


def _cache() -> Path:
    """Return the folder of datasets' token files: hpdsl's cache folder, or the temporary one when caching is off."""
    from hpdsl.resources import cache_folder

    return Path(cache_folder() or tempfile.gettempdir()) / "datasets"
