"""What `hpdsl train --data` reads (hpdsl/torch/data.py, hpdsl/torch/hf_data.py): each cp rank its chunk of the same
sample, and Hugging Face datasets (the optional `hpdsl[data]` extra) read as token files, or a clear usage error."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hpdsl.torch.data import Tokens
from train_support import MIXTRAL, MIXTRAL_SMALL, hpdsl

HAS_DATASETS = importlib.util.find_spec("datasets") is not None
DP2 = ("--dp", "2", "--zero", "os+grad+params", "--nproc", "2")


@settings(max_examples=40, deadline=None)
@given(cp=st.sampled_from([1, 2, 4]), chunk=st.integers(1, 6), depth=st.integers(0, 2), rows=st.integers(1, 3),
       step=st.integers(0, 50), dtype=st.sampled_from(["uint16", "uint32"]))
def test_the_cp_ranks_read_the_chunks_of_the_same_samples(tmp_path_factory: pytest.TempPathFactory, cp: int,
                                                          chunk: int, depth: int, rows: int, step: int,
                                                          dtype: str) -> None:
    path = tmp_path_factory.mktemp("tokens") / "tokens.bin"
    stream = np.arange(997) % 251  # a prime length: the batches wrap around the file
    stream.astype(dtype).tofile(path)  # uint32: what a Hugging Face dataset is written as
    tokens, seq = Tokens(0, 256, str(path), dtype), chunk * cp
    whole = tokens.rank_batch(step, rows, seq, depth, (slice(None), slice(0, seq)))
    parts = [tokens.rank_batch(step, rows, seq, depth, (slice(None), slice(r * chunk, (r + 1) * chunk)))
             for r in range(cp)]
    # Chunk r of every row is positions r·s/cp … of that row's sample, its labels shifted across the chunk's end.
    for got, want in zip((torch.cat([p[0] for p in parts], dim=1), torch.cat([p[1] for p in parts], dim=1)), whole):
        assert torch.equal(got, want)
    assert whole[0].shape[:2] == (rows, seq)
    span = seq + 1 + depth  # step k's first row is sequence k·rows of the file, wrapped around
    first = (step * rows) % (len(stream) // span)
    assert whole[0][0, :, 0 if depth else ...].tolist() == stream[first * span:first * span + seq].tolist()


def test_a_folder_that_datasets_did_not_save_is_a_usage_error(tmp_path: Path) -> None:
    code, output = hpdsl("train", MIXTRAL, *MIXTRAL_SMALL, *DP2, "--data", str(tmp_path))
    assert code == 2 and "not one `datasets` saved" in output and "Traceback" not in output, output
    (tmp_path / "tokens.bin").write_bytes(b"\0\0")
    code, output = hpdsl("train", MIXTRAL, *MIXTRAL_SMALL, *DP2, "--data", str(tmp_path / "tokens.bin"),
                         "--tokenizer", "gpt2")
    assert code == 2 and "--tokenizer reads a Hugging Face dataset, not the token file" in output, output


@pytest.mark.skipif(HAS_DATASETS, reason="datasets is installed: the dataset is read (the test below)")
def test_a_dataset_without_the_datasets_package_names_the_extra(tmp_path: Path) -> None:
    for data in ("hf:roneneldan/TinyStories", "hf:roneneldan/TinyStories:validation"):
        code, output = hpdsl("train", MIXTRAL, *MIXTRAL_SMALL, *DP2, "--data", data)
        assert code == 2 and "needs the `datasets` package" in output and "hpdsl[data]" in output, output
    (tmp_path / "state.json").write_text("{}")  # looks like a saved dataset's folder
    code, output = hpdsl("train", MIXTRAL, *MIXTRAL_SMALL, *DP2, "--data", str(tmp_path))
    assert code == 2 and "needs the `datasets` package" in output, output


@pytest.mark.skipif(not HAS_DATASETS, reason="the optional extra hpdsl[data] (datasets) is not installed")
def test_a_saved_dataset_is_read_as_the_token_file_of_its_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    import datasets

    from hpdsl.cli.train_launch import plan_from_flags
    from hpdsl.cli.train_options import TrainOptions

    monkeypatch.setenv("HPDSL_CACHE_DIR", str(tmp_path / "cache"))
    rows = [[int(i) % 128 for i in range(start, start + 40)] for start in range(0, 400, 40)]
    datasets.Dataset.from_dict({"input_ids": rows, "text": ["x"] * len(rows)}).save_to_disk(str(tmp_path / "ds"))
    options = TrainOptions(validate=False, data=str(tmp_path / "ds"))
    plan, _ = plan_from_flags((Path(MIXTRAL),), None, False, tuple(s.removeprefix("--set=") for s in MIXTRAL_SMALL),
                              2, options, {"dp": 2, "zero": "os+grad+params"})
    path = Path(plan.config["data"])
    assert path.parent == tmp_path / "cache" / "datasets" and plan.config["data_dtype"] == "uint32"
    assert np.fromfile(path, dtype=np.uint32).tolist() == [i for row in rows for i in row]
    ids, labels = Tokens(0, 128, str(path), "uint32").rank_batch(0, 2, 32, 0, (slice(None), slice(0, 32)))
    assert ids[0].tolist() == rows[0][:32] and labels[0].tolist() == rows[0][1:33]  # what the ranks read
    again, _ = plan_from_flags((Path(MIXTRAL),), None, False, tuple(s.removeprefix("--set=") for s in MIXTRAL_SMALL),
                               2, options, {"dp": 2, "zero": "os+grad+params"})
    assert again.config["data"] == str(path)  # tokenised once: the cached file
    code, output = hpdsl("train", MIXTRAL, *MIXTRAL_SMALL, *DP2, "--data", str(tmp_path / "ds"),
                         "--data-column", "ids")
    assert code == 2 and "no column 'ids' (found input_ids, text)" in output, output
    code, output = hpdsl("train", MIXTRAL, *MIXTRAL_SMALL, *DP2, "--data", str(tmp_path / "ds"),
                         "--data-column", "text")
    assert code == 2 and "not lists of token ids; pass --tokenizer" in output, output


@pytest.mark.skipif(not HAS_DATASETS, reason="the optional extra hpdsl[data] (datasets) is not installed")
def test_a_text_dataset_is_tokenised_by_a_local_tokenizer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from hpdsl.torch.hf_data import token_file

    monkeypatch.setenv("HPDSL_CACHE_DIR", str(tmp_path / "cache"))
    vocab = {"[EOS]": 0, "a": 1, "b": 2, "c": 3}
    core = Tokenizer(models.WordLevel(vocab, unk_token="[EOS]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=core, eos_token="[EOS]").save_pretrained(str(tmp_path / "tok"))
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": ["a b c", "c b"]})}).save_to_disk(
        str(tmp_path / "dd"))
    path = token_file(str(tmp_path / "dd"), tokenizer=str(tmp_path / "tok"))
    assert np.fromfile(path, dtype=np.uint32).tolist() == [1, 2, 3, 0, 3, 2, 0]  # each document, then EOS


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.skipif(not HAS_DATASETS, reason="the optional extra hpdsl[data] (datasets) is not installed")
def test_a_saved_dataset_with_a_repeating_pattern_is_learned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    from train_support import train_json

    monkeypatch.setenv("HPDSL_CACHE_DIR", str(tmp_path / "cache"))
    pattern = (np.arange(40_000) * 7 % 16).tolist()  # period 16: each token tells the next
    rows = [pattern[i:i + 400] for i in range(0, len(pattern), 400)]
    datasets.Dataset.from_dict({"input_ids": rows}).save_to_disk(str(tmp_path / "ds"))
    result = train_json(MIXTRAL, *MIXTRAL_SMALL, *DP2, "--data", str(tmp_path / "ds"), "--steps", "30", "--lr", "1e-2",
                        validate=False)
    losses = result["loss"]
    assert losses[0] > 4.0 and losses[-1] < 0.5 * losses[0], losses
