"""A translator from one model's chunk caches to another's: per target layer, K and V mixtures.

    source chunk (encoder K/V, token offsets, text)
      -> target tokenization of the same text, alignment weights (T_t, T_s)
      -> per target layer l: x = W @ [K, V of source layers paired with l] (+ target position)
         (+ the target's own embeddings of the token and the ones before it: mot/token_features.py)
      -> K_l = mixture_k[l](x), V_l = mixture_v[l](x)   (T_t, kv_heads_t * head_dim_t)
      -> a ChunkCache in the target's space (rotary targets: position-free keys; the target's own
         rotary is applied at assembly)
"""

import json
from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from cag.errors import CagError
from cag.kv.chunk_cache import ChunkCache, chunk_meta, tokenize_chunk
from cag.models.fingerprint import sha256_hex, tensors_digest
from cag.translations import TranslationId, TranslatorKind
from mot.alignment import align
from mot.batched import translate_batch
from mot.features import feature_dim, layer_features, position_features, unflatten_heads
from mot.layer_map import pair_layers
from mot.mixture import Mixture
from mot.token_features import embedding_table, token_features

CHECKPOINT_FORMAT = 1
# features a translator may lack, and the spec fields that describe each: left out of its identity
# when the feature is off, so translators made before it keep their fingerprint
OPTIONAL_FEATURES = {"target_embeddings": ("target_embeddings", "embedding_dim"), "token_rank": ("token_rank",)}
# fields of features measured without gain and removed (chunk attention: docs/results.md), and
# the value that meant off: a checkpoint that used one is refused, one that did not reads as before
RETIRED_FIELDS = {"attention_dim": 0, "attention_heads": None}


@dataclass(frozen=True)
class ModelSide:
    """What a translator knows about one of its two models."""

    name: str
    fingerprint: str
    tokenizer_fingerprint: str
    geometry: dict  # KVGeometry.to_dict()

    @classmethod
    def of(cls, lm) -> "ModelSide":
        return cls(lm.name, lm.fingerprint, lm.tokenizer_fingerprint, lm.geometry.to_dict())

    @property
    def num_layers(self) -> int:
        return self.geometry["num_layers"]

    @property
    def kv_width(self) -> int:
        return self.geometry["kv_heads"] * self.geometry["head_dim"]

    @property
    def is_rotary(self) -> bool:
        return self.geometry["positions"]["kind"] == "rotary"


@dataclass(frozen=True)
class TranslatorSpec:
    """What a translator is: its two models and its shape. Hashed (with the weights) into its
    fingerprint; how it was trained and what it measured are its TrainingRecord."""

    kind: TranslatorKind
    source: ModelSide
    target: ModelSide
    layer_map: tuple  # per target layer: the source layers it reads
    experts: int = 4
    top_k: int = 2
    rank: int = 24
    router_hidden: int = 32
    position_dim: int = 0  # > 0 for absolute-position targets (GPT-2, OPT)
    target_embeddings: int = 0  # > 0: the target's embeddings of each token and the ones before it
    embedding_dim: int = 0  # the target's embedding width (set with target_embeddings)
    token_rank: int = 0  # > 0: those features projected to this width (one projection for all layers)
    format_version: int = CHECKPOINT_FORMAT

    @property
    def translation(self) -> TranslationId:
        return TranslationId(self.source.name, self.target.name, self.kind)

    @property
    def token_dim(self) -> int:
        """Width of the raw token embedding features (mot.token_features)."""
        return self.target_embeddings * self.embedding_dim

    @property
    def shared_dim(self) -> int:
        """Width of the features every target layer reads alike (positions, token embeddings,
        projected to `token_rank` when set)."""
        return self.position_dim + (self.token_rank or self.token_dim)

    @property
    def in_dim(self) -> int:
        return feature_dim(self.source.kv_width, len(self.layer_map[0]), 0) + self.shared_dim

    def to_dict(self) -> dict:
        return asdict(self)

    def identity(self) -> dict:
        """The spec as its fingerprint hashes it (the fields of features it lacks left out)."""
        data = self.to_dict()
        omitted = {f for switch, names in OPTIONAL_FEATURES.items() if not data[switch] for f in names}
        return {k: v for k, v in data.items() if k not in omitted}

    @classmethod
    def from_dict(cls, data: dict) -> "TranslatorSpec":
        """From a checkpoint's "spec" (which also holds the TrainingRecord's keys, ignored here)."""
        used = [k for k, off in RETIRED_FIELDS.items() if off is not None and data.get(k, off) != off]
        if used:
            raise CagError(f"This translator uses {', '.join(used)}, a feature this cag no longer has (it "
                           "measured no gain); retrain it with `cag train`.")
        data = {k: v for k, v in data.items() if k not in ("training", "metrics", *RETIRED_FIELDS)}
        return cls(**{**data, "kind": TranslatorKind(data["kind"]), "source": ModelSide(**data["source"]),
                      "target": ModelSide(**data["target"]),
                      "layer_map": tuple(tuple(pair) for pair in data["layer_map"])})


