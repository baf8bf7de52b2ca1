"""Open data where it lies as one rank's loader: images (an image folder, a Hugging Face dataset,
WebDataset tar shards) or token windows (a token file, a Hugging Face dataset, tar shards), by the
format `trainspeed.data.sources.detect_format` reads from the path.

The vision workloads call `open_images`, the language models `open_tokens`, for any `--data` that
is not one of trainspeed's own shard sets; each returns a `trainspeed.data.samples.SampleLoader`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from trainspeed.data.base import LoaderConfig
from trainspeed.data.decode import ImagePlan
from trainspeed.data.samples import SampleLoader
from trainspeed.data.sources import HF_DATASET, IMAGE_FOLDER, TOKENS, WEBDATASET, detect_format
from trainspeed.errors import UsageError


@dataclass(frozen=True)
class OpenedImages:
    loader: SampleLoader
    classes: int
    """Classes the data names (an image folder's folders, a dataset's ClassLabel), or the largest label + 1."""


@dataclass(frozen=True)
class OpenedTokens:
    loader: SampleLoader
    id_range: tuple[int, int]
    """The smallest and largest id of every file the split reads from."""


def open_images(path: str | os.PathLike, config: LoaderConfig, resolution: int, draft: bool = True) -> OpenedImages:
    """Labelled images of `path` at `resolution`: decoded, cropped and (in training) augmented on
    the rank's workers (`trainspeed.data.decode`)."""
    data_format = detect_format(path)
    plan = ImagePlan(resolution, train=config.split == "train", draft=draft)
    if data_format == IMAGE_FOLDER:
        from trainspeed.data.image_folder import ImageFolderReader, scan_image_folder

        folder = scan_image_folder(path)
        return OpenedImages(SampleLoader(ImageFolderReader(folder, config.split, plan, config.seed), config),
                            len(folder.classes))
    if data_format == HF_DATASET:
        from trainspeed.data.hf_datasets import HuggingFaceImageReader, open_hf_dataset

        dataset = open_hf_dataset(path)
        reader = HuggingFaceImageReader(dataset, config.split, plan, config.seed)
        return OpenedImages(SampleLoader(reader, config), reader.classes)
    if data_format == WEBDATASET:
        from trainspeed.data.tar_shards import TarImageReader, open_tar_shards

        shards = open_tar_shards(path)
        reader = TarImageReader(shards, config.split, plan, config.seed)
        return OpenedImages(SampleLoader(reader, config), reader.classes)
    raise UsageError(f"--data {path}: {_what(data_format)}, which holds no labelled images; give an image folder "
                     "(ROOT/CLASS/*.jpg), a Hugging Face dataset with image and label columns, or tar shards of "
                     "KEY.jpg + KEY.cls")


def open_tokens(path: str | os.PathLike, config: LoaderConfig, sequence: int) -> OpenedTokens:
    """Token windows of `sequence` ids of `path`, memory-mapped (or read from Arrow or tar members)."""
    data_format = detect_format(path)
    if data_format == TOKENS:
        from trainspeed.data.tokens import TokenReader, id_range, open_token_data

        data = open_token_data(path)
        reader = TokenReader(data, config.split, sequence)
        ranges = [id_range(file) for file in data.files]
        return OpenedTokens(SampleLoader(reader, config), (min(r[0] for r in ranges), max(r[1] for r in ranges)))
    if data_format == HF_DATASET:
        from trainspeed.data.hf_datasets import HuggingFaceTokenReader, open_hf_dataset

        reader = HuggingFaceTokenReader(open_hf_dataset(path), config.split, sequence)
        return OpenedTokens(SampleLoader(reader, config), reader.id_range)
    if data_format == WEBDATASET:
        from trainspeed.data.tar_shards import TarTokenReader, open_tar_shards

        reader = TarTokenReader(open_tar_shards(path), config.split, sequence)
        return OpenedTokens(SampleLoader(reader, config), reader.id_range)
    raise UsageError(f"--data {path}: {_what(data_format)}, which holds no token ids; give a token file (.bin of "
                     "uint16 ids or .npy), a Hugging Face dataset with an input_ids column, or tar shards of "
                     "KEY.npy windows")


def _what(data_format: str) -> str:
    return {IMAGE_FOLDER: "an image folder", TOKENS: "a token file", HF_DATASET: "a Hugging Face dataset",
            WEBDATASET: "WebDataset tar shards"}.get(data_format, f"a {data_format} set")
