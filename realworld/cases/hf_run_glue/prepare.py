"""Write a tiny BERT (random weights), its word-level tokenizer and synthetic sentence-pair CSVs into argv[1]."""

import csv
import random
import sys
from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

VOCAB = 500
SPECIAL = ["[UNK]", "[PAD]", "[CLS]", "[SEP]", "[MASK]"]


def rows(rng: random.Random, words: list[str], n: int) -> list[dict[str, object]]:
    out = []
    for _ in range(n):
        a = [rng.choice(words) for _ in range(rng.randint(6, 20))]
        same = rng.random() < 0.5
        b = a[:] if same else [rng.choice(words) for _ in range(rng.randint(6, 20))]
        rng.shuffle(b)
        out.append({"sentence1": " ".join(a), "sentence2": " ".join(b), "label": int(same)})
    return out


def write_csv(path: Path, data: list[dict[str, object]]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["sentence1", "sentence2", "label"])
        w.writeheader()
        w.writerows(data)


def main(out: Path) -> None:
    rng = random.Random(0)
    words = [f"w{i}" for i in range(VOCAB)]
    vocab = {t: i for i, t in enumerate(SPECIAL + words)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    cls, sep = vocab["[CLS]"], vocab["[SEP]"]
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=128,
    )
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=128,
        pad_token_id=vocab["[PAD]"],
    )
    BertForSequenceClassification(config).save_pretrained(out / "model")
    fast.save_pretrained(out / "model")
    write_csv(out / "train.csv", rows(rng, words, 160))
    write_csv(out / "validation.csv", rows(rng, words, 64))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
