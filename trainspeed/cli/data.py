"""`trainspeed data ...`: each workload's dataset tools (make, import, inspect, verify)."""

from __future__ import annotations

import argparse

from trainspeed.workloads.mahjong.data.cli import add_data_commands as add_mahjong_data_commands
from trainspeed.workloads.stylegan3.cli import add_images_command as add_image_data_command


def add_data_commands(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("data", help="make, import, inspect and verify datasets")
    data_subparsers = parser.add_subparsers(dest="data_command", required=True, metavar="DATA_COMMAND")
    add_mahjong_data_commands(data_subparsers)
    add_image_data_command(data_subparsers)
