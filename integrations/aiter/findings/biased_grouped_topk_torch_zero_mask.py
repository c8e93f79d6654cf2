"""aiter ops/topk.py: ``biased_grouped_topk_torch`` masks the groups it did not choose with
0.0, not -inf, so with a correction bias that makes the chosen experts' keys negative it
takes experts from masked groups. Standalone: torch and aiter's installed source only.

Run: python biased_grouped_topk_torch_zero_mask.py (any machine: the function is pure
torch; ``aiter/ops/topk.py`` itself imports aiter's JIT, which needs ROCm, so the function
is compiled from that file's source, unchanged). Exit 0: reproduces; 3: fixed.

8 experts in 4 groups of 2, the best 2 groups eligible, sigmoid scores plus a correction
bias (DeepSeek-V3's rule: the group's score is its best two biased scores summed). Groups
0 and 1 win; their experts' biased scores are 0.88, -0.5, 0.73, -0.38; the masked experts
(groups 2 and 3) have biased scores near -1.95 but are filled with 0.0, above -0.38.
Top-2 is right ({0, 2}); top-3 should add expert 3 (-0.38) and takes masked expert 4.
"""

import ast
import importlib.util
import os
import sys
import types

import torch

REPRODUCES, FIXED, OTHER = 0, 3, 1


def load() -> object:
    root = importlib.util.find_spec("aiter").submodule_search_locations[0]
    path = os.path.join(root, "ops", "topk.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    body = [n for n in tree.body if getattr(n, "name", "") == "biased_grouped_topk_torch"]
    ns = {"torch": torch, "dtypes": types.SimpleNamespace(fp32=torch.float32, i32=torch.int32)}
    exec(compile(ast.Module(body=body, type_ignores=[]), path, "exec"), ns)
    return ns["biased_grouped_topk_torch"]


def main() -> int:
    fn = load()
    logits = torch.tensor([[2.0, 0.0, 1.0, 0.5, -3.0, -3.0, -3.0, -3.0]])
    bias = torch.tensor([0.0, -1.0, 0.0, -1.0, -2.0, -2.0, -2.0, -2.0])
    print("biased scores", (torch.sigmoid(logits) + bias)[0].tolist())
    for top_k, want in ((2, [0, 2]), (3, [0, 2, 3])):
        _, ids = fn(logits, bias, top_k, True, 4, 2)
        got = sorted(ids[0].tolist())
        print(f"top_k={top_k}: expected experts {want}, actual {got}")
        if got != want:
            print("REPRODUCES: experts of groups 2 and 3 (masked) are chosen")
            return REPRODUCES
    print("FIXED: the masked groups' experts are never chosen")
    return FIXED


if __name__ == "__main__":
    sys.exit(main())
