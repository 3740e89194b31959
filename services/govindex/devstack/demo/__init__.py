"""The bundled demo: a sample corpus, manifests and a scripted walk through the pipeline."""
