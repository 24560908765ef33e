"""Learning parity: does the pipeline learn as fast per update as a plain PyTorch script an expert would accept?

Every system trains on the same Multi30k EN->DE data with the same joint sentencepiece BPE (the pipeline's own
fetch and bpe stages, run once into the work folder: `data=multi30k`, the published train, val as dev and
test2016 as test), the same hyperparameters and the same number of updates, with >= 5 seeds each, and is scored
the same way: dev perplexity (per subword, no label smoothing), greedy sacreBLEU on dev and test, the output's
length over the reference's, and the real target tokens each update and each second saw.

- `pipeline-{longer,source}`, `pipeline-{longer,source}-real`, `pipeline-{longer,source}-target`: `pipeline/train.py`
  then `pipeline/evaluate.py decode=greedy`, run as the DVC stages run them (Hydra overrides, Lightning, the
  library's data, model, loss and decoding), with `train.batch_order` longer or source and `train.batch_budget`
  padded, real or target; `pipeline` is the one of the shipped default.
- `reference-fairseq`: `reference_train` below, a plain loop as a PyTorch user writes it: `nn.Transformer`
  (post-LN) with dropout only where the paper puts it (each sub-layer's output and the embeddings: its
  attention-weight and feed-forward dropout off), one embedding matrix shared three ways and multiplied by
  sqrt(d_model), sinusoids, a boolean causal mask, `F.cross_entropy(label_smoothing=0.1)`, Adam (0.9, 0.98, 1e-9)
  with Eq. 3, batches as fairseq builds them (sorted by source then target length, cut at `batch_tokens` padded
  positions), greedy decoding that never emits pad or BOS, up to source length + 50.
- `reference-source`: the same with batches sorted by source length cut at `batch_tokens` real target tokens;
  `reference-paper-dropout`: sorted by target length, cut at real target tokens; `reference`: that with
  nn.Transformer's own dropout everywhere, a float mask and unrestricted greedy. Each measures one change.

Diagnosis systems (`--systems`) swap one part of `reference` for the library's, one at a time, to locate a gap:
`plain+model` (aiayn's Transformer with its default init in the plain loop), `plain+model-xavier` (the same with
plain per-projection Xavier for W_Q, W_K, W_V), `plain+model+loss` (aiayn's V-2 label-smoothed loss),
`plain+model+loss+batches` (aiayn's TokenBatchSampler), `reference-source+model` (aiayn's Transformer in
`reference-source`'s loop: the model's share of a difference, or of a spread, from the fair reference's), and
`pipeline-xavier` (the pipeline with `model.qkv_init_gain=1`). Anything else is passed as extra Hydra overrides:
`pipeline:key=v,...`.

Settings: `learn` (the default: d_model 128, 2+2 layers, 600 updates of 2000 tokens, warmup 150, lr factor 0.5, a
peak learning rate of 0.0036; the systems end at dev PPL 14.4-16.6, the source-sorted plain loop's seeds within 0.5%
of each other, batches sorted by the longer side spreading several times more; 6-15 min a run on one core of a 2-core
machine. At lr factor 1 the same setting is chaotic: dev PPL
18-28, a run's batches and seed moving it as much as the system), `--full` (d_model 256, 3+3 layers, 700 updates,
the paper's warmup of 4000, lr factor 2: issue 39's trial, ~15 min a run on 2 cores) and `--quick` (a smoke run: the
learning rate never leaves its warmup, so nothing is compared after learning).

    python studies/learning_parity.py --data DIR              # DIR: plain train.{en,de}, val.{en,de} (Multi30k's)
    python studies/learning_parity.py --systems pipeline reference-source --full
    python studies/learning_parity.py --quick --mirror DIR    # offline: DIR holds multi30k-{train,val,...}.gz
    python studies/learning_parity.py --steps 10000 --device cuda   # to convergence on a GPU

Finished runs are kept in the work folder (`--workdir`, default studies/.parity/<mode>-<steps>) and reused, so a
killed or extended bench (more seeds, more systems) only trains what is missing. Prints each system's mean ± 95%
interval and per-seed values, then every pipeline − reference difference with its Welch 95% interval (dev PPL as a
ratio, from log PPL) per update and per real target token (each run's dev PPL after the fewest real target tokens
any run saw, interpolated on its dev PPL at 50, 75 and 100% of the updates), two pipeline systems also paired by seed
(they start from the same weights), and ends with the comparison of `pipeline` and `--against` (default: the
reference with the paper's dropout whose mean dev PPL is lowest): `RESULT parity_ppl_ratio_per_token_upper`,
`parity_ppl_ratio_upper` (the per-update interval's upper end), `parity_within_margin` (1 when it is <= 1.03: a
pipeline worse by more than 3% per update is excluded), `parity_bleu_diff_low`, `parity_test_bleu_ratio`,
`parity_ppl_ratio` and, last, `parity_bleu_ratio` (means' ratios).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import dataclasses
import json
import math
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The library of this checkout, in this process and the workers it spawns (which inherit sys.path), as in the stages
# it starts (PYTHONPATH, set in main): a bench run from another checkout must not name its runs with the installed one.
sys.path.insert(0, str(REPO / "src"))

from aiayn.config.schema import TrainConfig  # noqa: E402
from aiayn.run import folders  # noqa: E402
from aiayn.run.folders import RunSpec  # noqa: E402

# `learn` (the default): a setting where every system learns (warmup a quarter of the updates, dev PPL well below
# 40; lr factor 0.5: at 1 the seeds spread 18-28), 6-10 minutes a run on one core; `full`: the setting of issue 39's
# trial (d_model 256, the paper's warmup of 4000 over 700 updates), about 15 minutes a run on 2 cores; `quick`: a
# smoke run (the learning rate never leaves its warmup, so the systems are compared before they have learned).
COMMON = dict(batch_tokens=2000, dropout=0.1, label_smoothing=0.1, vocab=8000)
SETTINGS = {
    "learn": dict(
        COMMON, n_layers=2, d_model=128, n_heads=4, d_head=32, d_ff=512, steps=600, warmup=150, lr_factor=0.5
    ),
    "full": dict(
        COMMON, n_layers=3, d_model=256, n_heads=4, d_head=64, d_ff=1024, steps=700, warmup=4000, lr_factor=2.0
    ),
    "quick": dict(
        COMMON, n_layers=2, d_model=128, n_heads=4, d_head=32, d_ff=512, steps=400, warmup=4000, lr_factor=2.0
    ),
}
CURVE_AT = (0.5, 0.75, 1.0)  # dev PPL at these shares of the updates: a run's PPL at a common number of real tokens
# What each plain system is: which parts come from the library (the rest is the plain reference), and how the plain
# parts are built. `dropout`: "torch" is nn.Transformer's own (also on the attention weights and the feed-forward
# hidden layer of every layer), "paper" only where section 5.4 puts it (each sub-layer's output and the embeddings).
# `batches`: "target" cut at ~batch_tokens real target tokens from data sorted by (target, source) length; "source"
# the same from data sorted by (source, target) length; "fairseq" sorted by (source, target) length and cut at
# batch_tokens padded positions, max(source, target) x sentences, as fairseq's LanguagePairDataset and batch_by_size
# do; "aiayn" the library's TokenBatchSampler. `mask`: the causal mask
# as nn.Transformer's float -inf matrix or a boolean one; `greedy`: "any" token, or never pad or BOS.
TODAY = dict(model="torch", init_gain=None, loss="torch", batches="target", dropout="torch", mask="float", greedy="any")
PAPER = dict(TODAY, dropout="paper", mask="bool", greedy="no-special")
PLAIN_SYSTEMS = {
    "reference": TODAY,
    "reference-paper-dropout": PAPER,
    "reference-fairseq": dict(PAPER, batches="fairseq"),
    "reference-source": dict(PAPER, batches="source"),
    "reference-source+model": dict(PAPER, batches="source", model="aiayn"),  # the library's model in that loop
    "plain+model": dict(TODAY, model="aiayn"),
    "plain+model-xavier": dict(TODAY, model="aiayn", init_gain=1.0),
    "plain+model-fairseq": dict(TODAY, model="aiayn", init_gain=2**-0.5),
    "plain+model+loss": dict(TODAY, model="aiayn", loss="aiayn"),
    "plain+model+loss+batches": dict(TODAY, model="aiayn", loss="aiayn", batches="aiayn"),
}
PIPELINE_SYSTEMS = {
    "pipeline-longer": ["train.batch_order=longer", "train.batch_budget=padded"],
    "pipeline-source": ["train.batch_order=source", "train.batch_budget=padded"],
    "pipeline-longer-real": ["train.batch_order=longer", "train.batch_budget=real"],
    "pipeline-source-real": ["train.batch_order=source", "train.batch_budget=real"],
    "pipeline-longer-target": ["train.batch_order=longer", "train.batch_budget=target"],
    "pipeline-source-target": ["train.batch_order=source", "train.batch_budget=target"],
    "pipeline-xavier": ["model.qkv_init_gain=1.0"],
    "pipeline-fairseq": [f"model.qkv_init_gain={2**-0.5}"],
}
# `pipeline` is the pipeline as it ships: the system of its default batch order and budget.
DEFAULT = {f.name: f.default for f in dataclasses.fields(TrainConfig) if f.name in ("batch_order", "batch_budget")}
ALIASES = {
    "pipeline": f"pipeline-{DEFAULT['batch_order']}"
    + ("" if DEFAULT["batch_budget"] == "padded" else f"-{DEFAULT['batch_budget']}")
}
REFERENCE = "reference-fairseq"  # what the RESULT lines compare the pipeline with: the fair reference
MARGIN = 0.03  # the pipeline is at parity when its dev PPL is shown to be at most 3% above the reference's


# ----------------------------------------------------------------------------------------------------------------
# Data: the pipeline's own fetch and bpe stages, once per work folder; both systems read their outputs.


def data_overrides(folder: Path | None, mirror: str | None) -> list[str]:
    """Multi30k as the pipeline's `data=multi30k` fetches it (published train, val as dev, test2016 as test; from
    `mirror` when given), or a local folder of plain `train`/`val` files (a test set held out of train)."""
    if folder is not None:
        return ["data=local", f"data.path={folder}"]
    return ["data=multi30k", *([f"data.mirror={mirror}"] if mirror else [])]


def prepare_data(workdir: Path, data: list[str], vocab: int, env: dict) -> None:
    """data/raw (the fetch stage's cleaned corpus) and data/bpe (its joint BPE) in `workdir`."""
    if (workdir / "data" / "bpe" / "spm.model").is_file():
        return
    common = [*data, "scale=small", f"data.vocab_size={vocab}", "logger=none"]
    for stage in ("fetch", "bpe"):
        subprocess.run(
            [sys.executable, str(REPO / "pipeline" / f"{stage}.py"), *common],
            cwd=workdir,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )


# ----------------------------------------------------------------------------------------------------------------
# The plain reference: a training loop as a PyTorch user writes it.


def reference_train(workdir: str, seed: int, setting: dict, system: str, device: str, threads: int) -> dict:
    import sentencepiece as spm
    import torch
    import torch.nn.functional as F
    from sacrebleu import corpus_bleu
    from torch import nn

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    spec, s, work = PLAIN_SYSTEMS[system], setting, Path(workdir)
    sp = spm.SentencePieceProcessor(model_file=str(work / "data/bpe/spm.model"))
    pad, bos, eos, vocab = sp.pad_id(), sp.bos_id(), sp.eos_id(), sp.get_piece_size()

    def read(split):
        lines = {
            side: (work / f"data/raw/{split}.{side}").read_text(encoding="utf-8").split("\n")[:-1]
            for side in ("src", "tgt")
        }
        return lines["src"], lines["tgt"], sp.encode(lines["src"]), sp.encode(lines["tgt"])

    _, _, train_x, train_y = read("train")
    d = s["d_model"]

    class Plain(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Parameter(torch.randn(vocab, d) * d**-0.5)  # shared: source, target, pre-softmax
            pos = torch.arange(1024)[:, None] * torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
            self.register_buffer("pe", torch.stack([pos.sin(), pos.cos()], -1).flatten(1), persistent=False)
            self.drop = nn.Dropout(s["dropout"])
            self.tf = nn.Transformer(
                d, s["n_heads"], s["n_layers"], s["n_layers"], s["d_ff"], s["dropout"], batch_first=True
            )
            if spec["dropout"] == "paper":  # no dropout on attention weights or the feed-forward hidden layer
                for layer in [*self.tf.encoder.layers, *self.tf.decoder.layers]:
                    layer.dropout.p = 0.0  # between the feed-forward's two linear maps
                    for attn in (layer.self_attn, getattr(layer, "multihead_attn", None)):
                        if attn is not None:
                            attn.dropout = 0.0  # on the attention weights

        def embed(self, x):
            return self.drop(F.embedding(x, self.emb) * d**0.5 + self.pe[: x.size(1)])

        def encode(self, src):
            return self.tf.encoder(self.embed(src), src_key_padding_mask=src == pad)

        def decode(self, tgt_in, memory, src):
            n = tgt_in.size(1)
            if spec["mask"] == "bool":  # True: may not attend
                causal = torch.ones(n, n, dtype=torch.bool, device=tgt_in.device).triu(1)
            else:
                causal = nn.Transformer.generate_square_subsequent_mask(n, device=tgt_in.device)
            h = self.tf.decoder(
                self.embed(tgt_in),
                memory,
                tgt_mask=causal,
                tgt_is_causal=True,
                tgt_key_padding_mask=tgt_in == pad,
                memory_key_padding_mask=src == pad,
            )
            return h @ self.emb.T

        def forward(self, src, tgt_in):
            return self.decode(tgt_in, self.encode(src), src)

    if spec["model"] == "torch":
        model = Plain()
    else:
        from aiayn.model.config import ModelConfig
        from aiayn.model.masks import src_mask, tgt_mask
        from aiayn.model.transformer import Transformer

        extra = {} if spec["init_gain"] is None else {"qkv_init_gain": spec["init_gain"]}
        lib = Transformer(
            ModelConfig(
                n_layers=s["n_layers"],
                d_model=d,
                d_ff=s["d_ff"],
                n_heads=s["n_heads"],
                d_k=s["d_head"],
                d_v=s["d_head"],
                dropout=s["dropout"],
                **extra,
            ),
            vocab,
            pad,
        )
        lib.encode_plain = lambda src: lib.encode(src, src_mask(src, pad))
        lib.decode_plain = lambda tgt_in, mem, src: lib.decode(tgt_in, mem, src_mask(src, pad), tgt_mask(tgt_in, pad))
        model = lib
    model.to(device)
    encode = getattr(model, "encode_plain", model.encode)
    decode = getattr(model, "decode_plain", model.decode)

    def pad_to(seqs, prefix=(), suffix=()):
        out = torch.full((len(seqs), max(len(x) for x in seqs) + len(prefix) + len(suffix)), pad, dtype=torch.long)
        for i, x in enumerate(seqs):
            row = [*prefix, *x, *suffix]
            out[i, : len(row)] = torch.tensor(row)
        return out

    def batch(ids):
        xs, ys = [train_x[i] + [eos] for i in ids], [train_y[i] for i in ids]
        return pad_to(xs).to(device), pad_to(ys, prefix=[bos]).to(device), pad_to(ys, suffix=[eos]).to(device)

    rng = torch.Generator().manual_seed(seed)
    if spec["batches"] == "fairseq":  # by (source, target) length, cut at batch_tokens padded positions

        def epoch_batches():
            noise = torch.rand(len(train_y), generator=rng).tolist()
            order = sorted(range(len(train_y)), key=lambda i: (len(train_x[i]), len(train_y[i]), noise[i]))
            batches, cur, longest = [], [], 0
            for i in order:
                n_i = max(len(train_x[i]) + 1, len(train_y[i]) + 1)  # source with EOS; BOS + target or target + EOS
                if cur and (len(cur) + 1) * max(longest, n_i) > s["batch_tokens"]:
                    batches.append(cur)
                    cur, longest = [], 0
                cur.append(i)
                longest = max(longest, n_i)
            batches.append(cur)
            return [batches[j] for j in torch.randperm(len(batches), generator=rng).tolist()]
    elif spec["batches"] in ("target", "source"):  # sorted by one side's length, cut at batch_tokens real target tokens
        first = train_y if spec["batches"] == "target" else train_x
        second = train_x if spec["batches"] == "target" else train_y

        def epoch_batches():
            noise = torch.rand(len(train_y), generator=rng).tolist()
            order = sorted(range(len(train_y)), key=lambda i: (len(first[i]), len(second[i]), noise[i]))
            batches, cur, n = [], [], 0
            for i in order:
                if cur and n + len(train_y[i]) + 1 > s["batch_tokens"]:
                    batches.append(cur)
                    cur, n = [], 0
                cur.append(i)
                n += len(train_y[i]) + 1
            batches.append(cur)
            return [batches[j] for j in torch.randperm(len(batches), generator=rng).tolist()]
    else:  # the library's sampler: padded budget on both sides, as the pipeline batches
        from aiayn.data.batching import TokenBatchSampler

        sampler = TokenBatchSampler(
            [len(x) + 1 for x in train_x], [len(y) + 1 for y in train_y], s["batch_tokens"], seed=seed
        )
        epoch_batches = lambda: list(sampler)  # noqa: E731
    if spec["loss"] == "torch":

        def loss_fn(logits, tgt_out):
            return F.cross_entropy(
                logits.flatten(0, 1), tgt_out.flatten(), ignore_index=pad, label_smoothing=s["label_smoothing"]
            )
    else:
        from aiayn.train.label_smoothing import label_smoothed_nll_loss

        def loss_fn(logits, tgt_out):
            return label_smoothed_nll_loss(logits, tgt_out, s["label_smoothing"], pad)[0] / (tgt_out != pad).sum()

    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    eq3 = lambda k: s["lr_factor"] * d**-0.5 * min((k + 1) ** -0.5, (k + 1) * s["warmup"] ** -1.5)  # noqa: E731
    sched = torch.optim.lr_scheduler.LambdaLR(opt, eq3)
    _, _, dev_x, dev_y = read("valid")

    @torch.inference_mode()
    def dev_ppl():  # per subword, no label smoothing, dropout off: the pipeline's validation
        model.eval()
        nll, n = 0.0, 0
        for lo in range(0, len(dev_x), 100):
            src = pad_to([x + [eos] for x in dev_x[lo : lo + 100]]).to(device)
            tgt_in = pad_to(dev_y[lo : lo + 100], prefix=[bos]).to(device)
            tgt_out = pad_to(dev_y[lo : lo + 100], suffix=[eos]).to(device)
            logits = model(src, tgt_in).float()
            nll += F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=pad, reduction="sum").item()
            n += int((tgt_out != pad).sum())
        model.train()
        return math.exp(nll / n)

    curve_steps = {round(share * s["steps"]) for share in CURVE_AT}
    step, real_tgt, train_s, curve = 0, 0, 0.0, []
    model.train()
    while step < s["steps"]:
        for ids in epoch_batches():
            start = time.perf_counter()
            src, tgt_in, tgt_out = batch(ids)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device == "cuda"):  # as trainer=gpu does
                loss = loss_fn(model(src, tgt_in).float(), tgt_out)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            step, real_tgt = step + 1, real_tgt + int((tgt_out != pad).sum())
            train_s += time.perf_counter() - start
            if step in curve_steps:
                curve.append([step, real_tgt, dev_ppl()])
            if step == s["steps"]:
                break

    model.eval()
    result = {
        "steps": step,
        "tgt_tokens_per_step": real_tgt / step,
        "tgt_tokens_per_s": real_tgt / train_s,
        "train_s": round(train_s, 1),
        "curve": curve,  # [update, real target tokens seen, dev PPL]
    }
    with torch.inference_mode():
        for split, prefix in (("valid", "dev_"), ("test", "test_")):
            _, refs, xs, ys = read(split)
            nll, n, hyps = 0.0, 0, [None] * len(xs)
            order = sorted(range(len(xs)), key=lambda i: len(xs[i]))
            for lo in range(0, len(order), 100):
                ids = order[lo : lo + 100]
                src = pad_to([xs[i] + [eos] for i in ids]).to(device)
                tgt_in = pad_to([ys[i] for i in ids], prefix=[bos]).to(device)
                tgt_out = pad_to([ys[i] for i in ids], suffix=[eos]).to(device)
                logits = model(src, tgt_in).float()
                nll += F.cross_entropy(
                    logits.flatten(0, 1), tgt_out.flatten(), ignore_index=pad, reduction="sum"
                ).item()
                n += int((tgt_out != pad).sum())
                # Greedy, up to source length (EOS included) + 50 tokens.
                memory, out = encode(src), torch.full((len(ids), 1), bos, dtype=torch.long, device=device)
                limit = int((src != pad).sum(1).max()) + 50
                done = torch.zeros(len(ids), dtype=torch.bool, device=device)
                while out.size(1) <= limit and not bool(done.all()):
                    logits = decode(out, memory, src)[:, -1]
                    if spec["greedy"] == "no-special":  # pad and BOS are never outputs
                        logits[:, [pad, bos]] = -torch.inf
                    nxt = logits.argmax(-1).masked_fill(done, pad)
                    out, done = torch.cat([out, nxt[:, None]], 1), done | (nxt == eos)
                for row, i in enumerate(ids):
                    seq = out[row, 1:].tolist()
                    hyps[i] = sp.decode(
                        [t for t in seq[: seq.index(eos)] if t != pad] if eos in seq else [t for t in seq if t != pad]
                    )
            bleu = corpus_bleu(hyps, [refs])
            result[prefix + "ppl"] = math.exp(nll / n)
            result[prefix + "bleu"] = bleu.score
            result[prefix + "len_ratio"] = bleu.sys_len / bleu.ref_len
    return result


