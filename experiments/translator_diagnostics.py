"""Teacher-forced diagnostics on held-out windows: next-token KL against the native run, top-1
agreement, and per-layer attention-output cosine (how close each layer's attention output on the
continuation is to what it is when the generator read the context itself)."""

import contextlib

import torch

from cag.models.layers import attention_modules
from mot.training.step import run_window


@contextlib.contextmanager
def capture_attention(model, keep_last: int):
    """Collects each layer's attention output (last `keep_last` positions) during forwards."""
    outputs, handles = {}, []
    for i, attention in enumerate(attention_modules(model)):
        def hook(module, args, output, i=i):
            value = output[0] if isinstance(output, tuple) else output
            outputs[i] = value[0, -keep_last:].detach().float()
        handles.append(attention.register_forward_hook(hook))
    try:
        yield outputs
    finally:
        for handle in handles:
            handle.remove()


@torch.no_grad()
def native_attention(lm, prefix_ids, window) -> dict:
    ids = torch.cat([torch.as_tensor(list(prefix_ids), dtype=torch.int64)]
                    + [c.tgt_ids for c in window.chunks] + [window.cont_ids])
    with capture_attention(lm.model, window.cont_ids.numel()) as outputs:
        lm.model(input_ids=ids[None].to(lm.device))
    return dict(outputs)


@torch.no_grad()
def window_diagnostics(translator, lm, prefix_kv, prefix_ids, window, mode="full", layers_window=None,
                       native=None, **run_options) -> dict:
    """KL, top-1 and per-layer attention cosine for one held-out window."""
    native = native if native is not None else native_attention(lm, prefix_ids, window)
    with capture_attention(lm.model, window.cont_ids.numel()) as outputs:
        result = run_window(translator, lm, prefix_kv, len(prefix_ids), window, mode, layers_window, **run_options)
    cosines = [float(torch.nn.functional.cosine_similarity(outputs[i], native[i], dim=-1).mean())
               for i in sorted(native)]
    return {"kl": float(result.kl), "top1": float(result.top1), "attention_cosine": cosines}


def mean_diagnostics(rows: list) -> dict:
    n = len(rows)
    layers = len(rows[0]["attention_cosine"])
    return {"kl": round(sum(r["kl"] for r in rows) / n, 4), "top1": round(sum(r["top1"] for r in rows) / n, 4),
            "attention_cosine": [round(sum(r["attention_cosine"][i] for r in rows) / n, 4) for i in range(layers)]}
