"""Which source layers each target layer reads: pairing by relative depth."""


def pair_layers(source_layers: int, target_layers: int, width: int = 2) -> list[list[int]]:
    """For each target layer, the `width` source layers nearest to it in relative depth (sorted).

    Depth of layer i of n is (i + 0.5) / n, so first maps to first and last to last whatever the
    layer counts.
    """
    if source_layers < 1 or target_layers < 1:
        raise ValueError("both models need at least one layer")
    width = max(1, min(width, source_layers))
    pairs = []
    for t in range(target_layers):
        depth = (t + 0.5) / target_layers
        order = sorted(range(source_layers), key=lambda s: (abs((s + 0.5) / source_layers - depth), s))
        pairs.append(sorted(order[:width]))
    return pairs