@dataclass(frozen=True)
class TrainingRecord:
    """How a translator was made and what it measured; not part of its identity."""

    training: dict = field(default_factory=dict)  # the resolved TrainConfig, tokens, wall times
    metrics: dict = field(default_factory=dict)  # held-out diagnostics, QA retention

    @classmethod
    def from_dict(cls, data: dict) -> "TrainingRecord":
        return cls(data.get("training", {}), data.get("metrics", {}))


def make_spec(kind: TranslatorKind, source_lm, target_lm, pairs_per_layer: int = 2, experts: int = 4,
              top_k: int = 2, rank: int = 24, router_hidden: int = 32, target_embeddings: int = 0,
              token_rank: int = 0) -> TranslatorSpec:
    kind = check_kind(kind)
    if experts < 1 or not 1 <= top_k <= experts:
        raise CagError(f"Need experts >= 1 and 1 <= top-k <= experts (got {experts}, {top_k}).")
    if target_embeddings < 0 or token_rank < 0:
        raise CagError(f"Need --target-embeddings >= 0 and --token-rank >= 0 (got {target_embeddings}, {token_rank}).")
    if token_rank and not target_embeddings:
        raise CagError("--token-rank projects the target's token embeddings: set --target-embeddings too.")
    source, target = ModelSide.of(source_lm), ModelSide.of(target_lm)
    layer_map = tuple(tuple(pair) for pair in pair_layers(source.num_layers, target.num_layers, pairs_per_layer))
    embedding_dim = embedding_table(target_lm).shape[1] if target_embeddings else 0
    return TranslatorSpec(kind, source, target, layer_map, experts, top_k, rank, router_hidden,
                          position_dim=0 if target.is_rotary else 32, target_embeddings=target_embeddings,
                          embedding_dim=embedding_dim, token_rank=min(token_rank, target_embeddings * embedding_dim))


def check_kind(kind) -> TranslatorKind:
    """`kind` as a TranslatorKind, or a one-line error naming the kinds."""
    try:
        return TranslatorKind(kind)
    except ValueError:
        raise CagError(f"Unknown translator kind {kind!r}; choose one of {', '.join(TranslatorKind)}.") from None


class LayerTranslator(nn.Module):
    def __init__(self, spec: TranslatorSpec):
        super().__init__()
        args = dict(kind=spec.kind, experts=spec.experts, top_k=spec.top_k, rank=spec.rank,
                    router_hidden=spec.router_hidden)
        self.k = Mixture(spec.in_dim, spec.target.kv_width, **args)
        self.v = Mixture(spec.in_dim, spec.target.kv_width, **args)


