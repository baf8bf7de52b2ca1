"""One rank under torchrun: `python -m trainspeed.train.worker RUN_DIR/train_config.json`.

`@record` writes an uncaught exception to the error file torchrun names for this rank, so the
launcher's failure report shows the dying rank's traceback instead of "exit code 1". The process
also asks the kernel to kill it when its parent (torchrun's agent) dies: the agent starts workers
in their own sessions, so a kill -9 of the launch would otherwise leave them training as orphans.
"""

from __future__ import annotations

import sys
from pathlib import Path

from torch.distributed.elastic.multiprocessing.errors import record

from trainspeed.errors import UsageError
from trainspeed.train.checkpoint import StopRequest
from trainspeed.train.config import TrainConfig
from trainspeed.train.distributed import RankContext, destroy_process_group, init_process_group
from trainspeed.train.lifecycle import die_with_parent, exit_code
from trainspeed.train.loop import Layout, RankTrainer


@record
def main(argv: list[str]) -> int:
    die_with_parent()
    config = TrainConfig.from_json(Path(argv[0]).read_text())
    context = RankContext.from_environment()
    collectives = init_process_group(context, config.device_type, config.launch.collective_timeout_s)
    try:
        with StopRequest() as stop:
            summary = RankTrainer(config, Layout(context), collectives).run(stop)
    except UsageError as error:
        print(f"trainspeed: error: rank {context.rank}: {error}", file=sys.stderr, flush=True)
        return 2
    finally:
        destroy_process_group()
    if context.is_main:
        print("\n".join(summary.lines()), flush=True)
    return exit_code(summary)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
