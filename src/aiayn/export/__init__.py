"""Export a trained run as a Hugging Face MarianMTModel folder or a CTranslate2 model, exactly (docs/export.md).

Each computes the run's own function, not an approximation of it.

    aiayn-export runs/base/seed1 exported/base-hf --to hf
    aiayn-export runs/base/seed1 exported/base-ct2 --to ct2 --quantization int8
    aiayn-export runs/base/seed1 exported/base-hf --to hf --average 1 --bpe data/bpe --force

The weights are those `aiayn-translate` decodes with: the mean of the run's last `row.average_last`
checkpoints (Table 2's), or of the last K with --average K. Each export checks itself before it is written: the
exported model's teacher-forced outputs on a probe batch must equal ours (float32), or nothing is written.

--to hf: MarianMTModel is our architecture (post-LN, sinusoidal positions, sqrt(d_model) embedding scale, biases,
LayerNorm eps 1e-5, tied output projection) once one permutation of the model axis turns our interleaved sin/cos
position columns into Marian's [sin | cos] halves; every d_model-indexed axis of every weight is permuted with it, which
LayerNorm and the residual stream commute with. The folder also holds a MarianTokenizer over our sentencepiece model
whose ids are ours, a generation config (the run's beam size and alpha, PAD and BOS never generated) and a
model card.

--to ct2: a CTranslate2 TransformerSpec written by our own converter (`ct2_spec`): our position table given
explicitly (no permutation), post- or pre-LN, decoding from our BOS `<s>`, vocabulary = our sentencepiece pieces;
`spm.model` is copied beside it for tokenising. --quantization int8 (or another CTranslate2 type) quantizes on save.

Refused, naming the setting: anything these formats cannot compute exactly (`unmappable`).
"""
