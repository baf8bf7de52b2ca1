"""One rank of a torchrun job: `python -m trainspeed.train.rank RUN_DIR/train_config.json`.

Started by `trainspeed.train.worker` (see there why not by the elastic agent directly). `@record`
writes an uncaught exception to the error file the agent names for this rank, so the agent can
report the first failing rank's error in one line (`trainspeed.train.agent`). The process asks the
kernel to kill it when its parent dies, so a kill -9 of the launch cannot leave it training as an orphan.
"""

from __future__ import annotations

import faulthandler
import sys
from pathlib import Path

from torch.distributed.elastic.multiprocessing.errors import record

from trainspeed.targets import get_target
from trainspeed.train.config import TrainConfig
from trainspeed.train.distributed import RankContext, destroy_process_group, init_process_group
from trainspeed.train.lifecycle import StopRequest, die_with_parent, exit_without_teardown, finish
from trainspeed.train.loop import Layout, RankTrainer


@record
def main(argv: list[str]) -> int:
    die_with_parent()
    faulthandler.enable()  # a rank killed by a fatal signal leaves its Python stack in its log
    config = TrainConfig.from_json(Path(argv[0]).read_text())
    context = RankContext.from_environment()
    target = get_target(config.target)
    target.bind_local_rank(context.local_rank)
    collectives = init_process_group(context, target, config.launch.collective_timeout_s)
    # The SIGTERM/SIGINT handler stays installed to the end: torchrun may signal again while a
    # stopped rank is still reporting, and the default action would cut the report short.
    # An exception leaves through `record`, which writes it to this rank's error file: the agent
    # reports the first cause in one line (a UsageError as bad input) and the traceback stays in the log.
    with StopRequest() as stop:
        try:
            summary = RankTrainer(config, Layout(context), collectives, target).run(stop)
            collectives.barrier()  # no rank leaves while a peer may still be in a collective with it
        finally:
            destroy_process_group()
        code = finish(summary, stop, show=context.is_main)
    if context.is_distributed:
        exit_without_teardown(code)
    return code


if __name__ == "__main__":
    from trainspeed.process_end import end_process

    end_process(main(sys.argv[1:]))
