"""Tokenized examples and the packed block-diffusion batches built from them.

An example is either
* chat: prompt ids + reply ids (ending in <|im_end|>), the last block filled up with
  <|im_end|>; reply tokens are the ones that get masked, prompt tokens never;
* decision: ids of prefix + suffix (one piece) + one <|mask|> slot; the slot is the only target and the
  sequence ends right after it (as at inference).

Packing (see ``pack_row``): each example is laid out block by block. A block without reply
tokens appears once (clean, "S"). A block with reply tokens appears noisy ("N") and, unless
it is the example's last block, also clean ("C"), so later noisy blocks can attend to the
clean version of it (the BD3-LM x_noisy/x_clean trick, without duplicating prompt blocks).
Attention (``attention_allowed``): same example, and either the key is clean (S or C) in
an earlier block, or key and query are the same copy of the same block.
"""

from __future__ import annotations

import json
import lzma
import os
import random
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch

COPY_S, COPY_N, COPY_C = 0, 1, 2
IGNORE = -100


@dataclass
class Example:
    ids: np.ndarray  # int32, full clean sequence (chat: with end-of-turn fill)
    n_prompt: int  # tokens never masked (chat: prompt; decision: all but the slot)
    kind: int  # 0 chat, 1 decision
    task: str
    labels: Optional[np.ndarray] = None  # decision: label token ids
    target: Optional[np.ndarray] = None  # decision: distribution over labels (float32)
    weight: float = 1.0

    def blocks(self, bs: int) -> int:
        return (len(self.ids) + bs - 1) // bs

    def packed_len(self, bs: int) -> int:
        """Tokens this example takes in a row: every block once, reply blocks but the last twice."""
        first_reply_block = self.n_prompt // bs
        nb = self.blocks(bs)
        noisy_blocks = nb - first_reply_block
        return len(self.ids) + bs * max(0, noisy_blocks - 1)


def open_text(path: str):
    if path.endswith(".xz"):
        return lzma.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def read_jsonl(path: str, limit: Optional[int] = None) -> List[dict]:
    """All records, or ``limit`` of them spread evenly over the file (smoke tests)."""
    with open_text(path) as f:
        lines = f.readlines()
    if limit is not None and limit < len(lines):
        step = len(lines) / limit
        lines = [lines[int(i * step)] for i in range(limit)]
    return [json.loads(l) for l in lines]


