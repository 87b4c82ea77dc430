"""The split-layer hybrid, measured before it is built as a mode: translate the lower layers' K/V
and the residual stream entering a split layer S, and let the generator compute layers S..L-1 over
the context itself (a (L - S) / L share of a prefill). Is that worth more than the blend at the
same cost?

    encoder chunk cache --MoT--> translated K/V, layers 0..S-1            (the shipped translator)
                        --ridge--> residual h_S (T, hidden) entering layer S  (fitted here)
    generator: layers S..L-1 over the context from h_S, attending to the native prefix and to the
               context's own K/V it computes there (across chunks too); then the question

The residual map is a closed-form ridge fit on the features the MoT's layer S reads (the paired
source layers' K/V aligned to target tokens, and the target's own token embeddings through the
translator's projection), against the generator's hidden state entering layer S over chunks of the
training text, each prefilled after the answer-time prefix as ingest does. Variants scored on the
first COUNT questions of the evaluated SQuAD draw (eval's seeded order, as the layer oracle):
    translated                  every layer's K/V translated (full mode)
    split S                     layers < S translated, the residual at S translated, S.. computed
    split S, native residual    the same from the generator's own residual at S: what a perfect
                                residual map would give (equal to the oracle's "native S-23")
The check that the mechanics are exact: native K/V below S with the native residual must reproduce
the native answer (`--check`).

    python experiments/probe_split_layer.py [--splits 16,18,20] [--fit-chunks 256] [--count 80]

Writes runs/probes/split_layer-MODEL.json (or --out; residual fit error per split, F1 per variant).
Measured (shipped qwen MoT, 80 questions): splits 16 / 18 / 20 score 31.80 / 31.54 / 28.75 F1
against 27.08 translated, and their bounds (the oracle's native K/V from S up) stay below the blend
at the same cost: not built as a mode (README, issue 6 item 14).
"""

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from torch import nn
from transformers import DynamicCache

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from probe_layer_oracle import first_line, native_and_translated  # noqa: E402
from cag.defaults import DEFAULT_ENCODER, DEFAULT_GENERATOR  # noqa: E402
from cag.kv.assemble import AssembledContext, native_prefix_kv  # noqa: E402
from cag.kv.chunk_cache import prefill_chunks, tokenize_chunk  # noqa: E402
from cag.kv.serde import load_chunk_cache  # noqa: E402
from cag.models import load_model  # noqa: E402
from cag.progress import Progress  # noqa: E402
from cag.prompt import prompt_layout  # noqa: E402
from eval.datasets import load_examples, resolve_dataset, sample  # noqa: E402
from eval.metrics import bootstrap_difference_ci, squad_scores  # noqa: E402
from eval.runner import EvalConfig, build_store  # noqa: E402
from mot.alignment import align  # noqa: E402
from mot.checkpoint import load_translator  # noqa: E402
from mot.training.data import make_windows, read_paragraphs  # noqa: E402
from cag.models.layers import decoder_layers  # noqa: E402
from mot.training.ridge import solve_ridge  # noqa: E402
from mot.contexts import encoder_space  # noqa: E402
from mot.token_features import embedding_table, token_features  # noqa: E402

TRAIN_TEXT = "data/corpus/wikitext2/train_raw_part.jsonl"
HELD_OUT_TEXT = "data/corpus/wikitext2/valid.jsonl"


class _Skip(nn.Module):
    """Stands in for a decoder layer the generator does not run: hidden states pass unchanged,
    its cache layer is left alone (the translated K/V are put there afterwards)."""

    def forward(self, hidden_states, *args, **kwargs):
        return hidden_states


@torch.no_grad()
def residuals_entering(lm, ids: torch.Tensor, prefix_len: int, layers: list[int]) -> dict:
    """{layer: (T - prefix_len, hidden)} the generator's hidden state entering each of `layers`
    over `ids` (prefix + chunk), at the chunk's tokens."""
    captured, hooks = {}, []
    blocks = decoder_layers(lm.model)
    for layer in layers:
        def grab(module, args, kwargs, layer=layer):
            hidden = args[0] if args else kwargs["hidden_states"]
            captured[layer] = hidden[0, prefix_len:].float().cpu()
        hooks.append(blocks[layer].register_forward_pre_hook(grab, with_kwargs=True))
    try:
        lm.model(input_ids=ids[None].to(lm.device), use_cache=False, logits_to_keep=1)
    finally:
        for hook in hooks:
            hook.remove()
    return captured


