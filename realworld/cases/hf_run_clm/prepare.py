"""Write a tiny word-level tokenizer and synthetic train/validation text into argv[1], in seconds."""

import random
import sys
from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

VOCAB = 500
SPECIAL = ["[UNK]", "[PAD]", "[BOS]", "[EOS]"]


def sentences(rng: random.Random, words: list[str], n: int) -> list[str]:
    return [" ".join(rng.choice(words) for _ in range(rng.randint(8, 24))) for _ in range(n)]


def main(out: Path) -> None:
    rng = random.Random(0)
    words = [f"w{i}" for i in range(VOCAB)]
    vocab = {t: i for i, t in enumerate(SPECIAL + words)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        bos_token="[BOS]",
        eos_token="[EOS]",
        model_max_length=128,
    )
    fast.save_pretrained(out / "tokenizer")
    (out / "train.txt").write_text("\n".join(sentences(rng, words, 2600)) + "\n")
    (out / "validation.txt").write_text("\n".join(sentences(rng, words, 800)) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