def raw_continuations(records: Sequence[dict], eos_text: str, cuts: int = 2, seed: int = 0) -> List[dict]:
    """Plain-text records ({"k": "raw", "text"}) as prompt + continuation pairs with no chat
    template, so ``/v1/completions`` learns to continue a prompt. Each text is cut ``cuts``
    times at a space (the prompt keeps at least one word, the continuation at least a third
    of the text), so prompt and continuation tokenize as the whole text does."""
    rng = random.Random(seed)
    out = []
    for r in records:
        text = r["text"]
        spaces = [i for i, c in enumerate(text) if c == " " and 0 < i <= len(text) * 2 // 3]
        for c in sorted(set(rng.sample(spaces, min(cuts, len(spaces))))):
            out.append({"k": "chat", "task": r["task"], "p": text[:c], "r": text[c:] + eos_text})
    return out


def tokenize_records(records: Sequence[dict], tok, block_size: int, max_len: int, eos_text: str = "<|im_end|>") -> Tuple[List[Example], Dict[str, int]]:
    """Tokenizes chat, raw-text and decision records; returns examples and counts of what was dropped."""
    mask_id = tok.token_id("<|mask|>")
    eos_id = tok.token_id("<|im_end|>")
    dropped = {"chat_too_long": 0, "decision_too_long": 0}
    chats = [r for r in records if r["k"] == "chat"] + raw_continuations([r for r in records if r["k"] == "raw"], eos_text)
    decs = [r for r in records if r["k"] == "dec"]
    out: List[Example] = []

    if chats:
        p_ids = tok.encode_batch([r["p"] for r in chats])
        r_ids = tok.encode_batch([r["r"] for r in chats])
        for r, p, a in zip(chats, p_ids, r_ids):
            if not a or a[-1] != eos_id:
                raise ValueError(f"reply must end with <|im_end|>: {r['r'][-40:]!r}")
            ids = p + a
            fill = (-len(ids)) % block_size
            ids = ids + [eos_id] * fill
            if len(ids) > max_len:
                dropped["chat_too_long"] += 1
                continue
            out.append(Example(np.asarray(ids, np.int32), len(p), 0, r["task"]))

    if decs:
        # Encode every variant (longest first); keep the first that fits. Prefix and question
        # are tokenized in one piece and the slot appended, as the inference engine does.
        flat, owner = [], []
        for i, r in enumerate(decs):
            for pre, suf in r["v"]:
                flat.append(pre + suf)
                owner.append(i)
        flat_ids = tok.encode_batch(flat)
        chosen: Dict[int, List[int]] = {}
        for i, p in zip(owner, flat_ids):
            if i in chosen:
                continue
            ids = p + [mask_id]
            if len(ids) <= max_len:
                chosen[i] = ids
        label_cache: Dict[str, int] = {}
        for i, r in enumerate(decs):
            if i not in chosen:
                dropped["decision_too_long"] += 1
                continue
            ids = chosen[i]
            labels = np.asarray([label_cache.setdefault(l, tok.token_id(l)) for l in r["labels"]], np.int32)
            if ("soft" in r and len(r["soft"]) != len(labels)) or ("y" in r and not 0 <= r["y"] < len(labels)):
                raise ValueError(f"{r['task']}: target does not match the {len(labels)} labels")
            if "soft" in r:
                target = np.asarray(r["soft"], np.float32)
            else:
                target = np.zeros(len(labels), np.float32)
                target[r["y"]] = 1.0
            out.append(Example(np.asarray(ids, np.int32), len(ids) - 1, 1, r["task"], labels, target, float(r.get("w", 1.0))))
    return out, dropped


@dataclass
class Row:
    """One packed row, numpy, length R."""

    input_ids: np.ndarray
    position_ids: np.ndarray
    doc: np.ndarray
    block: np.ndarray
    copy: np.ndarray
    target: np.ndarray  # chat targets (token id) or IGNORE
    slot_example: List[Tuple[int, Example]]  # (row position of the slot, example)


def pack_row(examples: Sequence[Example], R: int, bs: int, mask_id: int, pad_id: int, rng: np.random.Generator,
             fixed_ratio: Optional[float] = None) -> Row:
    ids = np.full(R, pad_id, np.int64)
    pos = np.zeros(R, np.int64)
    doc = np.full(R, -1, np.int64)
    blk = np.zeros(R, np.int64)
    cpy = np.full(R, COPY_S, np.int64)
    tgt = np.full(R, IGNORE, np.int64)
    slots: List[Tuple[int, Example]] = []
    o = 0
    for d, ex in enumerate(examples):
        n = len(ex.ids)
        nb = ex.blocks(bs)
        first_reply = ex.n_prompt // bs
        for b in range(nb):
            lo, hi = b * bs, min(n, (b + 1) * bs)
            seg = ex.ids[lo:hi]
            m = hi - lo
            positions = np.arange(lo, hi)
            if b < first_reply:
                ids[o:o + m], pos[o:o + m], doc[o:o + m], blk[o:o + m], cpy[o:o + m] = seg, positions, d, b, COPY_S
                o += m
                continue
            # noisy copy
            noisy = seg.astype(np.int64).copy()
            maskable = positions >= ex.n_prompt
            if ex.kind == 1:
                chosen = maskable  # the answer slot: always masked
            else:
                t = fixed_ratio if fixed_ratio is not None else rng.uniform(0.0, 1.0)
                chosen = maskable & (rng.random(m) < t)
                if not chosen.any():
                    cand = np.flatnonzero(maskable)
                    chosen[cand[rng.integers(len(cand))]] = True
            noisy[chosen] = mask_id
            ids[o:o + m], pos[o:o + m], doc[o:o + m], blk[o:o + m], cpy[o:o + m] = noisy, positions, d, b, COPY_N
            if ex.kind == 0:
                tgt[o:o + m][chosen] = seg[chosen]
            else:
                slots.append((o + m - 1, ex))
            o += m
            if b < nb - 1:
                ids[o:o + m], pos[o:o + m], doc[o:o + m], blk[o:o + m], cpy[o:o + m] = seg, positions, d, b, COPY_C
                o += m
    assert o <= R, (o, R)
    return Row(ids, pos, doc, blk, cpy, tgt, slots)


def attention_allowed(doc: torch.Tensor, block: torch.Tensor, copy: torch.Tensor) -> torch.Tensor:
    """Boolean [B, 1, R, R] (True = may attend) for packed rows; pads see only themselves."""
    same_doc = doc.unsqueeze(-1) == doc.unsqueeze(-2)
    qb, kb = block.unsqueeze(-1), block.unsqueeze(-2)
    k_clean = (copy != COPY_N).unsqueeze(-2)
    same_copy = copy.unsqueeze(-1) == copy.unsqueeze(-2)
    allowed = same_doc & ((k_clean & (kb < qb)) | ((kb == qb) & same_copy))
    eye = torch.eye(doc.shape[-1], dtype=torch.bool, device=doc.device).unsqueeze(0)
    allowed = allowed | eye
    return allowed.unsqueeze(1)


def collate(rows: Sequence[Row]) -> Dict[str, object]:
    batch = {
        "input_ids": torch.from_numpy(np.stack([r.input_ids for r in rows])),
        "position_ids": torch.from_numpy(np.stack([r.position_ids for r in rows])),
        "doc": torch.from_numpy(np.stack([r.doc for r in rows])),
        "block": torch.from_numpy(np.stack([r.block for r in rows])),
        "copy": torch.from_numpy(np.stack([r.copy for r in rows])),
        "target": torch.from_numpy(np.stack([r.target for r in rows])),
    }
    # decision slots: flat index into B*R, label ids padded to the widest, target distributions
    flat, labels, targets, weights = [], [], [], []
    width = max([len(ex.labels) for r in rows for _, ex in r.slot_example] or [1])
    for i, r in enumerate(rows):
        for p, ex in r.slot_example:
            flat.append(i * len(r.input_ids) + p)
            lab = np.full(width, -1, np.int64)
            lab[: len(ex.labels)] = ex.labels
            tg = np.zeros(width, np.float32)
            tg[: len(ex.target)] = ex.target
            labels.append(lab)
            targets.append(tg)
            weights.append(ex.weight)
    batch["slot_index"] = torch.tensor(flat, dtype=torch.long)
    batch["slot_labels"] = torch.from_numpy(np.stack(labels)) if labels else torch.zeros(0, width, dtype=torch.long)
    batch["slot_target"] = torch.from_numpy(np.stack(targets)) if targets else torch.zeros(0, width)
    batch["slot_weight"] = torch.tensor(weights, dtype=torch.float32)
    return batch


def batches(examples: Sequence[Example], rows: int, R: int, bs: int, mask_id: int, pad_id: int, seed: int,
            fixed_ratio: Optional[float] = None, epochs: Optional[int] = None, pool_size: int = 64) -> Iterator[Dict[str, object]]:
    """Endless (or ``epochs``-long) stream of packed batches; each epoch reshuffles.

    Rows are filled first-fit from a small pool of upcoming examples, so little is padding."""
    rng = np.random.default_rng(seed)

    def stream() -> Iterator[Example]:
        epoch = 0
        while epochs is None or epoch < epochs:
            epoch += 1
            for i in rng.permutation(len(examples)):
                if examples[i].packed_len(bs) <= R:
                    yield examples[i]

    src = stream()
    pool: List[Example] = []
    exhausted = False
    current: List[List[Example]] = []
    while True:
        while not exhausted and len(pool) < pool_size:
            try:
                pool.append(next(src))
            except StopIteration:
                exhausted = True
        if not pool:
            break
        row: List[Example] = []
        used = 0
        rest: List[Example] = []
        for ex in pool:
            need = ex.packed_len(bs)
            if used + need <= R:
                row.append(ex)
                used += need
            else:
                rest.append(ex)
        pool = rest
        current.append(row)
        if len(current) == rows:
            yield collate([pack_row(r, R, bs, mask_id, pad_id, rng, fixed_ratio) for r in current])
            current = []
    if current:
        yield collate([pack_row(r, R, bs, mask_id, pad_id, rng, fixed_ratio) for r in current])


class BatchStream(torch.utils.data.IterableDataset):
    """Worker-sharded batch stream for torch's DataLoader (each worker its own seed)."""

    def __init__(self, examples, rows, R, bs, mask_id, pad_id, seed):
        super().__init__()
        self.args = (examples, rows, R, bs, mask_id, pad_id)
        self.seed = seed

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        wid = info.id if info is not None else 0
        examples, rows, R, bs, mask_id, pad_id = self.args
        return batches(examples, rows, R, bs, mask_id, pad_id, self.seed * 1000 + wid)
