from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StatePart(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STATE_PART_UNSPECIFIED: _ClassVar[StatePart]
    TRAINABLE: _ClassVar[StatePart]
    RNG: _ClassVar[StatePart]
STATE_PART_UNSPECIFIED: StatePart
TRAINABLE: StatePart
RNG: StatePart

class DescribeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ServerInfo(_message.Message):
    __slots__ = ("target", "device_name", "torch_version", "threads", "max_message_bytes", "chunk_bytes", "live_sessions", "workloads", "idle_timeout_s", "memory_budget_bytes")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    DEVICE_NAME_FIELD_NUMBER: _ClassVar[int]
    TORCH_VERSION_FIELD_NUMBER: _ClassVar[int]
    THREADS_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    CHUNK_BYTES_FIELD_NUMBER: _ClassVar[int]
    LIVE_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    WORKLOADS_FIELD_NUMBER: _ClassVar[int]
    IDLE_TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BUDGET_BYTES_FIELD_NUMBER: _ClassVar[int]
    target: str
    device_name: str
    torch_version: str
    threads: int
    max_message_bytes: int
    chunk_bytes: int
    live_sessions: int
    workloads: _containers.RepeatedCompositeFieldContainer[ServedWorkload]
    idle_timeout_s: float
    memory_budget_bytes: int
    def __init__(self, target: _Optional[str] = ..., device_name: _Optional[str] = ..., torch_version: _Optional[str] = ..., threads: _Optional[int] = ..., max_message_bytes: _Optional[int] = ..., chunk_bytes: _Optional[int] = ..., live_sessions: _Optional[int] = ..., workloads: _Optional[_Iterable[_Union[ServedWorkload, _Mapping]]] = ..., idle_timeout_s: _Optional[float] = ..., memory_budget_bytes: _Optional[int] = ...) -> None: ...

class ServedWorkload(_message.Message):
    __slots__ = ("name", "module", "version", "definition_sha256")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MODULE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DEFINITION_SHA256_FIELD_NUMBER: _ClassVar[int]
    name: str
    module: str
    version: str
    definition_sha256: str
    def __init__(self, name: _Optional[str] = ..., module: _Optional[str] = ..., version: _Optional[str] = ..., definition_sha256: _Optional[str] = ...) -> None: ...

class PeakRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PeakReply(_message.Message):
    __slots__ = ("tflops",)
    TFLOPS_FIELD_NUMBER: _ClassVar[int]
    tflops: float
    def __init__(self, tflops: _Optional[float] = ...) -> None: ...

class TensorHeader(_message.Message):
    __slots__ = ("name", "dtype", "shape", "nbytes")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    NBYTES_FIELD_NUMBER: _ClassVar[int]
    name: str
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    nbytes: int
    def __init__(self, name: _Optional[str] = ..., dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., nbytes: _Optional[int] = ...) -> None: ...

class TensorChunk(_message.Message):
    __slots__ = ("header", "data", "last")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    header: TensorHeader
    data: bytes
    last: bool
    def __init__(self, header: _Optional[_Union[TensorHeader, _Mapping]] = ..., data: _Optional[bytes] = ..., last: _Optional[bool] = ...) -> None: ...

class Open(_message.Message):
    __slots__ = ("workload", "size", "seed", "batch_size", "target", "workload_sha256")
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_SHA256_FIELD_NUMBER: _ClassVar[int]
    workload: str
    size: str
    seed: int
    batch_size: int
    target: str
    workload_sha256: str
    def __init__(self, workload: _Optional[str] = ..., size: _Optional[str] = ..., seed: _Optional[int] = ..., batch_size: _Optional[int] = ..., target: _Optional[str] = ..., workload_sha256: _Optional[str] = ...) -> None: ...

class BatchTensor(_message.Message):
    __slots__ = ("batch_id", "chunk")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    batch_id: int
    chunk: TensorChunk
    def __init__(self, batch_id: _Optional[int] = ..., chunk: _Optional[_Union[TensorChunk, _Mapping]] = ...) -> None: ...

class BatchEnd(_message.Message):
    __slots__ = ("batch_id",)
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    batch_id: int
    def __init__(self, batch_id: _Optional[int] = ...) -> None: ...

class LearningRates(_message.Message):
    __slots__ = ("optimizer", "lr")
    OPTIMIZER_FIELD_NUMBER: _ClassVar[int]
    LR_FIELD_NUMBER: _ClassVar[int]
    optimizer: str
    lr: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, optimizer: _Optional[str] = ..., lr: _Optional[_Iterable[float]] = ...) -> None: ...

class Step(_message.Message):
    __slots__ = ("seq", "batch_id", "learning_rates")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    LEARNING_RATES_FIELD_NUMBER: _ClassVar[int]
    seq: int
    batch_id: int
    learning_rates: _containers.RepeatedCompositeFieldContainer[LearningRates]
    def __init__(self, seq: _Optional[int] = ..., batch_id: _Optional[int] = ..., learning_rates: _Optional[_Iterable[_Union[LearningRates, _Mapping]]] = ...) -> None: ...

class Release(_message.Message):
    __slots__ = ("batch_id",)
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    batch_id: int
    def __init__(self, batch_id: _Optional[int] = ...) -> None: ...

class Barrier(_message.Message):
    __slots__ = ("seq",)
    SEQ_FIELD_NUMBER: _ClassVar[int]
    seq: int
    def __init__(self, seq: _Optional[int] = ...) -> None: ...

class GetState(_message.Message):
    __slots__ = ("seq", "part")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    seq: int
    part: StatePart
    def __init__(self, seq: _Optional[int] = ..., part: _Optional[_Union[StatePart, str]] = ...) -> None: ...