@torch.no_grad()
def chunk_parts(translator, source_chunk, target_lm) -> tuple[list, torch.Tensor | None]:
    """The MoT's inputs for one encoder chunk cache: per target layer (T_t, F_s) aligned source
    features, and the (T_t, F_h) features every layer shares (Translator.layer_parts)."""
    t_ids, t_offsets = tokenize_chunk(target_lm.tokenizer, source_chunk.text)
    weights = align(source_chunk.text, t_offsets, source_chunk.offsets).weights
    spec = translator.spec
    tokens = (token_features(embedding_table(target_lm), t_ids, spec.target_embeddings)
              if spec.target_embeddings else None)
    return translator.layer_parts(source_chunk.keys, source_chunk.values, weights, None, tokens)


def residual_features(parts, layer: int, radius: int = 0) -> torch.Tensor:
    """(T_t, F) what the residual map entering `layer` reads: the aligned source features of the
    target layers within `radius` of it, and the shared features (from `chunk_parts`)."""
    own, shared = parts
    x = torch.cat(own[max(0, layer - radius):layer + radius + 1], -1)
    return (torch.cat([x, shared], -1) if shared is not None else x).float().cpu()


class ResidualRidge:
    """h = x W + b, the closed-form ridge fit (mot.training.ridge.solve_ridge) on moments in float64."""

    def __init__(self, lam: float = 1e-3):
        self.lam, self.n = lam, 0
        self.sx = self.sxx = self.sh = self.sxh = None

    def add(self, x: torch.Tensor, h: torch.Tensor) -> None:
        x, h = x.double(), h.double()  # (T, F), (T, H)
        if self.sx is None:
            self.sx, self.sxx = torch.zeros(x.shape[1], dtype=torch.float64), torch.zeros(x.shape[1], x.shape[1], dtype=torch.float64)
            self.sh, self.sxh = torch.zeros(h.shape[1], dtype=torch.float64), torch.zeros(x.shape[1], h.shape[1], dtype=torch.float64)
        self.n += x.shape[0]
        self.sx += x.sum(0)
        self.sxx += x.T @ x
        self.sh += h.sum(0)
        self.sxh += x.T @ h

    def solve(self) -> None:
        w, b = solve_ridge(self.n, self.sx, self.sxx, {"h": (self.sxh, self.sh)}, self.lam)["h"]
        self.w, self.b = w.float(), b.float()  # (F, H), (H,)
        self.mh = (self.sh / self.n).float()  # the residual's mean (the held-out error's reference)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x.float() @ self.w + self.b


