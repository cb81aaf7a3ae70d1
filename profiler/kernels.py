"""Where the time goes: one rule table that sorts kernel and operator names into classes.

A traced run records names as its backend reports them: CUDA kernel names (cuBLAS, cuBLASLt,
CUTLASS, cuDNN, the frameworks' own kernels, memory copies) on GPU, and each framework's operator
names on CPU (PyTorch's `aten::` ops, TensorFlow op types, MXNet operators, Paddle ops, Singa's
graph nodes, the XLA thunks JAX runs). `classify` gives each name one class from CLASSES, and the
tile shape where a GEMM or convolution kernel's name carries one (`volta_sgemm_128x64_nn` ->
`128x64_nn`).

The rules are tried in order and the first that matches wins, so the order is part of the meaning:
memory copies before everything (a cuDNN layout transpose is a copy, not a convolution), batch
norm and pooling before convolution (their cuDNN kernels say "cudnn" too), convolution before GEMM
(cuDNN's `implicit_convolve_sgemm` is a convolution done as a GEMM), batched GEMM before GEMM.
tests/test_kernel_classes.py pins the result on real names (tests/data/operator_names.json).

What a name cannot tell: cuBLAS often serves a strided-batched GEMM with the very kernel it uses
for a plain one (`torch.bmm` ran `maxwell_sgemm_128x64_nn` in JuliaGPU/CuArrays.jl#182), so on GPU
"batched gemm" counts only the kernels whose names say so; on CPU the operator says it (aten::bmm).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

GEMM = "gemm"
BATCHED_GEMM = "batched gemm"
CONVOLUTION = "convolution"
ELEMENTWISE = "elementwise"
REDUCTION = "reduction"
NORMALISATION = "normalisation"
POOLING = "pooling"
MEMORY_COPY = "memory copy"
OTHER = "other"
# A fused attention kernel (scores, softmax and the weighted sum in one: PyTorch's
# scaled_dot_product_attention kernels, FlashAttention, cuDNN's SDPA): neither a GEMM nor a batched
# GEMM alone, so a class of its own (issue 25); attention written as explicit products shows as
# batched GEMM, softmax (reduction) and elementwise instead.
ATTENTION = "fused attention"
# The gradient exchange of a data-parallel run (issue 26): collectives (all-reduce, all-gather,
# reduce-scatter, broadcast) as the communication library runs them: NCCL's kernels on GPUs,
# gloo's and c10d's operators, TensorFlow's collective ops, MXNet's kvstore, XLA's all-reduce.
COMMUNICATION = "communication"
# In the order reports list them.
CLASSES = (
    GEMM,
    BATCHED_GEMM,
    ATTENTION,
    COMMUNICATION,
    CONVOLUTION,
    ELEMENTWISE,
    REDUCTION,
    NORMALISATION,
    POOLING,
    MEMORY_COPY,
    OTHER,
)
TILED = (GEMM, BATCHED_GEMM, ATTENTION, CONVOLUTION)


def _rule(cls: str, pattern: str, case: bool = False) -> tuple[str, re.Pattern[str]]:
    return cls, re.compile(pattern, 0 if case else re.IGNORECASE)


# XLA opcodes that only move data.
_XLA_MOVES = "copy|transpose|bitcast|concatenate|slice|pad|reverse"

RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # Bookkeeping that does no arithmetic: views, allocation, variable handles, the optimizer's own
    # Python (its arithmetic is in the ops it calls, timed apart).
    _rule(
        OTHER,
        r"^aten::(empty\w*|view|_?reshape\w*|as_strided_?|t|transpose|permute|expand|flatten|"
        r"squeeze|unsqueeze|detach_?|resize_|resolve_conj|resolve_neg|slice|select|narrow|split|"
        r"chunk|alias|lift_fresh|_unsafe_view|set_)$",
    ),
    _rule(OTHER, r"^(detach|Optimizer\.\w+#|ReadVariableOp$|DeleteVariable$|Identity$)", case=True),
    # PyTorch DDP's reducer around its all-reduce: the bucket copied back into the gradients, and
    # the division by the replica count (its "reducer" would read as a reduction below).
    _rule(MEMORY_COPY, r"^torch[.:]+distributed[.:]+(ddp[.:]+)?reducer::copy"),
    _rule(ELEMENTWISE, r"^torch[.:]+distributed[.:]+(ddp[.:]+)?reducer::(mul|div)"),
    # Collectives before everything that moves or adds numbers: an all-reduce does both.
    _rule(
        COMMUNICATION,
        r"^(gloo|nccl|c10d|mpi):|^c10d::|\bnccl\w*(kernel|allreduce|allgather|reducescatter|broadcast)|"
        r"all_?reduce|all_?gather|reduce_?scatter|Collective(Reduce|Gather|Bcast)|kvstore|"
        r"^(wrapped_)?(all-reduce|all-gather|reduce-scatter|collective-permute)",
    ),
    # PyTorch's torch.cat on cuda, before the batched GEMMs' "batched".
    _rule(MEMORY_COPY, r"CatArrayBatchedCopy", case=True),
    # Copies: CUDA memcpy/memset records, device copy and layout-transpose kernels, host copies.
    _rule(MEMORY_COPY, r"memcpy|memset|direct_copy_kernel|copy_kernel|cubeTranspose|nchwToNhwc|nhwcToNchw"),
    _rule(
        MEMORY_COPY,
        r"ShuffleInTensor|\bCopyOp\b|^aten::(copy_|_to_copy|to|clone|contiguous)$|^_?backward_copy$",
    ),
    _rule(
        MEMORY_COPY,
        r"^(CopyDataToFrom|_copy|Transpose|Pad|PadV2|Slice|StridedSlice|StridedSliceGrad|Tile|ConcatV2)$",
        True,
    ),
    # MXNet's oneDNN layout reorder back to its default layout (ResNet50's traces, 2026-11-26).
    _rule(MEMORY_COPY, r"^Reorder2Default$", case=True),
    # Singa's Transform: a transposed (strided) tensor copied into a contiguous one, before a
    # product or an elementwise operator (ViT-B/16's attention heads, 2026-11-27).
    _rule(MEMORY_COPY, r"^Transform$", case=True),
    _rule(MEMORY_COPY, r"^(concat|Concat|aten::cat|aten::constant_pad_nd)$", case=True),
    # XLA's CPU thunks (JAX): instructions and loop fusions made only of data movement
    # (`copy`, `transpose_copy_fusion`, `concatenate_bitcast_fusion`), and indexed moves.
    _rule(
        MEMORY_COPY,
        rf"^(wrapped_)?({_XLA_MOVES})(_({_XLA_MOVES}))*(_fusion)?$|^ynn_fusion:({_XLA_MOVES})$",
        True,
    ),
    _rule(MEMORY_COPY, r"^(wrapped_)?(scatter|gather|dynamic-slice|dynamic-update-slice)$", case=True),
    # cuDNN's FFT convolution (chosen by cudnn.benchmark on a GPU; observed on an H200, 2026-11-26):
    # cuFFT's transforms (DSE::vector_fft, regular_fft_pad), the filter flip, the tiled
    # transposes between them, and the frequency-domain products, done as complex GEMMs
    # (cf32, volta_cgemm, ampere_gcgemm) or a complex pointwise multiply-add. Convolution time,
    # not GEMM or elementwise: the models here have no complex numbers of their own.
    _rule(
        CONVOLUTION,
        r"DSE::|\w_fft\b|fft_pad|flip_filter|region_transform_ABC|pointwise_mult_and_sum_complex|"
        r"gemm_cf32|cgemm",
    ),
    # Fused attention before the reductions (its kernels do a softmax) and the GEMMs.
    _rule(
        ATTENTION,
        r"scaled_dot_product|flash_?(fwd|bwd|attn|attention)|flash::|fmha|\bsdpa|efficient_attention|"
        r"dot_product_attention|DotProductAttention|cudnn\w*sdpa",
    ),
    # Normalisation and pooling before convolution: their cuDNN kernels say cudnn too.
    _rule(NORMALISATION, r"batch_?norm|bn_(fw|bw)|layer_?norm|instance_?norm|group_?norm|\bLRN\b"),
    # PyTorch's layer-norm backward for its scale and shift (GammaBetaBackwardCUDAKernel).
    _rule(NORMALISATION, r"GammaBetaBackward", case=True),
    _rule(POOLING, r"pool|adaptive_(avg|average|max)"),
    # XLA's pooling is a reduce-window (its max-pool gradient a select-and-scatter): JAX's
    # `wrapped_reduce-window`, YNNPACK's `ynn_fusion:reduce-window`.
    _rule(POOLING, r"reduce-window|select-and-scatter", case=True),
    # Softmax and losses are reductions; cuDNN's softmax kernels say cudnn.
    _rule(REDUCTION, r"softmax|cross_?entropy|nll_?loss|\blogsumexp"),
    _rule(ELEMENTWISE, r"op_tensor_kernel"),
    # Convolution: any conv (not "convert"), cuDNN, implicit GEMM, Winograd, FFT, fprop/dgrad/wgrad.
    _rule(CONVOLUTION, r"conv(?!ert)|cudnn|winograd|implicit_?gemm|\bfft|im2col|col2im"),
    # cuDNN/xmma's fprop, dgrad, wgrad kernels; lower case and at a word's start, so that
    # TensorFlow's BiasAddGrad and Paddle's AddGradNode are not taken for a dgrad.
    _rule(CONVOLUTION, r"(?:^|[_:])(?:fprop|dgrad|wgrad)", case=True),
    # Batched GEMM: cuBLAS's batched kernels, and the batched matrix-product operators.
    _rule(BATCHED_GEMM, r"gemm\w*batched|batched\w*gemm|gemv\w*batched|strided_?batched"),
    _rule(BATCHED_GEMM, r"\bb(add)?bmm\b|^aten::_?bmm|BmmBackward|BatchMatMul|batch_?matmul|batch_dot"),
    # MXNet's self-attention operators (and oneDNN's fusion of them): scores and weighted sums,
    # one matrix product per head; not fused attention (the softmax runs apart).
    _rule(BATCHED_GEMM, r"interleaved_matmul_selfatt|_sg_mkldnn_selfatt"),
    # cuBLASLt's epilogue (bias, activation) when it runs as a kernel of its own after the GEMM.
    _rule(GEMM, r"cublasLt::epilogue"),
    # An embedding's backward on cuda (embedding_dense_backward): the gradient rows summed per
    # token id over sorted segments.
    _rule(
        REDUCTION,
        r"compute_grad_weight|krn_partials_per_segment|krn_partial_segment_offset|"
        r"compute_num_of_partial_segments",
    ),
    # GEMM: cuBLAS/cuBLASLt/CUTLASS kernels, GEMV, and every framework's matrix product.
    _rule(GEMM, r"gemm|gemv|nvjet|splitKreduce|cutlass|matmul|FullyConnected|\bdot\b|_backward_dot"),
    _rule(GEMM, r"^aten::(mm|addmm|addmv|mv|linear|matmul|_addmm_activation)$|^(Addmm|Mm|Mv)Backward"),
    _rule(GEMM, r"^(GEMM|GEMV|Linear|linear)$", case=True),
    # TensorFlow's Einsum (Keras's MultiHeadAttention computes its projections and its scores with
    # it): a contraction, counted as GEMM; the name does not say which ones are batched.
    # Intel's TensorFlow build runs it as _MklEinsum (vit_b16's traces, 2026-11-26).
    _rule(GEMM, r"^(_MklEinsum|Einsum|aten::einsum)$", case=True),
    # Reductions: sums, means, maxima over an axis, bias gradients.
    _rule(REDUCTION, r"reduce|\bsum|sum_?all|mean|argmax|argmin|\bmax\b|\bmin\b|BiasAddGrad|topk"),
    _rule(REDUCTION, r"^(Sum|Mean|Max|Min|Prod|All|Any|ArgMax)$|^_backward_(mean|sum)$", case=True),
    # Singa's row maximum (its softmax's, written out in the attention; 2026-11-27).
    _rule(REDUCTION, r"^RowMax$", case=True),
    # Elementwise: arithmetic, activations, masks, random numbers, optimizer updates, fills.
    _rule(
        ELEMENTWISE,
        r"elementwise|vectorized|pointwise|eltwise|elemwise|activation|clip|relu|threshold|clamp|sigmoid|tanh|gelu|"
        r"dropout|bernoulli|random|uniform|\bones|\bzeros|\badd|\bmul|\bsub|\bdiv|axpy|scal|fill|zero|where|select|"
        r"greater|less|equal|cast|mask|scalar|sgd|momentum|adam|rmsprop|update|floor|\bneg|\babs|"
        r"square|sqrt|\bexp|\blog|\bpow|broadcast|bias_?add|SetValue|\bfull|AssignAdd|AssignSub|"
        r"AddGradNode|MulGradNode|_mul|_plus|_minus|lerp|\berfc?\b|_UnaryOpsComposition",
    ),
    # (Singa's Sign and LT: its erf's sign and a comparison; 2026-11-27.)
    _rule(
        ELEMENTWISE,
        r"^(Add|AddV2|Sub|Mul|Div|RealDiv|Neg|Exp|Log|Sqrt|Rsqrt|BiasAdd|Maximum|Minimum|Sign|LT)$",
        True,
    ),
    # XLA: what is left of its loop fusions (`multiply_add_fusion`, `xor_xor_fusion`, after the
    # reductions above took `add_reduce_fusion`) and its elementwise instructions (`wrapped_iota`).
    _rule(ELEMENTWISE, r"^(?!ynn_)\w+_fusion$", case=True),
    _rule(
        ELEMENTWISE,
        r"^(wrapped_)?(iota|add|subtract|multiply|divide|maximum|minimum|select|compare|convert|exponential|"
        r"negate|xor|and|or)$",
        case=True,
    ),
)

# Tile tokens: M x N (x K); after one, more of them (K tile x stages, cluster shape) and "sliced".
_TOKEN = re.compile(r"[A-Za-z0-9]+")
_SHAPE = re.compile(r"^(?:tilesize)?(\d+x\d+(?:x\d+)?)$")
_FOLLOWER = re.compile(r"^(\d+x\d+(?:x\d+)?|sliced\d+x\d+)$")
_LAYOUT = re.compile(r"^([NnTt]{2}|[NT]{3}|[nt]{3})$")
_AUTOGRAD = "autograd::engine::evaluate_function: "


def normalise(name: str) -> str:
    """The name as classified: without `void ` and PyTorch's autograd wrapper prefix.

    An autograd node's own time is the bookkeeping of a backward step; it is classed with the
    operation it differentiates (`AddmmBackward0` with gemm).
    """
    name = name.strip()
    if name.startswith("void "):
        name = name[5:]
    if name.startswith(_AUTOGRAD):
        name = name[len(_AUTOGRAD) :]
    return name


def rule_for(name: str) -> str | None:
    """The class of the first rule that matches the name; None when no rule does."""
    text = normalise(name)
    for cls, pattern in RULES:
        if pattern.search(text):
            return cls
    return None


def kernel_class(name: str) -> str:
    """The class of one kernel or operator name (OTHER when no rule matches)."""
    return rule_for(name) or OTHER


def tile_shape(name: str) -> str | None:
    """The tile shape a GEMM or convolution kernel's name carries, e.g. `128x128_32x3_nn`."""
    head = normalise(name).split("(", 1)[0]
    tokens = _TOKEN.findall(head)
    for i, token in enumerate(tokens):
        match = _SHAPE.match(token)
        if not match:
            continue
        parts = [match.group(1)]
        for follower in tokens[i + 1 :]:
            if not _FOLLOWER.match(follower):
                break
            parts.append(follower)
        layouts = [t for t in tokens if _LAYOUT.match(t)]
        if layouts:
            parts.append(layouts[-1])
        return "_".join(parts)
    return None