# ----------------------------------------------------------------------------------------------------------------
# The pipeline: its train and evaluate stages, exactly as DVC runs them (one seed each).


def pipeline_train(workdir: str, seed: int, setting: dict, system: str, device: str, threads: int) -> dict:
    s, tag = setting, slug(system)
    overrides = [
        *s["data"],
        "scale=small",
        "logger=none",
        f"seed={seed}",
        "trainer.enable_progress_bar=false",
        f"model.n_layers={s['n_layers']}",
        f"model.d_model={s['d_model']}",
        f"model.n_heads={s['n_heads']}",
        f"model.d_k={s['d_head']}",
        f"model.d_v={s['d_head']}",
        f"model.d_ff={s['d_ff']}",
        f"model.dropout={s['dropout']}",
        f"train.label_smoothing={s['label_smoothing']}",
        f"train.max_steps={s['steps']}",
        f"train.batch_tokens={s['batch_tokens']}",
        f"train.max_tokens={s['batch_tokens']}",
        f"train.warmup_steps={s['warmup']}",
        f"train.lr_factor={s['lr_factor']}",
        f"train.val_every_steps={math.gcd(*(round(share * s['steps']) for share in CURVE_AT))}",
        f"train.ckpt_every_steps={s['steps']}",
        "train.keep_last=0",
        "row.average_last=0",
        f"paths.runs=runs/{tag}",
        f"paths.evals=evals/{tag}",
        *(["trainer=gpu", "train.compile=false"] if device == "cuda" else ["trainer=cpu"]),
        *PIPELINE_SYSTEMS.get(system, system.partition(":")[2].split(",") if ":" in system else []),
    ]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), WANDB_MODE="disabled")
    for stage, extra in (("train", []), ("evaluate", ["decode=greedy"])):
        proc = subprocess.run(
            [sys.executable, str(REPO / "pipeline" / f"{stage}.py"), *overrides, *extra],
            cwd=workdir,
            env=env,
            preexec_fn=die_with_parent,
            capture_output=True,
            text=True,
        )
        if proc.returncode:
            raise RuntimeError(f"{system} seed {seed}: pipeline/{stage}.py failed:\n{proc.stderr[-3000:]}")
    # The overrides make a variant of base: its folders are the ones RunSpec names for the same composition.
    from aiayn.config.composition import compose
    from aiayn.config.resolve import prepare

    trained_in = RunSpec.of(prepare(compose(overrides))).run_dir
    evaluated_in = RunSpec.of(prepare(compose([*overrides, "decode=greedy"]))).eval_dir
    trained = json.loads((Path(workdir) / trained_in / folders.TRAIN_SUMMARY).read_text())
    ev = json.loads((Path(workdir) / evaluated_in / folders.EVAL).read_text())
    ratios = {}
    for split, prefix in (("valid", "dev_"), ("test", "test_")):
        from sacrebleu import corpus_bleu

        hyps = (Path(workdir) / evaluated_in / folders.hyps_file(split)).read_text(encoding="utf-8").split("\n")[:-1]
        refs = (Path(workdir) / f"data/raw/{split}.tgt").read_text(encoding="utf-8").split("\n")[:-1]
        bleu = corpus_bleu(hyps, [refs])
        ratios[prefix + "len_ratio"] = bleu.sys_len / bleu.ref_len
    # Dev PPL at the curve's updates (the validation of the stage's own curve file), with the real target tokens
    # seen by then (the run's mean per update: its batches come in a shuffled order).
    from aiayn.run.curve import read_curve

    per_step = trained["tokens_seen"]["tgt"] / trained["steps"]
    columns = read_curve(Path(workdir) / trained_in / folders.CURVE)
    at = {round(share * s["steps"]) for share in CURVE_AT}
    curve = [
        [int(k), per_step * k, v]
        for k, v in zip(columns["step"], columns["val_ppl"], strict=True)
        if int(k) in at and not math.isnan(v)
    ]
    # The trainer's own clock (summed over resumes, so a killed and resumed run keeps its speed; without the
    # interpreter's start-up, as the reference's loop is timed; with the one validation at the last update).
    train_s = trained["wall_time_s"]
    return {
        "steps": trained["steps"],
        "tgt_tokens_per_step": trained["tokens_seen"]["tgt"] / trained["steps"],
        "tgt_tokens_per_s": trained["tokens_seen"]["tgt"] / train_s,
        "train_s": round(train_s, 1),
        "curve": curve,
        "dev_ppl": ev["dev"]["ppl"],
        "dev_bleu": ev["dev"]["bleu"],
        "test_bleu": ev["test"]["bleu"],
        **ratios,
    }


