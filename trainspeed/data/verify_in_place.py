"""`trainspeed data verify` and `data inspect` of data read where it lies, by its format
(`trainspeed.data.sources`): the layout checks training makes when it opens the data, then every
sample read as training would read it (each image decoded, every token id compared with the
vocabulary), each problem named with its file. Nothing is written anywhere."""

from __future__ import annotations

import os

from trainspeed.data.in_place_report import InPlaceReport
from trainspeed.data.sources import HF_DATASET, IMAGE_FOLDER, TOKENS, WEBDATASET, detect_format
from trainspeed.errors import UsageError


def _no_vocabulary(path: str | os.PathLike, what: str, vocabulary: int | None) -> None:
    if vocabulary is not None:
        raise UsageError(f"--vocab: {path} is {what}, which holds no token ids; drop --vocab")


def verify_in_place(path: str | os.PathLike, vocabulary: int | None = None) -> InPlaceReport:
    data_format = detect_format(path)
    if data_format == IMAGE_FOLDER:
        from trainspeed.data.image_folder import verify_image_folder

        _no_vocabulary(path, "an image folder", vocabulary)
        folder, problems = verify_image_folder(path)
        return InPlaceReport(f"image folder of {len(folder.classes)} classes, {len(folder.train) + len(folder.val):,} "
                             f"images ({len(folder.train):,} train, {len(folder.val):,} val: {folder.split})", problems)
    if data_format == TOKENS:
        from trainspeed.data.tokens import verify_tokens

        data, problems = verify_tokens(path, vocabulary)
        ids = sum(file.count for file in data.files)
        return InPlaceReport(f"{len(data.files)} token file(s), {ids:,} {data.train.dtype.name} ids", problems)
    if data_format == HF_DATASET:
        from trainspeed.data.hf_datasets import verify_hf_dataset

        return verify_hf_dataset(path, vocabulary)
    if data_format == WEBDATASET:
        from trainspeed.data.tar_shards import verify_tar_shards

        return verify_tar_shards(path, vocabulary)
    raise UsageError(f"{path}: a {data_format} set is verified from its index")


def summarize_in_place(path: str | os.PathLike) -> dict:
    data_format = detect_format(path)
    if data_format == IMAGE_FOLDER:
        from trainspeed.data.image_folder import summarize_image_folder

        return summarize_image_folder(path)
    if data_format == TOKENS:
        from trainspeed.data.tokens import summarize_tokens

        return summarize_tokens(path)
    if data_format == HF_DATASET:
        from trainspeed.data.hf_datasets import summarize_hf_dataset

        return summarize_hf_dataset(path)
    if data_format == WEBDATASET:
        from trainspeed.data.tar_shards import summarize_tar_shards

        return summarize_tar_shards(path)
    raise UsageError(f"{path}: a {data_format} set is summarized from its index")
