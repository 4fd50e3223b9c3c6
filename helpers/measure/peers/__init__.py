"""Engines a CPU user would run instead of this project's decoder, timed at the same shape: llama.cpp (`llama`), ONNX Runtime (`onnx_dynamic`)."""
