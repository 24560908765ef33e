"""Training throughput (target tokens/s) of our Transformer against torch.nn.Transformer of the same shape.

Both models share the embedding/positional wrapping and the loss, start from the same weights, see the same
batches and take Adam steps in the same run, alternating step by step; the headline is the median over steps
of torch's step time over ours, so load from other processes on the machine hurts both alike.
Run: python bench/train_throughput.py [--shape tiny|base|both] [--steps N] [--rounds R] [--dropout P]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch
from torch import Tensor, nn

from aiayn.model.config import ModelConfig
from aiayn.model.transformer import Transformer
from aiayn.train.label_smoothing import label_smoothed_nll_loss

PAD = 0
SHAPES = {
    "tiny": dict(vocab=1000, n_layers=2, d_model=64, d_ff=256, n_heads=4, batch=32, length=24),
    "base": dict(vocab=37000, n_layers=6, d_model=512, d_ff=2048, n_heads=8, batch=6, length=24),
}


class TorchReference(nn.Module):
    """torch.nn.TransformerEncoder/Decoder (post-LN, no final norm) inside our embedding and projection."""

    def __init__(self, ours: Transformer, n_layers: int, d_model: int, d_ff: int, n_heads: int, dropout: float):
        super().__init__()
        # Own copies: the two models train side by side with separate weights and Adam states.
        self.embedding, self.positions = copy.deepcopy(ours.embedding), copy.deepcopy(ours.positions)
        self.embed_drop = nn.Dropout(dropout)
        enc = nn.TransformerEncoderLayer(d_model, n_heads, d_ff, dropout, batch_first=True)
        dec = nn.TransformerDecoderLayer(d_model, n_heads, d_ff, dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(enc, n_layers, enable_nested_tensor=False)
        self.decoder = nn.TransformerDecoder(dec, n_layers)

    def _embed(self, tokens: Tensor) -> Tensor:
        return self.embed_drop(self.embedding(tokens) + self.positions(tokens.size(1)))

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        # torch's masks are the other way round: True = may NOT attend.
        src_pad, tgt_pad = src == PAD, tgt_in == PAD
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), dtype=torch.bool)
        memory = self.encoder(self._embed(src), src_key_padding_mask=src_pad)
        x = self.decoder(
            self._embed(tgt_in), memory, tgt_mask=causal, tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad
        )
        return self.embedding.project(x)


def copy_weights(ours: Transformer, ref: TorchReference) -> None:
    """Load our layer weights into torch's layers so that both compute the same function."""
    with torch.no_grad():
        for o, r in zip(ours.encoder, ref.encoder.layers):
            _copy_layer(o, r, {"self_attn": "self_attn"}, ("res_attn", "res_ffn"))
        for o, r in zip(ours.decoder, ref.decoder.layers):
            _copy_layer(
                o, r, {"self_attn": "self_attn", "cross_attn": "multihead_attn"}, ("res_self", "res_cross", "res_ffn")
            )


def _copy_layer(ours: nn.Module, ref: nn.Module, attention: dict[str, str], residuals: tuple[str, ...]) -> None:
    for ours_name, ref_name in attention.items():
        _copy_attention(getattr(ours, ours_name), getattr(ref, ref_name))
    ref.linear1.load_state_dict(ours.ffn.w_1.state_dict())
    ref.linear2.load_state_dict(ours.ffn.w_2.state_dict())
    for i, name in enumerate(residuals, start=1):  # torch's norm1, norm2 (, norm3) in the same order
        getattr(ref, f"norm{i}").load_state_dict(getattr(ours, name).norm.state_dict())


def _copy_attention(ours: nn.Module, ref: nn.MultiheadAttention) -> None:
    # Same packing order on both sides: [W_Q; W_K; W_V], heads contiguous within each.
    ref.in_proj_weight.copy_(ours.w_qkv.weight)
    ref.in_proj_bias.copy_(ours.w_qkv.bias)
    ref.out_proj.load_state_dict(ours.w_o.state_dict())