def fit_residual_maps(translator, source_lm, target_lm, splits: list[int], chunks: int,
                      held_out: int, chunk_tokens: int, radii=(0,)) -> tuple[dict, dict]:
    """Per split layer and feature radius a ResidualRidge fitted on `chunks` training chunks,
    and its held-out error (normalized MSE: squared error over the residual's variance about its
    mean) on `held_out`; keyed (split, radius)."""
    src_prefix = prompt_layout(source_lm.tokenizer).prefix_ids
    tgt_prefix = torch.as_tensor(list(prompt_layout(target_lm.tokenizer).prefix_ids), dtype=torch.int64)

    def pieces(path: str, count: int) -> list[str]:
        windows = make_windows(read_paragraphs([Path(path)]), source_lm.tokenizer, count,
                               chunk_tokens=chunk_tokens, chunks=1, continuation_tokens=1)
        return [w.chunks[0] for w in windows]

    def pairs(texts: list[str]):
        for start in range(0, len(texts), 8):
            batch = texts[start:start + 8]
            for chunk in prefill_chunks(source_lm, batch, src_prefix, batch_size=len(batch)):
                t_ids, _ = tokenize_chunk(target_lm.tokenizer, chunk.text)
                hidden = residuals_entering(target_lm, torch.cat([tgt_prefix, t_ids]), tgt_prefix.numel(), splits)
                parts = chunk_parts(translator, chunk, target_lm)
                yield {(s, r): residual_features(parts, s, r) for s in splits for r in radii}, hidden

    keys = [(s, r) for s in splits for r in radii]
    maps = {key: ResidualRidge() for key in keys}
    train, test = pieces(TRAIN_TEXT, chunks), pieces(HELD_OUT_TEXT, held_out)
    start = time.perf_counter()
    for n, (features, hidden) in enumerate(pairs(train), 1):
        for s, r in keys:
            maps[s, r].add(features[s, r], hidden[s])
        print(f"\rresidual fit: {n}/{len(train)} chunks ({time.perf_counter() - start:.0f} s)", end="", file=sys.stderr)
    print(file=sys.stderr)
    for key in keys:
        maps[key].solve()
    errors = {key: [0.0, 0.0] for key in keys}  # squared error, squared deviation from the mean
    for features, hidden in pairs(test):
        for s, r in keys:
            errors[s, r][0] += (maps[s, r](features[s, r]) - hidden[s]).pow(2).sum().item()
            errors[s, r][1] += (hidden[s] - maps[s, r].mh).pow(2).sum().item()
    fit = {key: {"train_chunks": len(train), "train_tokens": maps[key].n, "held_out_chunks": len(test),
                 "features": maps[key].w.shape[0], "held_out_nmse": round(e / d, 4)}
           for key, (e, d) in errors.items()}
    return maps, fit


