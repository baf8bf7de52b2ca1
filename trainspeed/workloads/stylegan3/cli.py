"""`trainspeed data images`: StyleGAN3's dataset command (its flags; the handler imports the tool)."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainspeed.flags import positive_int


def add_images_command(data_subparsers) -> None:
    parser = data_subparsers.add_parser(
        "images",
        help="build a StyleGAN image dataset (zip of PNGs + dataset.json) from a folder of images",
        description="Center-crop and resize every image under SRC and store them as an uncompressed zip of PNGs.",
    )
    parser.add_argument("source", type=Path, metavar="SRC", help="folder of images (searched recursively)")
    parser.add_argument("--out", type=Path, required=True, metavar="DATASET.zip", help="zip file to write")
    parser.add_argument("--resolution", type=positive_int, default=None, help="side length (power of two); default: keep")
    parser.set_defaults(handler=run_images_command)


def run_images_command(args: argparse.Namespace) -> int:
    from trainspeed.workloads.stylegan3.dataset_tool import build_image_dataset

    count = build_image_dataset(args.source, args.out, args.resolution)
    print(f"wrote {count} images to {args.out}")
    return 0
