"""Tree inducers. Each module exposes ``induce(X, y, n_classes, ...) -> (Tree, info)`` where ``X`` holds
normalised features on the Q15 grid (float64 in [0, 1)) and ``y`` class indices 0..n_classes-1."""
