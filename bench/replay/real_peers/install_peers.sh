#!/usr/bin/env bash
# Installs vLLM 0.33.0 and SGLang 0.5.23 into a throwaway venv OUTSIDE the repo (default
# /tmp/pagedkv-peers; set PEERS_VENV), with --no-deps plus only the packages that
# vllm.v1.core.kv_cache_manager, vllm.v1.request and sglang.srt.mem_cache.radix_cache import.
# Nothing here is vendored; no vLLM or SGLang code enters the repo. A benchmark step, not CI:
# the venv is about 4.3 GB (torch alone 1.2 GB) and takes 1-2 minutes to fill on this machine.
#
# torch: vllm/v1/kv_cache_interface.py and vllm/v1/request.py import torch at module level, so
# the manager cannot be imported without it. PyPI has no CPU-only Linux wheel; the PyPI wheel
# (torch 2.14.0, the version vLLM 0.33.0 pins) loads on a machine without a GPU once the four
# libraries libtorch links and the system CUDA toolkit lacks are there (cusparseLt, nvshmem,
# cufile, nccl); the rest come from /usr/local/cuda. No CUDA code runs.
#
# The list was found by importing and adding what was missing, one package at a time.
set -euo pipefail
venv="${PEERS_VENV:-/tmp/pagedkv-peers}"
python3 -m venv "$venv"
pip="$venv/bin/pip"
"$pip" install -q --upgrade pip
"$pip" install -q --no-deps vllm==0.33.0 sglang==0.5.23
# torch and the CUDA libraries libtorch links (no GPU needed to import).
"$pip" install -q --no-deps torch==2.14.0 nvidia-cusparselt-cu13==0.8.1 nvidia-nvshmem-cu13==3.4.5 \
  nvidia-cufile==1.20.0.107 nvidia-nccl-cu13==2.30.7
# What vllm.v1.core.kv_cache_manager and vllm.v1.request import, transitively.
"$pip" install -q --no-deps typing_extensions msgspec packaging psutil pyzmq urllib3 regex numpy \
  pydantic pydantic-core typing-inspection annotated-types sympy mpmath cbor2 transformers \
  huggingface-hub tqdm httpx2 httpcore2 idna pyyaml filelock truststore h11 safetensors tokenizers \
  sentencepiece aiohttp multidict attrs yarl propcache aiohappyeyeballs aiosignal frozenlist \
  requests certifi openai_harmony openai sniffio anyio pillow pybase64 cachetools cloudpickle \
  uvloop py-cpuinfo networkx prometheus_client xgrammar apache-tvm-ffi fastapi starlette \
  annotated_doc opentelemetry-api partial_json_parser llguidance
# What sglang.srt.mem_cache.radix_cache imports on top.
"$pip" install -q --no-deps orjson triton ipython traitlets pygments torchvision==0.29.2 dill \
  compressed_tensors loguru gguf
"$venv/bin/python" -c "import vllm.v1.core.kv_cache_manager, vllm.v1.request; print('vllm ok')"
"$venv/bin/python" -c "import sglang.srt.mem_cache.radix_cache; print('sglang ok')"
echo "peers installed in $venv"