def classify(name: str) -> tuple[str, str | None]:
    """(class, tile) of one name; the tile only for GEMM and convolution kernels."""
    cls = kernel_class(name)
    return cls, tile_shape(name) if cls in TILED else None


# --- the data type a name shows (issue 24: did a bf16 run's matrix products run in bf16?) ----------

UNKNOWN = "unknown"
# In the order reports list them; the rules below are tried in this order, first match wins: fp8
# and tf32 before fp32 (cuBLASLt's `..._f32f32_tf32f32_...`), bf16 before fp16 ("bf16" holds "f16"), 16-bit
# before fp32 (a mixed kernel, `..._bf16bf16_bf16f32_f32`, computes its products in 16 bits).
DATA_TYPES = ("fp8", "bf16", "fp16", "tf32", "fp32", UNKNOWN)
DATA_TYPE_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # fp8's two formats (CUTLASS's Hopper GEMMs: `..._e4m3_e4m3_f32_f32_e5m2_...`): before fp32.
    ("fp8", re.compile(r"fp8|e4m3|e5m2", re.IGNORECASE)),
    ("tf32", re.compile(r"tf32", re.IGNORECASE)),
    # bf16, bfloat16 (cuBLAS, CUTLASS, XLA's types), oneDNN's `avx512_core_bf16`/`amx_bf16`.
    ("bf16", re.compile(r"bf16|bfloat16", re.IGNORECASE)),
    # fp16/f16/half; the tensor-core GEMMs of cuBLAS named by their MMA shape with an h (half)
    # operand type: volta_h884gemm, turing_h1688gemm, ampere_h16816gemm; hgemm.
    (
        "fp16",
        re.compile(
            r"fp16|(?<![a-z0-9])f16|_f16|(?<![a-z])half(?![a-z])|h(?:884|1688|16816)|hgemm|hmma",
            re.IGNORECASE,
        ),
    ),
    # sgemm (cuBLAS's single-precision GEMM, also inside cuDNN's implicit_convolve_sgemm), scudnn,
    # fp32/f32/float32 spelled out; float2, CUDA's pair of floats, the complex fp32 of cuDNN's FFT
    # convolutions (`pointwise_mult_and_sum_complex<float2, 8, 4>`, VGG16's on an H200).
    ("fp32", re.compile(r"sgemm|scudnn|fp32|(?<![a-z0-9])f32|_f32|float32|\bfloat2?\b", re.IGNORECASE)),
)


