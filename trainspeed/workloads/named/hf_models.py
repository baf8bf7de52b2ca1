"""`--workload hf:MODEL_TYPE`: a Hugging Face transformers architecture built from its config class.

`hf:gpt2`, `hf:llama`, `hf:bert`, ...: `AutoConfig.for_model(MODEL_TYPE, **size)` and
`from_config`, with random weights, so nothing is downloaded and no hub is asked. A decoder trains
with the causal-LM loss of the model's own `labels` path; an encoder of the masked-LM mapping
(BERT) with the masked-LM loss on 15% of positions. Validation reports the loss in nats per
predicted token and bits per token.

Sizes: presets `tiny` (2 layers of width 128, 1,024 tokens, windows of 128) and `base` (the config
class's defaults, windows of up to 1,024), then overrides: `seq` (tokens per sample), `objective`
(causal or masked) and any attribute of the config class, under its own name or a
standard alias (`n_layer=4` and `num_hidden_layers=4` are one size for GPT-2), except the dtype
(the target's precision decides it). The size is checked by building the model and running it (on
the meta device where it can, within a time limit), so a size has at most MAX_LAYERS layers. Real
data: token windows of `seq` from `trainspeed data from-arrays`, or read where they lie (a token
file, a Hugging Face dataset, tar shards: `trainspeed.data.in_place`).
"""

from __future__ import annotations

import functools
import inspect
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from trainspeed.data.base import Batch, LoaderConfig
from trainspeed.data.ids import id_stop
from trainspeed.data.mapped import MappedLoader
from trainspeed.errors import UsageError
from trainspeed.workloads.base import Trainable
from trainspeed.workloads.meta import device_of
from trainspeed.workloads.named import hf_loss
from trainspeed.workloads.named.counting import CountedFlops
from trainspeed.workloads.named.library import check_size, first_line, import_library
from trainspeed.workloads.named.sizing import (SizeValue, closest, parse_size, require_choice, require_positive_int,
                                               shown)

FAMILY = "hf"
EXTRA = "hf"
TINY: dict[str, SizeValue] = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
                              "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1024, "seq": 128}
"""In the standard names; `num_key_value_heads` and `intermediate_size` only where the config class
has them. The position table is as long as `seq`."""
BASE_SEQ = 1024
OWN_KEYS = ("seq", "objective")
OBJECTIVES = ("causal", "masked")
LEARNING_RATE = 6e-4
"""AdamW at REFERENCE_BATCH windows (nanoGPT's GPT-2 rate)."""
REFERENCE_BATCH = 512
MASK_FRACTION = 0.15
TOKEN_DTYPES = (np.uint8, np.int16, np.int32, np.int64)
"""Token columns the loader can hand to any device (torch has few uint16 or uint32 kernels)."""
CHECK_BATCH = 2
MAX_LAYERS = 256
"""The most layers a size may have under any key that counts them (n_layer, num_hidden_layers,
decoder_layers ...): every size is checked by building the model and running it on the meta device,
which takes about 30 ms a layer; the deepest published language models have about 130."""
DTYPE_KEYS = ("dtype", "torch_dtype")
"""Config keys that would change the weights' dtype behind the target's back: the target's
precision decides it (rows record it)."""


@dataclass(frozen=True)
class LanguageModelSize:
    config: Any
    """The transformers config (a PretrainedConfig)."""
    sequence: int
    objective: str
    learning_rate: float

    @property
    def vocabulary(self) -> int:
        return int(self.config.vocab_size)


