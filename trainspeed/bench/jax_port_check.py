"""`trainspeed check --target jax:jit:* [--platform tpu]`: the lowering check of the `jax` family
(`trainspeed.targets.jaxjit.lowering`), as the port check's own result, so `--out`, `--strict` and
the report treat it as every port check."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from trainspeed.bench.port_check_config import PortCheckConfig
from trainspeed.bench.port_check_rows import PORTED, FallbackOp, PortCheck
from trainspeed.errors import UsageError
from trainspeed.machine import Machine

if TYPE_CHECKING:
    from trainspeed.targets.jaxjit.lowering import LoweringFindings
    from trainspeed.workloads.base import Workload


def lowering_verdict(findings: "LoweringFindings") -> str:
    """One line: ported, or each finding. An op with no JAX lowering does not fall back to the host,
    as an XLA device's does: the jax family has no host to fall back to."""
    wrong = []
    if findings.missing_ops:
        missing = ", ".join(sorted(findings.missing_ops))
        wrong.append(f"{len(findings.missing_ops)} op{'s' if len(findings.missing_ops) > 1 else ''} with no JAX lowering "
                     f"({missing})")
    if findings.programs_per_step > 1:
        wrong.append("a program compiled again per step (a Python value that changes per step is compiled into it)")
    if findings.untraceable:
        wrong.append(findings.untraceable)
    return PORTED if not wrong else "not ported: " + "; ".join(wrong)


def run_lowering_check(config: PortCheckConfig, workload: "Workload", size: str) -> PortCheck:
    from trainspeed import jaxrt
    from trainspeed.targets import get_target
    from trainspeed.targets.jaxjit.lowering import check_lowering

    target = get_target(config.target)  # the family's availability, in one line
    platform = config.platform or jaxrt.device().platform
    if platform not in jaxrt.PLATFORMS:
        raise UsageError(f"check: --platform {platform}: choose one of {', '.join(jaxrt.PLATFORMS)}")
    machine = Machine.at_start()
    timestamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    findings = check_lowering(workload, size, target.spec.precision, platform, config.batch_size, config.seed,
                              target.spec.options)
    fallbacks = [FallbackOp(op, 1.0, callers) for op, callers in sorted(findings.missing_ops.items())]
    recompiles = findings.programs_per_step - 1
    host_reads = 1.0 if findings.untraceable else 0.0
    said = lowering_verdict(findings)
    return PortCheck(
        timestamp=timestamp, workload=workload.name, size=size, target=str(target), device_name=jaxrt.device_name(),
        batch_size=config.batch_size, warmup_steps=0, steps=2, fallback_ops=fallbacks, compiles_in_steps=recompiles,
        device_to_host_per_step=host_reads, final_loss=None, verdict=said, ported=not fallbacks and not recompiles
        and not host_reads, command=config.command, machine=machine.at_end(), lowered_for=platform,
    )