def check_workdir(workdir: Path, setting: dict) -> None:
    """Create `workdir` for `setting`, or check that the runs it keeps were trained at `setting`: its finished runs
    are reused by name, so a folder of another setting would mix two settings in one table."""
    workdir.mkdir(parents=True, exist_ok=True)
    record = workdir / "setting.json"
    if not record.is_file():
        if any((workdir / "results").glob("*.json")):
            sys.exit(f"error: {workdir} holds results but no setting.json: pass another --workdir")
        tmp = record.with_suffix(".tmp")
        tmp.write_text(json.dumps(setting, indent=1))
        os.replace(tmp, record)
        return
    kept = json.loads(record.read_text())
    differ = sorted(k for k in {*kept, *setting} if kept.get(k) != setting.get(k))
    if differ:
        said = ", ".join(f"{k}: {kept.get(k)!r} there, {setting.get(k)!r} here" for k in differ)
        sys.exit(f"error: {record} was trained at another setting ({said}); pass another --workdir")


def die_with_parent() -> None:
    """A pool worker (and the stages it starts) ends when the bench does, killed or not (Linux; elsewhere a no-op)."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def slug(system: str) -> str:
    """A system's name as a file and folder name (`pipeline:train.lr_factor=2` -> `pipeline_train_lr_factor_2`)."""
    return "".join(c if c.isalnum() or c in "-_+" else "_" for c in system)


