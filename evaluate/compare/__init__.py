"""Two runs of the same models on the same items, item by item (`eval.py compare`, the viewer's
two-runs page; `runs`)."""
