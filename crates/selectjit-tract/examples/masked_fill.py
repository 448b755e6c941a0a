#!/usr/bin/env python3
"""Writes a BERT-style masked fill, `Where(Equal(mask, 0), -inf, scores)` with symbolic batch and
sequence length, and inputs for it, for `selectjit-onnx`:

    python masked_fill.py DIR [--batch 8] [--heads 12] [--seq 384]

DIR gets model.onnx, mask.npy (int64 [B,1,1,S], each row ending in a run of 0s) and scores.npy
(float32 [B,H,S,S]). Needs numpy and onnx.
"""

import argparse
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--seq", type=int, default=384)
    a = ap.parse_args()
    out = Path(a.dir)
    out.mkdir(parents=True, exist_ok=True)
    graph = helper.make_graph(
        [helper.make_node("Equal", ["mask", "zero"], ["pad"], name="is_pad"),
         helper.make_node("Where", ["pad", "neg_inf", "scores"], ["masked"], name="masked_fill")],
        "masked_fill",
        [helper.make_tensor_value_info("mask", TensorProto.INT64, ["B", 1, 1, "S"]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["B", a.heads, "S", "S"])],
        [helper.make_tensor_value_info("masked", TensorProto.FLOAT, ["B", a.heads, "S", "S"])],
        initializer=[numpy_helper.from_array(np.array(0, np.int64), "zero"),
                     numpy_helper.from_array(np.array(-np.inf, np.float32), "neg_inf")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              out / "model.onnx")
    rng = np.random.default_rng(0)
    mask = np.ones((a.batch, 1, 1, a.seq), np.int64)
    for row in mask.reshape(a.batch, a.seq):
        row[a.seq - int(rng.integers(0, a.seq // 3 + 1)):] = 0
    np.save(out / "mask.npy", mask)
    scores = rng.standard_normal((a.batch, a.heads, a.seq, a.seq)).astype(np.float32)
    np.save(out / "scores.npy", scores)
    print(f"wrote {out / 'model.onnx'}, {out / 'mask.npy'} {mask.shape}, "
          f"{out / 'scores.npy'} {scores.shape}")


if __name__ == "__main__":
    main()