class Translator(nn.Module):
    def __init__(self, spec: TranslatorSpec, record: TrainingRecord = TrainingRecord()):
        super().__init__()
        self.spec, self.record = spec, record
        self.layers = nn.ModuleList(LayerTranslator(spec) for _ in spec.layer_map)
        if spec.token_rank:  # (token_dim, token_rank), shared by every layer; set by the ridge fit
            self.token_projection = nn.Parameter(torch.zeros(spec.token_dim, spec.token_rank))

    @property
    def kind(self) -> TranslatorKind:
        return self.spec.kind

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def fingerprint(self) -> str:
        """sha256 over the spec's identity (not its metrics) and every tensor's bytes. Hashed once
        per loaded translator (every ask and eval example names its translated-cache space by it);
        training, which changes the weights, never asks for it."""
        if getattr(self, "_fingerprint", None) is None:
            self._fingerprint = sha256_hex(json.dumps(self.spec.identity(), sort_keys=True).encode()
                                           + tensors_digest(self).encode())
        return self._fingerprint

    def shared_inputs(self, positions: torch.Tensor | None, tokens: torch.Tensor | None,
                      device, project: bool = True) -> torch.Tensor | None:
        """(T_t, P + E) features every target layer reads alike: target position features and the
        target's token embedding features (`tokens`, from mot.token_features; times the token
        projection when the translator has one, unless `project` is False); None if neither."""
        parts = []
        if self.spec.position_dim:
            parts.append(position_features(positions, self.spec.position_dim).to(device))
        if self.spec.target_embeddings:
            if tokens is None or tokens.shape[-1] != self.spec.token_dim:
                raise CagError("This translator reads the target's token embeddings: pass "
                               "mot.token_features of the chunk's target token ids.")
            tokens = tokens.float().to(device)
            parts.append(tokens @ self.token_projection if self.spec.token_rank and project else tokens)
        return torch.cat(parts, dim=-1) if parts else None

    def layer_parts(self, src_keys: list, src_values: list, weights: torch.Tensor,
                    positions: torch.Tensor | None = None, tokens: torch.Tensor | None = None,
                    project: bool = True) -> tuple[list, torch.Tensor | None]:
        """Per target layer (T_t, F_s) aligned source features, and the (T_t, F - F_s) features
        every layer shares (or None): a layer's input is the two side by side (`project` False:
        the shared token features before the token projection, for the ridge fit)."""
        weights = weights.to(self.layers[0].k.base.weight.device)
        own = [weights @ layer_features(src_keys, src_values, source_layers).to(weights.device)
               for source_layers in self.spec.layer_map]  # (T_t, F_s) each
        return own, self.shared_inputs(positions, tokens, weights.device, project)

    def layer_inputs(self, src_keys: list, src_values: list, weights: torch.Tensor,
                     positions: torch.Tensor | None = None,
                     tokens: torch.Tensor | None = None) -> list[torch.Tensor]:
        """Per target layer (T_t, F): aligned source features (+ target position features, + the
        target's token embedding features)."""
        own, shared = self.layer_parts(src_keys, src_values, weights, positions, tokens)
        return [torch.cat([x, shared], dim=-1) if shared is not None else x for x in own]

    def forward(self, src_keys: list, src_values: list, weights: torch.Tensor,
                positions: torch.Tensor | None = None,
                tokens: torch.Tensor | None = None) -> tuple[list, list, torch.Tensor]:
        """Target per-layer K, V (kv_heads_t, T_t, head_dim_t) and the summed router balance loss."""
        heads = self.spec.target.geometry["kv_heads"]
        keys, values, balance = [], [], weights.new_zeros(())
        for layer, x in zip(self.layers, self.layer_inputs(src_keys, src_values, weights, positions, tokens)):
            k, aux_k = layer.k(x)
            v, aux_v = layer.v(x)
            keys.append(unflatten_heads(k, heads))
            values.append(unflatten_heads(v, heads))
            balance = balance + aux_k + aux_v
        return keys, values, balance / max(1, 2 * len(self.layers))


