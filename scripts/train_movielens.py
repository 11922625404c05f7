#!/usr/bin/env python
"""Train a (private) recommender on MovieLens: the script form of `dpmt train`.

Example: python scripts/train_movielens.py --dataset ml-100k --weights adaptive --mu 0.25 \
             --epsilon 5 --out runs/adaptive
"""
import sys

from dpmt.apps.cli import script_main

if __name__ == "__main__":
    sys.exit(script_main("train", "train_movielens.py", sys.argv[1:]))
