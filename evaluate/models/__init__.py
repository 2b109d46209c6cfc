"""Models as data and files: the packaged-model catalogue, weight checksums, GGUF conversion and
loading of the causal language models that local judges, RepEval and UniEval use."""
