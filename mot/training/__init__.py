"""Training translators (`cag train`): prepared windows, losses, the ridge start, the loop and its
run folder. Answering never imports this package (tests/test_layers.py)."""