@torch.no_grad()
def split_context(lm, lower: AssembledContext, residual: torch.Tensor, split: int) -> AssembledContext:
    """The context for the question: `lower`'s K/V in layers < `split` (translated, or native),
    and in layers >= `split` the generator's own, computed over the context from `residual`
    ((T, hidden), the hidden state entering layer `split` at each context token). The layers below
    `split` do not run: each is replaced by a pass-through for this forward, so every layer keeps its
    index (its cache slot, and its attention type in models mixing sliding and global layers)."""
    p, blocks = lower.prefix_tokens, decoder_layers(lm.model)
    prefix_kv = native_prefix_kv(lm, lower.input_ids[:p])
    cache = DynamicCache(config=lm.config)
    for layer, (k, v) in enumerate(zip(*prefix_kv)):
        cache.update(k[None], v[None], layer)
    container = lm.model.base_model.layers
    originals = [container[i] for i in range(split)]
    for i in range(split):
        container[i] = _Skip()
    try:
        positions = torch.arange(p, lower.length, device=lm.device)[None]
        dtype = next(lm.model.parameters()).dtype
        lm.model(inputs_embeds=residual[None].to(lm.device, dtype), position_ids=positions, cache=cache,
                 use_cache=True, logits_to_keep=1)
    finally:
        for i, block in enumerate(originals):
            container[i] = block
    for layer in range(split):  # (to its length: answering from `lower` appended to its cache)
        stored = lower.cache.layers[layer]
        if stored.keys.shape[2] < lower.length:
            raise ValueError("the lower layers' cache must hold every position (a sliding-window "
                             "layer dropped some)")
        cache.layers[layer].update(stored.keys[:, :, p:lower.length], stored.values[:, :, p:lower.length])
    assert len(blocks) == len(cache.layers)
    return AssembledContext(cache, lower.input_ids, p, lower.chunk_spans)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=DEFAULT_GENERATOR)
    parser.add_argument("--splits", default="16,18,20", help="comma-separated split layers S")
    parser.add_argument("--fit-chunks", type=int, default=256)
    parser.add_argument("--held-out", type=int, default=32)
    parser.add_argument("--chunk-tokens", type=int, default=160, help="encoder tokens per fit chunk")
    parser.add_argument("--radii", default="0,1", help="feature radii fitted (the best held-out one is scored)")
    parser.add_argument("--native-residual", action="store_true",
                        help="also score each split from the generator's own residual (the oracle's \"native S-23\")")
    parser.add_argument("--check", type=int, default=5, help="questions on which the mechanics are checked exact")
    parser.add_argument("--count", type=int, default=80)
    parser.add_argument("--translator", default=None, help="MoT checkpoint stem (default: the shipped one)")
    parser.add_argument("--run", default="runs/probe-layer-oracle", help="run folder (the store)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    splits = [int(s) for s in args.splits.split(",")]

    target = load_model(args.model, "fp32", "cpu")
    source = load_model(DEFAULT_ENCODER, "fp32", "cpu")
    stem = args.translator or f"translators/{DEFAULT_ENCODER}__{args.model}__mot"
    translator = load_translator(Path(stem + ".safetensors"))
    translator.eval()
    radii = [int(r) for r in args.radii.split(",")]
    all_maps, fit = fit_residual_maps(translator, source, target, splits, args.fit_chunks, args.held_out,
                                      args.chunk_tokens, radii)
    radius = {s: min(radii, key=lambda r: fit[s, r]["held_out_nmse"]) for s in splits}
    maps = {s: all_maps[s, radius[s]] for s in splits}
    for (s, r), record in fit.items():
        print(f"split {s}, radius {r}: residual held-out nMSE {record['held_out_nmse']}", file=sys.stderr)

    path, task = resolve_dataset("squad", None)
    examples = sample(load_examples(path, task), task, args.count, 0)
    modes = ("native", "translated")
    config = EvalConfig(dataset="squad", model=args.model, modes=modes, out=args.run)
    store, locators = build_store(Path(args.run), config, task, examples, modes, Progress())
    layout = prompt_layout(target.tokenizer)
    names = ["native", "translated"] + [f"split {s}" for s in splits]
    names += [f"split {s}, native residual" for s in splits] if args.native_residual else []
    scores = {name: [] for name in names}
    exact_native, start = 0, time.perf_counter()
    contexts = native_and_translated(store, examples, locators, config, target, layout)
    for n, (example, rows, q_ids, native, translated) in enumerate(contexts, 1):
        p = native.prefix_tokens
        native_h = residuals_entering(target, native.input_ids, p, splits)  # one chunk (SQuAD): exact
        parts = [chunk_parts(translator, c, target) for c in _encoder_chunks(store, rows)]
        features = {s: torch.cat([residual_features(x, s, radius[s]) for x in parts]) for s in splits}
        answers = {"native": first_line(target, q_ids, native), "translated": first_line(target, q_ids, translated)}
        for s in splits:
            answers[f"split {s}"] = first_line(target, q_ids, split_context(target, translated, maps[s](features[s]), s))
            if args.native_residual:
                answers[f"split {s}, native residual"] = first_line(
                    target, q_ids, split_context(target, translated, native_h[s], s))
        if n <= args.check:
            check = first_line(target, q_ids, split_context(target, native, native_h[splits[0]], splits[0]))
            exact_native += check == answers["native"]
        for name in names:
            scores[name].append(squad_scores(answers[name], example["answers"])["f1"])
        print(f"\r{n}/{len(examples)} questions ({time.perf_counter() - start:.0f} s)", end="", file=sys.stderr)
    print(file=sys.stderr)

    checked = min(args.check, len(examples))
    result = {"model": args.model, "translator": stem, "count": len(examples),
              "residual_fit": {f"split {s}, radius {r}": v for (s, r), v in fit.items()},
              "radius_scored": {f"split {s}": r for s, r in radius.items()},
              "native_reproduced_by_split_mechanics": f"{exact_native}/{checked}", "variants": {}}
    print(f"{len(examples)} SQuAD questions; split {splits[0]} with native K/V and native residual "
          f"reproduces the native answer on {exact_native}/{checked} checked")
    print(f"{'variant':<30}{'F1':>7}  {'- translated [95% CI]':<24}")
    for name, values in scores.items():
        mean, lo, hi = bootstrap_difference_ci(values, scores["translated"])
        f1 = sum(values) / len(values)
        result["variants"][name] = {"f1": round(f1, 2), "minus_translated": [round(mean, 2), round(lo, 2), round(hi, 2)]}
        print(f"{name:<30}{f1:7.2f}  {mean:+6.2f} [{lo:+.2f}, {hi:+.2f}]")
    out = Path(args.out or f"runs/probes/split_layer-{args.model}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


def _encoder_chunks(store, rows):
    space = encoder_space(store)
    return [load_chunk_cache(store.cache_path(space, row.text_sha256)) for row in rows]


if __name__ == "__main__":
    main()
