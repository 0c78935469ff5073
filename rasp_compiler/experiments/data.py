"""Seeded, batched data for the embedding-only experiments: Dyck-1 and k-hop induction heads.

Everything is generated with NumPy on whole batches (no per-sample Python).  Train and test are
disjoint by construction: every example is hashed, and an example belongs to the test split exactly
when ``hash % TEST_MODULUS == 0``.  Training batches reject test examples and vice versa, so no test
string can ever be seen in training, and both splits follow the same generator otherwise.

Dyck-1 (Zhong & Andreas 2024, their ``parenthesis_balancing`` generator, vectorised): tokens
``( ) ? pad`` = 0 1 2 3.  A string has length 1..60; one third are uniformly random, two thirds
balanced (their recursive wrap/concatenate generator), and random transpositions and flips are
applied as they do (see ``_dyck_raw``); the label is computed on the final string.  The string is
followed by the query token ``?``; the label (1 = balanced) is read at ``?``.

k-hop induction heads (Sanford, Hsu & Telgarsky 2024): a string over an alphabet of ``vocab`` tokens
with no two equal adjacent tokens.  find(i) = the most recent j < i with x_j = x_i; hop_1(i) =
x_{find(i)+1}; hop_k iterates p <- find(p)+1 k times, starting at p = i; when some find does not
exist the target is the no-occurrence token (class ``vocab``).  Every position is scored.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DYCK_OPEN, DYCK_CLOSE, DYCK_QUERY, DYCK_PAD = 0, 1, 2, 3
DYCK_VOCAB = 4
DYCK_MAX_LEN = 60
TEST_MODULUS = 5          # 1/5 of the example space is test-only
IGNORE = -100             # target value not scored (cross-entropy ignore_index)

_HASH_W = np.random.default_rng(0x5EED).integers(1, 2**62, size=4096, dtype=np.int64) | 1


def row_hash(x: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row of an integer array (wrapping arithmetic; pad values included)."""
    x = np.asarray(x, dtype=np.int64) + 1
    with np.errstate(over="ignore"):
        h = (x * _HASH_W[: x.shape[1]]).sum(axis=1)
        h ^= h >> np.int64(29)
        h *= np.int64(0x5851F42D4C957F2D)
        h ^= h >> np.int64(32)
    return h


def in_test_split(x: np.ndarray) -> np.ndarray:
    return (row_hash(x) % TEST_MODULUS) == 0


@dataclass
class Batch:
    """tokens (B, T) int64; targets (B, T) int64 with IGNORE where not scored."""
    tokens: np.ndarray
    targets: np.ndarray


# ----------------------------------------------------------------------------------------------
# Dyck-1

