"""Load an export's sharegpt dataset with LLaMA-Factory's own ``get_dataset(stage="sft")``.

    python llamafactory_load.py NAME DATASET_DIR WORKDIR

Run in the folder a user would run LLaMA-Factory from (``DATASET_DIR`` may be relative to it).
The tokenizer and processor are a stand-in Qwen2-VL pair made here (a character vocabulary
plus Qwen2-VL's special tokens, Qwen2-VL's image processor): nothing is downloaded, and the
``qwen2_vl`` template's image plugin opens and encodes every image. Prints one JSON line:
rows, images, image placeholders seen in the token ids, and the decoded labels of row 0.
"""

import json
import string
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import (
    PreTrainedTokenizerFast,
    Qwen2VLImageProcessor,
    Qwen2VLProcessor,
    Qwen2VLVideoProcessor,
)

name, dataset_dir, work = sys.argv[1], sys.argv[2], Path(sys.argv[3])
SPECIAL = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|vision_start|>", "<|vision_end|>"]
SPECIAL += ["<|image_pad|>", "<|video_pad|>"]


def stand_in(folder: Path) -> Path:
    vocab = {"[UNK]": 0}
    for ch in string.printable:
        vocab.setdefault(ch, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    tok.decoder = decoders.Fuse()  # characters back into the text
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    fast.add_special_tokens({"additional_special_tokens": SPECIAL})
    processor = Qwen2VLProcessor(
        image_processor=Qwen2VLImageProcessor(),
        tokenizer=fast,
        video_processor=Qwen2VLVideoProcessor(),
    )
    processor.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


from llamafactory.data import get_dataset, get_template_and_fix_tokenizer  # noqa: E402
from llamafactory.hparams import get_train_args  # noqa: E402
from llamafactory.model import load_tokenizer  # noqa: E402

model_dir = stand_in(work / "stand-in")
model_args, data_args, training_args, _, _ = get_train_args(
    {
        "model_name_or_path": str(model_dir),
        "stage": "sft",
        "do_train": True,
        "finetuning_type": "lora",
        "dataset": name,
        "dataset_dir": dataset_dir,
        "template": "qwen2_vl",
        "cutoff_len": 100000,
        "image_max_pixels": 128 * 128,
        "output_dir": str(work / "out"),
        "overwrite_cache": True,
        "report_to": "none",
    }
)
tokenizer_module = load_tokenizer(model_args)
tokenizer = tokenizer_module["tokenizer"]
template = get_template_and_fix_tokenizer(tokenizer, data_args)
module = get_dataset(template, model_args, data_args, training_args, "sft", **tokenizer_module)
train = module["train_dataset"]
start = tokenizer.convert_tokens_to_ids("<|vision_start|>")
pad = tokenizer.convert_tokens_to_ids("<|image_pad|>")
row0 = train[0]
labels = [t for t in row0["labels"] if t >= 0]
print(
    json.dumps(
        {
            "rows": len(train),
            "vision_starts": sum(row["input_ids"].count(start) for row in train),
            "image_pads_row0": row0["input_ids"].count(pad),
            "labels_row0": tokenizer.decode(labels, skip_special_tokens=True),
        }
    )
)