def check_models(translator: Translator, source_fingerprint: str, target_lm) -> None:
    """The translator reads caches of the model with `source_fingerprint` and writes `target_lm`'s:
    by fingerprint, and by shape (a JSON relabelled for another pair is refused here, not deep in
    the translation)."""
    spec = translator.spec
    want, have = spec.target.geometry, target_lm.geometry.to_dict()
    differ = [k for k in ("family", "num_layers", "kv_heads", "head_dim") if want.get(k) != have.get(k)]
    if spec.target_embeddings and spec.embedding_dim != embedding_table(target_lm).shape[1]:
        differ.append("embedding width")
    if differ:
        raise CagError(f"Translator {spec.translation} was made for a "
                       f"generator of another shape than {target_lm.name} ({', '.join(differ)} differ): its JSON "
                       "does not describe the model it is used with; reinstall the translator or retrain it "
                       "with `cag train`.")
    if spec.target.fingerprint != target_lm.fingerprint:
        raise CagError(f"Translator {spec.translation} was trained "
                       f"for target fingerprint {spec.target.fingerprint[:12]}, but {target_lm.name} is "
                       f"{target_lm.fingerprint[:12]}: retrain it with `cag train`.")
    if spec.source.fingerprint != source_fingerprint:
        raise CagError(f"This chunk cache was prefilled by a model with fingerprint "
                       f"{source_fingerprint[:12]}, but translator {spec.translation} reads caches of {spec.source.name} "
                       f"({spec.source.fingerprint[:12]}): re-ingest with that encoder or train "
                       "a translator for this one.")


def translate_chunks(translator: Translator, chunks: list[ChunkCache], target_lm, target_prefix=(),
                     position_starts: list | None = None) -> list[ChunkCache]:
    """`chunks` (the encoder's) as chunk caches of `target_lm`, placed after `target_prefix`,
    translated in one batch on the translator's device. `position_starts`: each chunk's first
    position (absolute-position generators: where it lands; default: right after the prefix).
    Computed in the generator's dtype when that is half precision (a GPU), else in bf16 where the
    CPU multiplies it natively."""
    prefix = torch.as_tensor(list(target_prefix), dtype=torch.int64)
    items, parts = [], []
    for i, chunk in enumerate(chunks):
        check_models(translator, chunk.meta.model_fingerprint, target_lm)
        if not chunk.text:
            raise CagError("This chunk cache holds no text, so it cannot be aligned for translation.")
        t_ids, t_offsets = tokenize_chunk(target_lm.tokenizer, chunk.text)
        weights = align(chunk.text, t_offsets, chunk.offsets).weights
        start = prefix.numel() if position_starts is None else int(position_starts[i])
        positions = torch.arange(start, start + t_ids.numel())
        tokens = (token_features(embedding_table(target_lm), t_ids, translator.spec.target_embeddings)
                  if translator.spec.target_embeddings else None)
        items.append((chunk.keys, chunk.values, weights, positions, tokens))
        parts.append((t_ids, t_offsets, start))
    model_dtype = next(target_lm.model.parameters()).dtype
    dtype = model_dtype if model_dtype in (torch.bfloat16, torch.float16) else None
    translated = [kv for batch in token_batches(items, [p[0].numel() for p in parts], TRANSLATE_BATCH_TOKENS)
                  for kv in translate_batch(translator, batch, dtype)]
    results = []
    for chunk, (t_ids, t_offsets, start), (keys, values) in zip(chunks, parts, translated):
        meta = chunk_meta(target_lm, start, prefix, chunk.text, chunk.meta.doc_id, chunk.meta.chunk_index)
        results.append(ChunkCache([k.contiguous() for k in keys], [v.contiguous() for v in values], t_ids,
                                  t_offsets, meta, chunk.text))
    return results


TRANSLATE_BATCH_TOKENS = 1024  # target tokens per translate_batch call


def token_batches(items: list, tokens: list[int], limit: int = TRANSLATE_BATCH_TOKENS) -> list[list]:
    """`items` in order, grouped into batches of at most `limit` tokens (a longer item alone). One
    batch for a 16k-token context peaked at 6 GB and took 1.6 ms per token, against 0.4 ms for
    1k tokens: the per-layer intermediates of every token at once no longer fit the caches."""
    batches, size = [], limit
    for item, n in zip(items, tokens):
        if size + n > limit:
            batches.append([])
            size = 0
        batches[-1].append(item)
        size += n
    return batches


def translate_chunk(translator: Translator, chunk: ChunkCache, target_lm, target_prefix=(),
                    position_start: int | None = None) -> ChunkCache:
    """`chunk` (the encoder's) as a chunk cache of `target_lm`, placed after `target_prefix`."""
    return translate_chunks(translator, [chunk], target_lm, target_prefix,
                            None if position_start is None else [position_start])[0]