def data_type(name: str) -> str:
    """The data type a kernel or operator name shows, or `unknown`: most CPU operator names
    (aten::addmm, Conv2D, XLA's fusion names) carry none, and then nothing is guessed."""
    for dtype, pattern in DATA_TYPE_RULES:
        if pattern.search(name):
            return dtype
    return UNKNOWN


def rows(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Database rows for a run's trace records: merged by name, classified, with each one's share.

    `share` is a record's part of the summed time of all records of the run (so shares sum to 1):
    the traced region's operator (CPU) or kernel (GPU) time, not its wall time.
    """
    merged: dict[tuple[str, str, str], dict[str, Any]] = {}
    for record in records:
        key = (str(record["name"]), str(record.get("backend") or ""), str(record.get("device") or ""))
        row = merged.setdefault(key, {"calls": 0, "total_seconds": 0.0})
        row["calls"] += int(record.get("calls") or 0)
        row["total_seconds"] += float(record.get("total_seconds") or 0.0)
    total = sum(r["total_seconds"] for r in merged.values())
    out = []
    for (name, backend, device), row in sorted(merged.items(), key=lambda kv: -kv[1]["total_seconds"]):
        cls, tile = classify(name)
        share = row["total_seconds"] / total if total > 0 else None
        out.append(
            {
                "backend": backend,
                "device": device,
                "name": name,
                "class": cls,
                "tile": tile,
                **row,
                "share": share,
            }
        )
    return [{"seq": i, **row} for i, row in enumerate(out)]