def make_batches(n: int, vocab: int, batch: int, length: int, seed: int = 0) -> list[tuple[Tensor, Tensor, Tensor]]:
    """Random sentence pairs with lengths in [length/2, length], right-padded."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        src, tgt = torch.randint(1, vocab, (2, batch, length + 1), generator=g)
        lengths = torch.randint(length // 2, length + 1, (2, batch, 1), generator=g)
        src = src[:, :length].masked_fill(torch.arange(length) >= lengths[0], PAD)
        tgt = tgt.masked_fill(torch.arange(length + 1) >= lengths[1] + 1, PAD)
        out.append((src, tgt[:, :-1], tgt[:, 1:]))
    return out


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, batch) -> float:
    """One Adam step on one batch; return its seconds."""
    src, tgt_in, tgt_out = batch
    start = time.perf_counter()
    loss, _ = label_smoothed_nll_loss(model(src, tgt_in), tgt_out, 0.1, PAD)
    optimizer.zero_grad(set_to_none=True)
    (loss / (tgt_out != PAD).sum()).backward()
    optimizer.step()
    return time.perf_counter() - start


def bench_shape(name: str, steps: int, rounds: int, dropout: float) -> float:
    shape = SHAPES[name]
    size = {k: shape[k] for k in ("n_layers", "d_model", "d_ff", "n_heads")}
    head = shape["d_model"] // shape["n_heads"]
    torch.manual_seed(0)
    ours = Transformer(ModelConfig(d_k=head, d_v=head, dropout=dropout, **size), shape["vocab"])
    ref = TorchReference(ours, dropout=dropout, **size)
    copy_weights(ours, ref)
    batches = make_batches(steps + 1, shape["vocab"], shape["batch"], shape["length"])
    ours.eval(), ref.eval()
    with torch.no_grad():
        src, tgt_in, _ = batches[0]
        real = tgt_in != PAD  # padded target positions feed nothing: their logits are free to differ
        diff = (ours(src, tgt_in) - ref(src, tgt_in))[real].abs().max().item()
    print(f"[{name}] same function check: max |logit difference| at real target positions = {diff:.2e}")
    if diff > 1e-3:
        raise SystemExit(f"[{name}] the two models do not compute the same function ({diff:.2e}); no timing")
    models = {"ours": ours.train(), "torch": ref.train()}
    optims = {k: torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9) for k, m in models.items()}
    for key in models:  # warm-up step (allocator, kernel selection), not timed
        train_step(models[key], optims[key], batches[0])
    seconds: dict[str, list[float]] = {"ours": [], "torch": []}
    # Steps alternate between the models (order flipped each time) so background load hits both alike.
    for i, batch in enumerate(batches[1:] * rounds):
        for key in ("ours", "torch") if i % 2 == 0 else ("torch", "ours"):
            seconds[key].append(train_step(models[key], optims[key], batch))
    tokens = sum(int((b[2] != PAD).sum()) for b in batches[1:]) * rounds
    speed = {key: tokens / sum(times) for key, times in seconds.items()}
    ratios = [t / o for o, t in zip(seconds["ours"], seconds["torch"])]
    ratio = statistics.median(ratios)
    q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratio,) * 3
    print(
        f"[{name}] ours {speed['ours']:.0f} tok/s, torch.nn.Transformer {speed['torch']:.0f} tok/s, "
        f"median per-step ratio ours/torch {ratio:.3f} over {len(ratios)} step pairs (quartiles {q1:.3f}-{q3:.3f})"
    )
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=["tiny", "base", "both"], default="both")
    parser.add_argument(
        "--steps",
        type=int,
        default=0,
        help="distinct timed batches (default: 8 tiny, 4 base: 12 step pairs at base, where 6 read "
        "anywhere from 0.92 to 1.0 on a shared machine)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="passes over the timed batches")
    parser.add_argument("--dropout", type=float, default=0.1)
    args = parser.parse_args()
    names = ["tiny", "base"] if args.shape == "both" else [args.shape]
    ratios = {n: bench_shape(n, args.steps or (8 if n == "tiny" else 4), args.rounds, args.dropout) for n in names}
    for n in ("tiny", "base"):
        if n in ratios:
            print(f"RESULT train_throughput_{n}_ratio {ratios[n]:.3f}")


if __name__ == "__main__":
    main()
