"""GRASP's library. Importing it caps oneDNN below AMX (unless ``ONEDNN_MAX_CPU_ISA`` is already set): oneDNN's AMX
bfloat16 kernels change with a batch's row count (a text's vector differed by up to 1.3e-3 between alone and in a
batch of 3-16), which made a question's answer depend on the questions served with it; the AVX-512 BF16 kernels do
not, but are slower there (``benchmarks/results/batch_invariance.json``). A stopgap: encoding
in fixed-size batches would keep AMX. oneDNN reads the variable when it first runs, so it is set here, before any
torch computation of ours."""

import os

os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16")
