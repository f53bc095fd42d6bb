"""Exports GPT-2 small (Hugging Face transformers' GPT2LMHeadModel, its default configuration: 12
layers, 768 wide, vocabulary 50257, tied output embedding) as a training program returning the
language-model loss, with torch.export, for bench/package/package_bench.

Usage: $AOTPIPE_PYTHON bench/package/export_gpt2.py OUT.pt2 [--layers N] [--batch B] [--seq S]
"""
import argparse
import os
import sys

import torch
import transformers

# The loss wrapper the package training test exports its GPT-2 with.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "aotpkg"))
from train_package_test import LanguageModelLoss  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=128)
    args = parser.parse_args()
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=args.layers, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                     use_cache=False)
    model = LanguageModelLoss(transformers.GPT2LMHeadModel(config)).train()
    ids = torch.randint(0, config.vocab_size, (args.batch, args.seq))
    torch.export.save(torch.export.export(model, (ids, torch.roll(ids, -1, dims=1))), args.out)


if __name__ == "__main__":
    main()