def dyck_balanced(s: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Label each row of 0/1 strings (pad beyond ``lengths``): 1 if balanced."""
    step = np.where(s == DYCK_OPEN, 1, -1)
    valid = np.arange(s.shape[1])[None, :] < lengths[:, None]
    step = np.where(valid, step, 0)
    depth = np.cumsum(step, axis=1)
    return ((depth.min(axis=1, initial=0) >= 0) & (depth[:, -1] == 0)).astype(np.int64)


def _balanced_tree(rng: np.random.Generator, pairs: np.ndarray, max_len: int) -> np.ndarray:
    """Z&A's recursive balanced generator, run for a whole batch at once on an explicit stack.

    G(1) = "()"; G(t) = "(" G(t-1) ")" with probability 1/2, else G(u) G(t-u) with u ~ U{1..t-1}.
    Stack items: t >= 1 means "generate G(t)", -1 means "emit )".  Returns (n, max_len) 0/1 + pad.
    """
    n = len(pairs)
    depth = 2 * int(pairs.max()) + 2
    stack = np.zeros((n, depth), dtype=np.int64)
    stack[:, 0] = pairs
    sp = np.ones(n, dtype=np.int64)
    out = np.full((n, max_len + 1), DYCK_PAD, dtype=np.int64)
    ptr = np.zeros(n, dtype=np.int64)
    rows = np.arange(n)
    while True:
        live = np.nonzero(sp > 0)[0]
        if live.size == 0:
            break
        sp[live] -= 1
        item = stack[live, sp[live]]
        close = item == -1
        r = live[close]
        out[r, ptr[r]] = DYCK_CLOSE
        ptr[r] += 1
        gen = live[~close]
        t = item[~close]
        wrap = (t == 1) | (rng.random(gen.size) < 0.5)
        w, tw = gen[wrap], t[wrap]                  # "(" G(t-1) ")"
        out[w, ptr[w]] = DYCK_OPEN
        ptr[w] += 1
        stack[w, sp[w]] = -1
        sp[w] += 1
        inner = tw > 1
        wi = w[inner]
        stack[wi, sp[wi]] = tw[inner] - 1
        sp[wi] += 1
        c, tc = gen[~wrap], t[~wrap]                # G(u) G(t-u): push t-u, then u (u runs first)
        u = 1 + (rng.random(c.size) * (tc - 1)).astype(np.int64)
        stack[c, sp[c]] = tc - u
        stack[c, sp[c] + 1] = u
        sp[c] += 2
    del rows
    return out[:, :max_len]


def _dyck_raw(rng: np.random.Generator, n: int, max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """n strings (before the split filter): (strings (n, max_len) with pad, lengths).

    Follows Zhong & Andreas' ``parenthesis_balancing`` (their ``max_len`` = our max_len / 2):
    mutate = U{0..3}; with probability 1/3 a uniformly random string of length U{1..max_len}, else a
    balanced string G(U{1..max_len/2}) whose mutate is reset to 0 with probability 1/2.  Bit 1 of
    mutate: 1+Geom(1/2) random transpositions (p < q, else skipped); bit 2: 1+Geom(1/2) random flips,
    doubled with probability 2/3.  The label is computed on the final string.
    """
    mutate = rng.integers(0, 4, size=n)
    kind_random = rng.integers(0, 3, size=n) == 0
    rnd_len = rng.integers(1, max_len + 1, size=n)
    pairs = rng.integers(1, max_len // 2 + 1, size=n)
    keep = rng.integers(0, 2, size=n) == 1
    mutate = np.where(~kind_random & keep, 0, mutate)
    lengths = np.where(kind_random, rnd_len, 2 * pairs)
    pos = np.arange(max_len)[None, :]
    valid = pos < lengths[:, None]
    bal = _balanced_tree(rng, pairs, max_len)
    rnd = rng.integers(0, 2, size=(n, max_len))
    s = np.where(kind_random[:, None], rnd, bal)
    s = np.where(valid, s, DYCK_PAD)
    rows = np.arange(n)
    # transpositions
    reps = np.where(mutate & 1, 1 + rng.geometric(0.5, size=n) - 1, 0)
    for r in range(int(reps.max(initial=0))):
        p = (rng.random(n) * lengths).astype(np.int64)
        q = (rng.random(n) * lengths).astype(np.int64)
        do = (r < reps) & (p < q)
        sp_, sq_ = s[rows, p].copy(), s[rows, q].copy()
        s[rows, p] = np.where(do, sq_, sp_)
        s[rows, q] = np.where(do, sp_, sq_)
    # flips
    reps = np.where(mutate & 2, rng.geometric(0.5, size=n), 0)
    reps = np.where(rng.integers(0, 3, size=n) > 0, 2 * reps, reps)
    for r in range(int(reps.max(initial=0))):
        p = (rng.random(n) * lengths).astype(np.int64)
        do = r < reps
        s[rows, p] = np.where(do, 1 - s[rows, p], s[rows, p])
    return s, lengths


def dyck_batch(rng: np.random.Generator, n: int, split: str = "train",
               max_len: int = DYCK_MAX_LEN) -> Batch:
    """n Dyck-1 examples of the given split, sorted by nothing; tokens (n, max_len+1)."""
    want_test = split == "test"
    out_s, out_l, have = [], [], 0
    while have < n:
        s, lengths = _dyck_raw(rng, max(2 * (n - have), 64), max_len)
        keep = in_test_split(s) == want_test
        out_s.append(s[keep])
        out_l.append(lengths[keep])
        have += int(keep.sum())
    s = np.concatenate(out_s)[:n]
    lengths = np.concatenate(out_l)[:n]
    labels = dyck_balanced(s, lengths)
    tokens = np.concatenate([s, np.full((n, 1), DYCK_PAD)], axis=1)
    tokens[np.arange(n), lengths] = DYCK_QUERY
    targets = np.full_like(tokens, IGNORE)
    targets[np.arange(n), lengths] = labels
    return Batch(tokens.astype(np.int64), targets.astype(np.int64))


# ----------------------------------------------------------------------------------------------
# k-hop induction heads

def khop_pointers(x: np.ndarray, k: int, vocab: int) -> np.ndarray:
    """The hop pointers sigma_0 .. sigma_k at every position, batched: shape (k+1, B, T).

    sigma_0(i) = i; sigma_{j+1}(i) = 1 + the last position before sigma_j(i) holding the token
    x[sigma_j(i)], or -1 once no such position exists (the no-occurrence case, which stays dead).
    """
    b, t = x.shape
    prev = np.full((b, t), -1, dtype=np.int64)
    last = np.full((b, vocab), -1, dtype=np.int64)
    rows = np.arange(b)
    for i in range(t):                                   # a loop over positions, not samples
        prev[:, i] = last[rows, x[:, i]]
        last[rows, x[:, i]] = i
    out = np.empty((k + 1, b, t), dtype=np.int64)
    out[0] = np.arange(t)
    for j in range(k):
        alive = out[j] >= 0
        f = np.take_along_axis(prev, np.clip(out[j], 0, t - 1), axis=1)
        out[j + 1] = np.where(alive & (f >= 0), f + 1, -1)
    return out


def khop_targets(x: np.ndarray, k: int, vocab: int) -> np.ndarray:
    """hop_k at every position (``vocab`` = no occurrence), by the definition, batched."""
    p = khop_pointers(x, k, vocab)[k]
    out = np.take_along_axis(x, np.clip(p, 0, x.shape[1] - 1), axis=1)
    return np.where(p >= 0, out, vocab).astype(np.int64)


def _khop_raw(rng: np.random.Generator, n: int, length: int, vocab: int) -> np.ndarray:
    first = rng.integers(0, vocab, size=(n, 1))
    steps = rng.integers(1, vocab, size=(n, length - 1))      # non-zero step: no equal neighbours
    return (np.cumsum(np.concatenate([first, steps], axis=1), axis=1) % vocab).astype(np.int64)


def khop_batch(rng: np.random.Generator, n: int, k: int, split: str = "train",
               length: int = 64, vocab: int = 4) -> Batch:
    want_test = split == "test"
    out, have = [], 0
    while have < n:
        x = _khop_raw(rng, max(2 * (n - have), 64), length, vocab)
        keep = in_test_split(x) == want_test
        out.append(x[keep])
        have += int(keep.sum())
    x = np.concatenate(out)[:n]
    return Batch(x, khop_targets(x, k, vocab))


# ----------------------------------------------------------------------------------------------

@dataclass
class TaskSpec:
    """What the model needs to know about a task."""
    name: str
    k: int | None
    vocab: int          # input tokens
    classes: int        # output classes
    seq_len: int        # maximal sequence length (position table size)


def task_spec(task: str, k: int | None = None, khop_len: int = 64, khop_vocab: int = 4) -> TaskSpec:
    if task == "dyck1":
        return TaskSpec("dyck1", None, DYCK_VOCAB, 2, DYCK_MAX_LEN + 1)
    return TaskSpec("khop", k, khop_vocab, khop_vocab + 1, khop_len)


class Stream:
    """Training batches for a task: drawn in chunks, Dyck-1 bucketed by length to cut padding.

    ``next()`` returns (tokens, targets) as int64 arrays trimmed to the longest example of the batch.
    """

    def __init__(self, spec: TaskSpec, batch: int, seed: int, chunk: int = 64,
                 bucket: bool = True, khop_len: int = 64) -> None:
        self.spec, self.batch, self.chunk, self.bucket = spec, batch, chunk, bucket
        self.khop_len = khop_len
        self.rng = np.random.default_rng([seed, 1])
        self.queue: list[tuple[np.ndarray, np.ndarray]] = []
        self._refilled_from = self.rng.bit_generator.state   # the generator before the last refill

    def state(self) -> dict:
        """Where the stream is (JSON): the generator's state before its last refill and how many
        batches of that refill are left, from which ``restore`` rebuilds the same queue."""
        if not self.queue:        # the next batch comes from the generator as it is now
            return {"rng": self.rng.bit_generator.state, "left": 0}
        return {"rng": self._refilled_from, "left": len(self.queue)}

    def restore(self, state: dict) -> None:
        """Continue exactly where a stream in ``state`` was: the next batch is the one it would
        have returned."""
        self.rng.bit_generator.state = state["rng"]
        self.queue = []
        self._refilled_from = self.rng.bit_generator.state
        if state["left"]:
            self._refill()
            if not 0 < state["left"] <= len(self.queue):
                raise ValueError(f"the stream's state leaves {state['left']} batches of {len(self.queue)}")
            del self.queue[state["left"]:]     # next() pops from the end: the first batches are left

    def _refill(self) -> None:
        self._refilled_from = self.rng.bit_generator.state
        n = self.batch * self.chunk
        if self.spec.name == "dyck1":
            b = dyck_batch(self.rng, n, "train")
            if self.bucket:  # sort by length, cut into batches, shuffle the batch order
                order = np.argsort((b.targets != IGNORE).argmax(axis=1), kind="stable")
                b = Batch(b.tokens[order], b.targets[order])
        else:
            b = khop_batch(self.rng, n, self.spec.k, "train", length=self.khop_len,
                           vocab=self.spec.vocab)
        batches = []
        for i in range(self.chunk):
            tok = b.tokens[i * self.batch:(i + 1) * self.batch]
            tgt = b.targets[i * self.batch:(i + 1) * self.batch]
            if self.spec.name == "dyck1":
                width = int((tgt != IGNORE).argmax(axis=1).max()) + 1
                tok, tgt = tok[:, :width], tgt[:, :width]
            batches.append((np.ascontiguousarray(tok), np.ascontiguousarray(tgt)))
        perm = self.rng.permutation(self.chunk)
        self.queue = [batches[i] for i in perm]

    def next(self) -> tuple[np.ndarray, np.ndarray]:
        if not self.queue:
            self._refill()
        return self.queue.pop()


def test_set(spec: TaskSpec, n: int, seed: int = 12345, khop_len: int = 64) -> Batch:
    """The fixed test set (same for every run of a task unless ``seed`` changes)."""
    rng = np.random.default_rng([seed, 2])
    if spec.name == "dyck1":
        return dyck_batch(rng, n, "test")
    return khop_batch(rng, n, spec.k, "test", length=khop_len, vocab=spec.vocab)


def majority_baseline(b: Batch) -> float:
    """Accuracy of always predicting the most frequent class (over scored positions)."""
    t = b.targets[b.targets != IGNORE]
    return float(np.bincount(t).max() / t.size)
