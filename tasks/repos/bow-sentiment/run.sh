#!/usr/bin/env bash
# Hyperparameters used for Table 2 of the paper.
set -e
python train.py \
    --config config.json \
    --epochs 50 \
    --lr 0.5 \
    --batch_size 16 \
    --output_dir results/paper