def masked_inputs(tokens: torch.Tensor, mask_token: int, random: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs with MASK_FRACTION of positions replaced by `mask_token`, and labels (-100 elsewhere).

    Training draws the positions on the device; validation takes a fixed pattern, so its metric is
    the same on every evaluation of the same weights."""
    if random:
        chosen = torch.rand(tokens.shape, device=tokens.device) < MASK_FRACTION
    else:
        rows = torch.arange(tokens.shape[0], device=tokens.device)[:, None]
        columns = torch.arange(tokens.shape[1], device=tokens.device)[None, :]
        chosen = (columns * 7 + rows * 3) % 100 < MASK_FRACTION * 100
    return torch.where(chosen, mask_token, tokens), torch.where(chosen, tokens, -100)


class LanguageModelTrainable(Trainable):
    def __init__(self, model: nn.Module, size: LanguageModelSize) -> None:
        super().__init__({"lm": model})
        self.size = size
        self.mask_token = size.vocabulary - 1
        self.no_cache = {"use_cache": False} if "use_cache" in inspect.signature(model.forward).parameters else {}
        """On the jax family the model runs without a key/value cache: a decoder whose config turns one
        on (GPT-2's) writes it from inside each layer, which a scan over the layers cannot keep.
        Elsewhere the config's choice stands: without a cache HF checks the positions for packed
        sequences on the host, a read that stops a lazy XLA graph and waits for a GPU every step."""
        self.one_loss_function = size.objective == "causal" and hf_loss.install(model, size.vocabulary, {})
        """The causal loss as one function a backend can chunk over tokens (`hf_loss`)."""

    def setup_optimizers(self, fused: bool = False) -> None:
        self.optimizers = {"lm": torch.optim.AdamW(self.networks["lm"].parameters(), lr=self.size.learning_rate,
                                                   betas=(0.9, 0.95), weight_decay=0.1, fused=fused or None)}

    def _inputs_and_labels(self, batch: Batch, training: bool) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = batch["tokens"].long()
        if self.size.objective == "causal":
            return tokens, tokens  # the model shifts the labels itself
        return masked_inputs(tokens, self.mask_token, random=training)

    def _cache_choice(self) -> dict[str, bool]:
        return self.no_cache if next(self.networks["lm"].parameters()).device.type == "jax" else {}

    def train_step(self, batch: Batch) -> torch.Tensor:
        inputs, labels = self._inputs_and_labels(batch, training=True)
        loss = self.wrapped["lm"](input_ids=inputs, labels=labels, **self._cache_choice()).loss
        loss.backward()
        self.optimizers["lm"].step()
        self.optimizers["lm"].zero_grad(set_to_none=True)
        return loss.detach()

    @torch.no_grad()
    def eval_metrics(self, batch: Batch) -> dict[str, torch.Tensor]:
        """The model's mean loss times the tokens it is a mean over: a sum the trainer can add up."""
        inputs, labels = self._inputs_and_labels(batch, training=False)
        loss = self.networks["lm"](input_ids=inputs, labels=labels, **self._cache_choice()).loss.float()
        predicted = labels[:, 1:] if self.size.objective == "causal" else labels
        count = (predicted != -100).sum()
        return {"nats": loss * count, "tokens": count}

    def summarize_eval(self, totals: dict[str, torch.Tensor]) -> dict[str, float]:
        nats_per_token = float(totals["nats"]) / max(float(totals["tokens"]), 1.0)
        return {"loss": nats_per_token, "bits_per_token": nats_per_token / math.log(2)}


def checked_tokens(batch: Batch, vocabulary: int, data: str, model: str) -> Batch:
    """Token ids as int32, as the synthetic batches hold them, whatever integer type the shards
    store (uint8 bytes, int16 ids): one layout on every device and in every row. Each batch's ids
    are checked within the vocabulary first (one min and max), so an id past it is one line, not an
    IndexError in the embedding after steps ran, and the narrowing to int32 never wraps (2**62 would
    be token 0)."""
    tokens = batch["tokens"]
    stop = id_stop(vocabulary)
    if tokens.numel():
        low, high = (int(value) for value in torch.aminmax(tokens))
        if low < 0 or high >= stop:
            raise UsageError(f"--data {data}: a batch holds token id {low if low < 0 else high}, outside {model}'s "
                             f"vocabulary 0..{stop - 1}; `trainspeed data verify {data} --vocab {stop}` names each such id")
    return {**batch, "tokens": tokens.to(torch.int32)}


class HuggingFaceWorkload(CountedFlops):
    sizes = ("tiny", "base")
    default_size = "tiny"
    reference_batch = REFERENCE_BATCH

    def __init__(self, model_type: str) -> None:
        self.transformers = import_library("transformers", EXTRA)
        self.transformers.logging.set_verbosity_error()
        auto = self.transformers.models.auto
        causal = auto.modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        masked = auto.modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES
        if model_type not in causal and model_type not in masked:
            known = sorted({*causal, *masked})
            raise UsageError(f"transformers {self.transformers.__version__} has no language model of type "
                             f"{shown(model_type)}{closest(model_type, known)} (hf:MODEL_TYPE takes a config's model_type)")
        self.model_type = model_type
        self.name = f"{FAMILY}:{model_type}"
        self.version = self.library_version = f"transformers {self.transformers.__version__}"
        self.default_objective = "masked" if model_type in masked else "causal"
        self.objectives = tuple(o for o, mapping in (("causal", causal), ("masked", masked)) if model_type in mapping)
        try:
            self._default_config = self.transformers.AutoConfig.for_model(model_type)
        except Exception as error:  # noqa: BLE001 - the config class's refusal of its own defaults, in one line
            raise UsageError(f"transformers {self.transformers.__version__} cannot make a {model_type} config from its "
                             f"defaults ({type(error).__name__}: {first_line(error)}); choose another model "
                             "type") from None

    def _config_key(self, key: str) -> str:
        """The config class's own name of `key` (GPT-2 calls num_hidden_layers n_layer)."""
        return type(self._default_config).attribute_map.get(key, key)

    def _config_keys(self) -> set[str]:
        return set(self._default_config.to_dict()) | set(type(self._default_config).attribute_map)

    def _presets(self) -> dict[str, dict[str, SizeValue]]:
        keys = self._config_keys()
        tiny = {self._config_key(k): v for k, v in TINY.items() if k == "seq" or k in keys}
        tiny[self._config_key("max_position_embeddings")] = TINY["seq"]
        positions = getattr(self._default_config, "max_position_embeddings", BASE_SEQ)
        return {"tiny": tiny, "base": {"seq": min(int(positions), BASE_SEQ)}}

    def language_model_size(self, size: str, given: str | None = None) -> LanguageModelSize:
        """`given`: the size as the user wrote it, which errors echo (default: `size`)."""
        given = size if given is None else given
        parsed = parse_size(size, self.sizes, self.default_size, self.name)
        keys = self._config_keys()
        overrides: dict[str, SizeValue] = {}
        for key, value in parsed.overrides:
            if key in DTYPE_KEYS:
                raise UsageError(f"--size {shown(given)}: {key} is not a size key: the target's precision decides the "
                                 "dtype (for bfloat16, use a :bf16 target, e.g. cpu:eager:bf16)")
            if key not in keys and key not in OWN_KEYS:
                raise UsageError(f"--size {shown(given)}: {shown(key)} is neither an attribute of "
                                 f"{type(self._default_config).__name__} nor one of {', '.join(OWN_KEYS)}"
                                 f"{closest(key, [*keys, *OWN_KEYS])}")
            if _counts_layers(key) and isinstance(value, int) and not isinstance(value, bool) and value > MAX_LAYERS:
                raise UsageError(f"--size {shown(given)}: {key}={value} is more layers than a size may have (at most "
                                 f"{MAX_LAYERS}: each size is checked by building the model and running it on the meta "
                                 "device, about 30 ms a layer); choose fewer")
            overrides[key if key in OWN_KEYS else self._config_key(key)] = value
        settings = {**self._presets()[parsed.preset], **overrides}
        positions_key = self._config_key("max_position_embeddings")
        if parsed.preset == "tiny" and "seq" in overrides and positions_key not in overrides:
            settings[positions_key] = settings["seq"]
        sequence = require_positive_int(given, "seq", settings.pop("seq"), minimum=2)
        objective = require_choice(given, "objective", settings.pop("objective", self.default_objective), self.objectives)
        try:
            config = self.transformers.AutoConfig.for_model(self.model_type, **settings)
            self._fit_special_tokens(config)
        except Exception as error:  # noqa: BLE001 - the config class's refusal, in one line
            raise UsageError(f"--size {shown(given)}: {type(self._default_config).__name__} refuses it "
                             f"({type(error).__name__}: {first_line(error)})") from None
        positions = getattr(config, "max_position_embeddings", None)
        if isinstance(positions, int) and sequence > positions:
            raise UsageError(f"--size {shown(given)}: seq={sequence} is longer than the model's {positions} positions; "
                             f"set {positions_key}={sequence} or a shorter seq")
        return LanguageModelSize(config, sequence, objective, LEARNING_RATE)

    @staticmethod
    def _fit_special_tokens(config: Any) -> None:
        """Special token ids of the full vocabulary point past a smaller one; they become its last id."""
        for attribute in ("bos_token_id", "eos_token_id", "pad_token_id"):
            value = getattr(config, attribute, None)
            if isinstance(value, int) and value >= config.vocab_size:
                setattr(config, attribute, config.vocab_size - 1)

    def normalize_size(self, size: str | None) -> str:
        """The canonical size (config keys in the class's own names), after the model was built and
        a forward pass of it ran (on meta where it can, within a time limit: `library.check_size`)."""
        given = size or self.default_size
        parsed = parse_size(given, self.sizes, self.default_size, self.name)
        keyed = {(key if key in OWN_KEYS else self._config_key(key)): value for key, value in parsed.overrides}
        text = type(parsed)(parsed.preset, tuple(sorted(keyed.items()))).text
        if len(keyed) < len(parsed.overrides):
            raise UsageError(f"--size {shown(given)}: a key is given twice under two names")
        language_model_size = self.language_model_size(text, given)
        self._model_class(language_model_size)  # its module imported before the check's clock starts

        def forward(model: nn.Module) -> None:
            tokens = torch.zeros(CHECK_BATCH, language_model_size.sequence, dtype=torch.long, device=device_of(model))
            model(input_ids=tokens, labels=tokens)

        def cannot_run(error: BaseException) -> str:
            return f"{self.name} cannot run at it ({type(error).__name__}: {first_line(error)})"

        check_size(self.name, given, lambda: self._create_model(language_model_size), forward, cannot_run)
        return text

    def _auto_class(self, size: LanguageModelSize) -> Any:
        return self.transformers.AutoModelForCausalLM if size.objective == "causal" else self.transformers.AutoModelForMaskedLM

    def _model_class(self, size: LanguageModelSize) -> type:
        return self._auto_class(size)._model_mapping[type(size.config)]

    def _create_model(self, size: LanguageModelSize) -> nn.Module:
        return self._auto_class(size).from_config(size.config)

    def build(self, size: str, seed: int = 0) -> LanguageModelTrainable:
        language_model_size = self.language_model_size(size)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = self._create_model(language_model_size)
        return LanguageModelTrainable(model, language_model_size)

    def synthetic_batch(self, size: str, batch_size: int, generator: torch.Generator) -> Batch:
        """Uniform token ids within the vocabulary, as int32 (what a token shard holds)."""
        language_model_size = self.language_model_size(size)
        return {"tokens": torch.randint(0, language_model_size.vocabulary, (batch_size, language_model_size.sequence),
                                        generator=generator, dtype=torch.int32)}


    def open_dataset(self, path: str, size: str, config: LoaderConfig):
        """Token windows of `seq` ids below the vocabulary, as `trainspeed data from-arrays` writes them:
        a set whose index records ids past the vocabulary is refused here, before training, and every
        batch is checked (`checked_tokens`)."""
        from trainspeed.data import open_dataset
        from trainspeed.data.dataset import recorded_range
        from trainspeed.data.sources import SHARDS, detect_format

        language_model_size = self.language_model_size(size)
        if detect_format(path) != SHARDS:
            return self._open_in_place(path, size, language_model_size, config)
        loader = open_dataset(path, config, outputs=("tokens",))
        dtype, shape = loader.spec.schema.columns["tokens"]
        wanted = (language_model_size.sequence,)
        if np.dtype(dtype) not in [np.dtype(d) for d in TOKEN_DTYPES] or tuple(shape) != wanted:
            raise UsageError(f"{path}: tokens are {np.dtype(dtype)} {tuple(shape)}; {self.name} at size {size!r} trains on "
                             f"windows of {wanted[0]} ids as one of {', '.join(np.dtype(d).name for d in TOKEN_DTYPES)} "
                             f"(write them with trainspeed data from-arrays, or set seq={shape[0] if shape else '?'})")
        vocabulary = language_model_size.vocabulary
        low, high = recorded_range(path, "tokens") or (0, 0)  # a set written before ranges were recorded: (0, 0)
        if low < 0:
            raise UsageError(f"--data {path} holds token ids down to {low}; token ids count from 0: write the data "
                             "again with ids from 0")
        if high >= vocabulary:
            raise UsageError(f"--data {path} holds token ids up to {high}; {self.name} at size {size!r} has a vocabulary "
                             f"of {vocabulary}: set {self._config_key('vocab_size')}={high + 1} in --size, or write the "
                             f"data with ids below {vocabulary}")
        return MappedLoader(loader, functools.partial(checked_tokens, vocabulary=vocabulary, data=str(path),
                                                      model=self.name))

    def _open_in_place(self, path: str, size: str, language_model_size: LanguageModelSize, config: LoaderConfig):
        """Token windows of `seq` ids read where they lie (`trainspeed.data.in_place`): a token
        file, a Hugging Face dataset, tar shards; ids past the vocabulary refused before training."""
        from trainspeed.data.in_place import open_tokens

        opened = open_tokens(path, config, language_model_size.sequence)
        vocabulary = language_model_size.vocabulary
        low, high = opened.id_range
        if low < 0:
            raise UsageError(f"--data {path} holds token ids down to {low}; token ids count from 0")
        if high >= vocabulary:
            raise UsageError(f"--data {path} holds token ids up to {high}; {self.name} at size {size!r} has a vocabulary "
                             f"of {vocabulary}: set {self._config_key('vocab_size')}={high + 1} in --size, or give "
                             f"data with ids below {vocabulary}")
        return MappedLoader(opened.loader, functools.partial(checked_tokens, vocabulary=vocabulary, data=str(path),
                                                             model=self.name))


WORKLOAD = HuggingFaceWorkload


def _counts_layers(key: str) -> bool:
    """A config key that is a number of layers (each one built and run by the size check)."""
    return key.endswith("layers") or key.endswith("n_layer")


def names() -> list[str]:
    auto = import_library("transformers", EXTRA).models.auto.modeling_auto
    return sorted({*auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, *auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES})