def run_one(workdir: str, seed: int, setting: dict, system: str, device: str, threads: int) -> dict:
    fn = reference_train if system in PLAIN_SYSTEMS else pipeline_train
    return fn(workdir, seed, setting, system, device, threads)


# ----------------------------------------------------------------------------------------------------------------


def welch(a: list[float], b: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """mean(a) - mean(b) and its Welch interval (unequal variances, Welch-Satterthwaite degrees of freedom)."""
    from scipy import stats

    va, vb = stats.tvar(a) / len(a), stats.tvar(b) / len(b)
    diff = sum(a) / len(a) - sum(b) / len(b)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = stats.t.ppf(0.5 + level / 2, df) * math.sqrt(va + vb)
    return diff, diff - half, diff + half


def ppl_at_tokens(curve: list, tokens: float) -> float:
    """A run's dev PPL after `tokens` real target tokens: linear in (log tokens, log PPL) between the two points of
    its curve ([update, tokens, PPL], ascending) around `tokens` (beyond either end, from the two nearest)."""
    pts = sorted((math.log(t), math.log(ppl)) for _, t, ppl in curve)
    x = math.log(tokens)
    i = next((i for i in range(1, len(pts)) if pts[i][0] >= x), len(pts) - 1)
    (x0, y0), (x1, y1) = pts[i - 1], pts[i]
    return math.exp(y0 + (y1 - y0) * (x - x0) / (x1 - x0))


def fair_references(results: dict[str, dict[int, dict]]) -> list[str]:
    """The plain systems with the paper's dropout placement (those a parity claim may be measured against), best
    (lowest mean dev PPL) first."""
    fair = [
        x
        for x in results
        if x in PLAIN_SYSTEMS
        and PLAIN_SYSTEMS[x]["dropout"] == "paper"
        and PLAIN_SYSTEMS[x]["model"] == "torch"  # the library's model in a plain loop is a diagnosis, not a reference
        and len(results[x]) >= 2
    ]
    return sorted(fair, key=lambda x: sum(math.log(r["dev_ppl"]) for r in results[x].values()) / len(results[x]))


def summarise(results: dict[str, dict[int, dict]], against: str) -> None:
    from aiayn.verdicts.stats import mean_ci, paired_test

    def fmt(ci, digits):
        if ci.mean is None:
            return "—"
        return f"{ci.mean:.{digits}f}" + ("" if ci.half_width is None else f" ± {ci.half_width:.{digits}f}")

    keys = ("dev_ppl", "dev_bleu", "test_bleu", "dev_len_ratio", "tgt_tokens_per_step", "tgt_tokens_per_s")
    print(
        f"\n{'system':26s} {'n':>2s} {'dev PPL':>12s} {'dev BLEU':>12s} {'test BLEU':>12s} {'len ratio':>13s} "
        f"{'tgt tok/step':>12s} {'tgt tok/s':>11s}"
    )
    for system, by_seed in results.items():
        runs = list(by_seed.values())
        cis = [mean_ci([r[k] for r in runs if k in r]) for k in keys]
        print(
            f"{system:26s} {len(runs):2d} {fmt(cis[0], 2):>12s} {fmt(cis[1], 2):>12s} {fmt(cis[2], 2):>12s} "
            f"{fmt(cis[3], 3):>13s} {fmt(cis[4], 0):>12s} {fmt(cis[5], 0):>11s}"
        )
    print("(mean ± 95% CI half-width over seeds, Student t; len ratio: dev output / reference length, sacreBLEU)")
    print("\nper seed (dev PPL / dev BLEU / test BLEU / real target tokens per update):")
    for system, by_seed in results.items():
        cells = (
            f"{seed}: {r['dev_ppl']:.2f}/{r['dev_bleu']:.2f}/{r['test_bleu']:.2f}/{r['tgt_tokens_per_step']:.0f}"
            for seed, r in by_seed.items()
        )
        print(f"  {system:26s} " + "  ".join(cells))
    # Per real target token: every run's dev PPL at the fewest real target tokens any run saw (interpolated on its
    # curve, so no run is extrapolated), which removes what each budget leaves as padding.
    with_curve = [r for by_seed in results.values() for r in by_seed.values() if len(r.get("curve", [])) >= 2]
    common = min((r["curve"][-1][1] for r in with_curve), default=None)
    if common is not None:
        for by_seed in results.values():
            for r in by_seed.values():
                if len(r.get("curve", [])) >= 2:
                    r["dev_ppl_at_tokens"] = ppl_at_tokens(r["curve"], common)
        print(f"\nper real target token: dev PPL after {common:,.0f} real target tokens (each run's curve)")
        for system, by_seed in results.items():
            vals = [r["dev_ppl_at_tokens"] for r in by_seed.values() if "dev_ppl_at_tokens" in r]
            if vals:
                print(f"  {system:26s} {fmt(mean_ci(vals), 2):>12s}  " + "  ".join(f"{v:.2f}" for v in vals))

    def ratio(a, b, key):  # Welch on log PPL: (ratio, low, high), or None where a run lacks the key
        ra, rb = list(results[a].values()), list(results[b].values())
        if not all(key in r for r in ra + rb):
            return None
        d, lo, hi = welch([math.log(r[key]) for r in ra], [math.log(r[key]) for r in rb])
        return math.exp(d), math.exp(lo), math.exp(hi)

    def show(x):
        return "—" if x is None else f"x{x[0]:.3f} [{x[1]:.3f}, {x[2]:.3f}]"

    # Each pipeline against each plain system, then the effect of each single change.
    pairs = [(a, b) for a in results if a.startswith("pipeline") for b in results if b in PLAIN_SYSTEMS]
    pairs += [
        ("pipeline-source", "pipeline-longer"),
        ("pipeline-longer-real", "pipeline-longer"),
        ("pipeline-source-real", "pipeline-source"),
        ("pipeline-source-real", "pipeline-longer-real"),
        ("pipeline-longer-target", "pipeline-longer"),
        ("pipeline-source-target", "pipeline-longer-target"),
        ("pipeline-source-target", "pipeline-source"),
        ("reference-paper-dropout", "reference"),
        ("reference-fairseq", "reference-paper-dropout"),
        ("reference-source", "reference-paper-dropout"),
        ("reference-source", "reference-fairseq"),
        ("reference-source+model", "reference-source"),
    ]
    pairs = [(a, b) for a, b in pairs if len(results.get(a, {})) >= 2 and len(results.get(b, {})) >= 2]
    if pairs:
        print(
            "\ndifferences (Welch 95% interval; dev PPL as a ratio from log PPL; per update and per real target token):"
        )
    for a, b in pairs:
        ra, rb = list(results[a].values()), list(results[b].values())
        db, blo, bhi = welch([r["dev_bleu"] for r in ra], [r["dev_bleu"] for r in rb])
        print(
            f"  {a} / {b}: dev PPL per update {show(ratio(a, b, 'dev_ppl'))}, per token "
            f"{show(ratio(a, b, 'dev_ppl_at_tokens'))}; dev BLEU {db:+.2f} [{blo:+.2f}, {bhi:+.2f}]"
        )
        # Two pipeline systems start from the same weights for a seed (the model is built right after seeding, and
        # neither batch order nor budget draws from torch's generator), so their difference is also paired by seed.
        if a.startswith("pipeline-") and b.startswith("pipeline-"):
            seeds = sorted(set(results[a]) & set(results[b]))
            log_ppl = {x: {k: math.log(results[x][k]["dev_ppl"]) for k in seeds} for x in (a, b)}
            bleu_of = {x: {k: results[x][k]["dev_bleu"] for k in seeds} for x in (a, b)}
            ppl, bleu = paired_test(log_ppl[a], log_ppl[b]), paired_test(bleu_of[a], bleu_of[b])
            if ppl.low is not None and bleu.low is not None:
                print(
                    f"  {a} / {b}, paired by seed ({ppl.n}): dev PPL x{math.exp(ppl.mean_diff):.3f} "
                    f"[{math.exp(ppl.low):.3f}, {math.exp(ppl.high):.3f}]; dev BLEU {bleu.mean_diff:+.2f} "
                    f"[{bleu.low:+.2f}, {bleu.high:+.2f}]"
                )
    if against == "best":  # the fair reference that learned most per update
        against = next(iter(fair_references(results)), REFERENCE)
    shipped = ALIASES["pipeline"]  # the headline: the shipped default against the reference
    if shipped in results and against in results and len(results[shipped]) >= 2 <= len(results[against]):
        ours, ref = list(results[shipped].values()), list(results[against].values())
        per_update, per_token = ratio(shipped, against, "dev_ppl"), ratio(shipped, against, "dev_ppl_at_tokens")
        db, blo, bhi = welch([r["dev_bleu"] for r in ours], [r["dev_bleu"] for r in ref])
        shown = per_update[2] <= 1 + MARGIN
        print(
            f"\nparity of {shipped} (the shipped default) against {against}: dev PPL ratio per update "
            f"{show(per_update)}, per real target token {show(per_token)}: "
            + (
                f"the pipeline is shown to be at most {MARGIN:.0%} worse per update"
                if shown
                else f"a pipeline worse by more than {MARGIN:.0%} per update is not excluded"
            )
        )
        mean = lambda runs, k: sum(r[k] for r in runs) / len(runs)  # noqa: E731
        if per_token is not None:
            print(f"RESULT parity_ppl_ratio_per_token_upper {per_token[2]:.3f}")
        print(f"RESULT parity_ppl_ratio_upper {per_update[2]:.3f}")
        print(f"RESULT parity_within_margin {int(shown)}")
        print(f"RESULT parity_bleu_diff_low {blo:.2f}")
        print(f"RESULT parity_test_bleu_ratio {mean(ours, 'test_bleu') / mean(ref, 'test_bleu'):.3f}")
        print(f"RESULT parity_ppl_ratio {per_update[0]:.3f}")
        print(f"RESULT parity_bleu_ratio {mean(ours, 'dev_bleu') / mean(ref, 'dev_bleu'):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="a smoke run (the learning rate stays in its warmup)")
    size.add_argument("--full", action="store_true", help="issue 39's setting: d_model 256, 700 updates, warmup 4000")
    parser.add_argument(
        "--systems",
        nargs="+",
        default=[
            "pipeline-longer-target",
            "pipeline-source-target",
            "pipeline-longer",
            "pipeline-source",
            "pipeline-longer-real",
            "reference-source",
            REFERENCE,
        ],
        help=f"of {['pipeline', *PIPELINE_SYSTEMS, *PLAIN_SYSTEMS]}, or pipeline:key=value,... (Hydra overrides); "
        f"pipeline is {ALIASES['pipeline']}, the shipped default",
    )
    parser.add_argument(
        "--against",
        default="best",
        help="the reference of the RESULT lines; best (the default): the plain system with the paper's dropout that "
        "reached the lowest mean dev PPL",
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    parser.add_argument("--steps", type=int, help="override the setting's number of updates")
    parser.add_argument("--lr-factor", type=float, help="override the setting's learning-rate factor (Eq. 3)")
    parser.add_argument("--warmup", type=int, help="override the setting's warmup updates")
    parser.add_argument(
        "--mirror", help="a folder (or URL) holding data=multi30k's .gz files under their cache names (offline)"
    )
    parser.add_argument(
        "--data", type=Path, help="instead of data=multi30k: a local folder of plain train.{en,de}, val.{en,de}"
    )
    parser.add_argument("--workdir", type=Path, help="default studies/.parity/<learn|quick|full>-<steps>")
    parser.add_argument("--report-only", action="store_true", help="tabulate the finished runs, train nothing")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument(
        "--jobs", type=int, default=None, help="runs side by side (default: one per core on CPU, 3 on a GPU)"
    )
    args = parser.parse_args()

    # The library from this checkout, also where it is not pip-installed (a GPU machine): workers and stages inherit it.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))
    args.systems = list(dict.fromkeys(ALIASES.get(s, s) for s in args.systems))
    unknown = [
        s
        for s in [*args.systems, *([args.against] if args.against != "best" else [])]
        if s not in PLAIN_SYSTEMS and s not in PIPELINE_SYSTEMS and not s.startswith("pipeline:")
    ]
    if unknown:
        sys.exit(
            f"error: unknown system(s) {unknown}; choose from {[*PIPELINE_SYSTEMS, *PLAIN_SYSTEMS]} or "
            f"pipeline:key=value,..."
        )
    if args.data is not None and not (args.data / "train.en").is_file():
        sys.exit(f"error: {args.data}/train.en not found; --data takes a folder of plain train/val .en/.de files")
    mode = "quick" if args.quick else "full" if args.full else "learn"
    setting = dict(SETTINGS[mode])
    setting["data"] = data_overrides(args.data and args.data.resolve(), args.mirror)
    overridden = {"steps": args.steps, "lr_factor": args.lr_factor, "warmup": args.warmup}
    setting.update({k: v for k, v in overridden.items() if v is not None})
    name = f"{mode}-{setting['steps']}" + "".join(
        f"-{k}{v}" for k, v in overridden.items() if k != "steps" and v is not None and v != SETTINGS[mode][k]
    )
    workdir = (args.workdir or REPO / "studies" / ".parity" / name).resolve()
    check_workdir(workdir, setting)
    # Small models leave a GPU mostly idle: three runs share it well.
    jobs = args.jobs or (3 if args.device == "cuda" else max(1, min(len(os.sched_getaffinity(0)), 4)))
    threads = max(1, len(os.sched_getaffinity(0)) // jobs) if args.device == "cpu" else 4
    env = dict(os.environ, WANDB_MODE="disabled")
    print(
        f"learning parity ({mode}): {setting}\nwork folder {workdir}; {jobs} run(s) at a time, {threads} thread(s)"
        f" each",
        flush=True,
    )
    prepare_data(workdir, setting["data"], setting["vocab"], env)

    results: dict[str, dict[int, dict]] = {system: {} for system in args.systems}
    todo = []
    for seed in args.seeds:  # seed-major: an interrupted bench has every system's first seeds
        for system in args.systems:
            cached = workdir / "results" / f"{slug(system)}-seed{seed}.json"
            if cached.is_file():
                results[system][seed] = json.loads(cached.read_text())
            elif not args.report_only:
                todo.append((system, seed, cached))
    ctx, failed = multiprocessing.get_context("spawn"), []
    with cf.ProcessPoolExecutor(jobs, mp_context=ctx, initializer=die_with_parent) as pool:
        futures = {
            pool.submit(run_one, str(workdir), seed, setting, system, args.device, threads): (system, seed, out)
            for system, seed, out in todo
        }
        for future in cf.as_completed(futures):
            system, seed, out = futures[future]
            try:
                result = future.result()
            except Exception as err:  # one failed run is reported now and loses none of the others' results
                failed.append(f"{system} seed {seed}")
                print(f"FAILED {system} seed {seed}: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
                continue
            out.parent.mkdir(exist_ok=True)
            tmp = out.with_suffix(".tmp")
            tmp.write_text(json.dumps(result, indent=1))
            os.replace(tmp, out)
            results[system][seed] = result
            print(
                f"{system} seed {seed}: dev PPL {result['dev_ppl']:.2f}, dev BLEU {result['dev_bleu']:.2f}, test "
                f"BLEU {result['test_bleu']:.2f} ({result['train_s']:.0f} s training)",
                flush=True,
            )
    results = {k: dict(sorted(v.items())) for k, v in results.items() if v}
    summarise(results, args.against)
    if failed:
        sys.exit(f"error: {len(failed)} run(s) failed ({', '.join(failed)}); the others are kept, rerun to retry")


if __name__ == "__main__":
    main()
