"""Counted model FLOPs of the Transformer (section 3), to set beside the paper's time x GPUs x rate estimate.

Counted: every matrix multiply at 2*m*n*k FLOPs (one multiply-add = 2 FLOPs): the Q/K/V/output projections,
the attention score (Q K^T) and value (A V) products, both FFN layers (Eq. 2) and the pre-softmax output
projection. Not counted: softmax, layer norm, residual adds, dropout, biases, embedding lookups and the
sqrt(d_model) scaling (elementwise, O(d_model) per token against O(d_model^2) for the matmuls).
Attention products use the full sequence length L per query, as a masked training pass computes them
(the decoder's causal mask zeroes about half of its self-attention products but does not skip them).
"""

from __future__ import annotations

from aiayn.model.config import ModelConfig

# Backward costs about twice the forward (gradients with respect to both inputs and weights of each matmul).
TRAIN_TO_FORWARD = 3


def _projections(d_model: int, n_heads: int, d_k: int, d_v: int) -> int:
    """Q, K, V and output projections of one multi-head attention, per query token (section 3.2.2)."""
    return 2 * d_model * n_heads * (2 * d_k + d_v) + 2 * n_heads * d_v * d_model


def _scores_and_values(n_heads: int, d_k: int, d_v: int, length: float) -> float:
    """Q K^T and A V for one query against `length` keys, all heads (Eq. 1)."""
    return 2 * n_heads * (d_k + d_v) * length


def forward_flops_per_token(
    n_layers: int,
    d_model: int,
    d_ff: int,
    n_heads: int,
    d_k: int,
    d_v: int,
    vocab_size: int,
    src_len: float,
    tgt_len: float,
) -> dict[str, float]:
    """Forward FLOPs by component: `per_src_token` (encoder + the decoder's K/V of memory) and `per_tgt_token`.

    `src_len`/`tgt_len` are the (average) sentence lengths in tokens that the attention products depend on.
    """
    sizes = dict(
        n_layers=n_layers,
        d_model=d_model,
        d_ff=d_ff,
        n_heads=n_heads,
        d_k=d_k,
        d_v=d_v,
        vocab_size=vocab_size,
        src_len=src_len,
        tgt_len=tgt_len,
    )
    for name, value in sizes.items():
        if not value > 0:
            raise ValueError(f"{name} must be positive, got {value!r}")
    ffn = 4 * d_model * d_ff  # two matmuls, d_model -> d_ff -> d_model (Eq. 2)
    self_proj = _projections(d_model, n_heads, d_k, d_v)
    parts: dict[str, float] = {
        "encoder_self_attention": n_layers * (self_proj + _scores_and_values(n_heads, d_k, d_v, src_len)),
        "encoder_ffn": n_layers * ffn,
        # Each decoder layer projects the encoder output to K and V once per source token.
        "cross_kv": n_layers * 2 * d_model * n_heads * (d_k + d_v),
        "decoder_self_attention": n_layers * (self_proj + _scores_and_values(n_heads, d_k, d_v, tgt_len)),
        "decoder_cross_attention": n_layers
        * (2 * d_model * n_heads * d_k + 2 * n_heads * d_v * d_model + _scores_and_values(n_heads, d_k, d_v, src_len)),
        "decoder_ffn": n_layers * ffn,
        "output_projection": 2 * d_model * vocab_size,
    }
    parts["encoder"] = parts["encoder_self_attention"] + parts["encoder_ffn"]
    parts["decoder"] = (
        parts["decoder_self_attention"]
        + parts["decoder_cross_attention"]
        + parts["decoder_ffn"]
        + parts["output_projection"]
    )
    parts["per_src_token"] = parts["encoder"] + parts["cross_kv"]
    parts["per_tgt_token"] = parts["decoder"]
    return parts


def model_flops_per_token(model: ModelConfig, vocab_size: int, src_len: float, tgt_len: float) -> dict[str, float]:
    """forward_flops_per_token for a model config (its six sizes; the switches cost no counted FLOPs)."""
    return forward_flops_per_token(
        model.n_layers,
        model.d_model,
        model.d_ff,
        model.n_heads,
        model.d_k,
        model.d_v,
        vocab_size=vocab_size,
        src_len=src_len,
        tgt_len=tgt_len,
    )


def training_flops(
    model: ModelConfig,
    vocab_size: int,
    tokens_src: float,
    tokens_tgt: float,
    avg_src_len: float,
    avg_tgt_len: float,
) -> float:
    """Counted training FLOPs: 3 x forward (forward + backward) over the source and target tokens seen."""
    if tokens_src < 0 or tokens_tgt < 0:
        raise ValueError(f"token counts must be >= 0, got src={tokens_src}, tgt={tokens_tgt}")
    per = model_flops_per_token(model, vocab_size, avg_src_len, avg_tgt_len)
    return float(TRAIN_TO_FORWARD * (tokens_src * per["per_src_token"] + tokens_tgt * per["per_tgt_token"]))


# Dense (no sparsity) peak FLOP/s per device from vendor datasheets: (16-bit tensor-core rate, plain fp32 rate).
# Matched by substring of torch.cuda.get_device_name(), first match wins, so longer names come first.
PEAK_FLOPS: tuple[tuple[str, float, float], ...] = (
    ("H200", 989e12, 67e12),
    ("H100 PCIe", 756e12, 51e12),
    ("H100", 989e12, 67e12),
    ("A100", 312e12, 19.5e12),
    ("L40S", 362e12, 91.6e12),
    ("A10G", 70e12, 31.2e12),
    ("V100", 125e12, 15.7e12),
    ("P100", 18.7e12, 9.3e12),
)


def peak_flops(device_name: str, precision: str) -> float | None:
    """The datasheet peak of `device_name` at `precision` (a Lightning precision string); None when unknown."""
    half = precision.startswith(("bf16", "16"))
    for key, peak_half, peak_fp32 in PEAK_FLOPS:
        if key.lower() in device_name.lower():
            return peak_half if half else peak_fp32
    return None