class StateTensor(_message.Message):
    __slots__ = ("chunk",)
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    chunk: TensorChunk
    def __init__(self, chunk: _Optional[_Union[TensorChunk, _Mapping]] = ...) -> None: ...

class SetState(_message.Message):
    __slots__ = ("seq", "part", "skeleton")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    SKELETON_FIELD_NUMBER: _ClassVar[int]
    seq: int
    part: StatePart
    skeleton: str
    def __init__(self, seq: _Optional[int] = ..., part: _Optional[_Union[StatePart, str]] = ..., skeleton: _Optional[str] = ...) -> None: ...

class ClientMessage(_message.Message):
    __slots__ = ("open", "batch_tensor", "batch_end", "step", "release", "barrier", "get_state", "state_tensor", "set_state")
    OPEN_FIELD_NUMBER: _ClassVar[int]
    BATCH_TENSOR_FIELD_NUMBER: _ClassVar[int]
    BATCH_END_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    BARRIER_FIELD_NUMBER: _ClassVar[int]
    GET_STATE_FIELD_NUMBER: _ClassVar[int]
    STATE_TENSOR_FIELD_NUMBER: _ClassVar[int]
    SET_STATE_FIELD_NUMBER: _ClassVar[int]
    open: Open
    batch_tensor: BatchTensor
    batch_end: BatchEnd
    step: Step
    release: Release
    barrier: Barrier
    get_state: GetState
    state_tensor: StateTensor
    set_state: SetState
    def __init__(self, open: _Optional[_Union[Open, _Mapping]] = ..., batch_tensor: _Optional[_Union[BatchTensor, _Mapping]] = ..., batch_end: _Optional[_Union[BatchEnd, _Mapping]] = ..., step: _Optional[_Union[Step, _Mapping]] = ..., release: _Optional[_Union[Release, _Mapping]] = ..., barrier: _Optional[_Union[Barrier, _Mapping]] = ..., get_state: _Optional[_Union[GetState, _Mapping]] = ..., state_tensor: _Optional[_Union[StateTensor, _Mapping]] = ..., set_state: _Optional[_Union[SetState, _Mapping]] = ...) -> None: ...

class OptimizerGroups(_message.Message):
    __slots__ = ("optimizer", "lr")
    OPTIMIZER_FIELD_NUMBER: _ClassVar[int]
    LR_FIELD_NUMBER: _ClassVar[int]
    optimizer: str
    lr: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, optimizer: _Optional[str] = ..., lr: _Optional[_Iterable[float]] = ...) -> None: ...

class Opened(_message.Message):
    __slots__ = ("target", "device_name", "parameter_count", "optimizers")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    DEVICE_NAME_FIELD_NUMBER: _ClassVar[int]
    PARAMETER_COUNT_FIELD_NUMBER: _ClassVar[int]
    OPTIMIZERS_FIELD_NUMBER: _ClassVar[int]
    target: str
    device_name: str
    parameter_count: int
    optimizers: _containers.RepeatedCompositeFieldContainer[OptimizerGroups]
    def __init__(self, target: _Optional[str] = ..., device_name: _Optional[str] = ..., parameter_count: _Optional[int] = ..., optimizers: _Optional[_Iterable[_Union[OptimizerGroups, _Mapping]]] = ...) -> None: ...

class StepDone(_message.Message):
    __slots__ = ("seq", "loss", "server_step_s", "compile_count", "peak_memory_bytes")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    LOSS_FIELD_NUMBER: _ClassVar[int]
    SERVER_STEP_S_FIELD_NUMBER: _ClassVar[int]
    COMPILE_COUNT_FIELD_NUMBER: _ClassVar[int]
    PEAK_MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    seq: int
    loss: TensorChunk
    server_step_s: float
    compile_count: int
    peak_memory_bytes: int
    def __init__(self, seq: _Optional[int] = ..., loss: _Optional[_Union[TensorChunk, _Mapping]] = ..., server_step_s: _Optional[float] = ..., compile_count: _Optional[int] = ..., peak_memory_bytes: _Optional[int] = ...) -> None: ...

class Done(_message.Message):
    __slots__ = ("seq",)
    SEQ_FIELD_NUMBER: _ClassVar[int]
    seq: int
    def __init__(self, seq: _Optional[int] = ...) -> None: ...

class StateDone(_message.Message):
    __slots__ = ("seq", "skeleton")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SKELETON_FIELD_NUMBER: _ClassVar[int]
    seq: int
    skeleton: str
    def __init__(self, seq: _Optional[int] = ..., skeleton: _Optional[str] = ...) -> None: ...

class ServerMessage(_message.Message):
    __slots__ = ("opened", "step_done", "done", "state_tensor", "state_done")
    OPENED_FIELD_NUMBER: _ClassVar[int]
    STEP_DONE_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    STATE_TENSOR_FIELD_NUMBER: _ClassVar[int]
    STATE_DONE_FIELD_NUMBER: _ClassVar[int]
    opened: Opened
    step_done: StepDone
    done: Done
    state_tensor: StateTensor
    state_done: StateDone
    def __init__(self, opened: _Optional[_Union[Opened, _Mapping]] = ..., step_done: _Optional[_Union[StepDone, _Mapping]] = ..., done: _Optional[_Union[Done, _Mapping]] = ..., state_tensor: _Optional[_Union[StateTensor, _Mapping]] = ..., state_done: _Optional[_Union[StateDone, _Mapping]] = ...) -> None: ...
