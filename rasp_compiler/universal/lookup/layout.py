"""Where everything sits in the lookup UT's residual stream: a function of the size class alone.

Columns, in order:
* four flags: ``u_in`` (1 at input positions, BOS included), ``u_prog`` (1 at program tokens),
  ``k_prog`` (-BIG at program tokens: keeps attention heads off them) and ``k_null`` (BIG at the
  null token: where program tokens, and unused lookups, attend);
* ``out``: o columns, the output logits;
* per layer l, per attention head h: ``q`` and ``key`` (k columns each: the head's query and key),
  ``vp`` (c: the code of the value the head would write at this position), ``ho`` (c: the code of
  what the head wrote), ``rk`` (c + 1: the head's lookup key at program tokens, patterns and a
  constant);
* per layer l, per MLP table t: ``lq`` (1: the code of the op's inputs written before the layer)
  and ``lk`` (Hc + 2: the op's lookup key at program tokens, Hc + 1 patterns and a constant).

The *consumer* slots (``q``, ``key``, ``vp``, ``lq``, ``out``) are written by the embedding and by
lookups; the rest is written once (the flags and keys, by the embedding; ``ho``, by the head).
"""

from __future__ import annotations

from dataclasses import dataclass

from rasp_compiler.universal.lookup.size_class import SizeClass

U_IN, U_PROG, K_PROG, K_NULL = 0, 1, 2, 3


@dataclass(frozen=True)
class Layout:
    size: SizeClass
    m: int
    out: tuple[int, ...]
    q: tuple[tuple[tuple[int, ...], ...], ...]      # [layer][head] -> columns
    key: tuple[tuple[tuple[int, ...], ...], ...]
    vp: tuple[tuple[tuple[int, ...], ...], ...]     # [layer][head] -> c columns
    ho: tuple[tuple[tuple[int, ...], ...], ...]
    rk: tuple[tuple[tuple[tuple[int, ...], int], ...], ...]   # [layer][head] -> (patterns, constant)
    lq: tuple[tuple[int, ...], ...]                 # [layer][table] -> column
    lk: tuple[tuple[tuple[tuple[int, ...], int], ...], ...]   # [layer][table] -> (patterns, constant)

    def downstream(self, layer: int) -> list[int]:
        """The consumer columns read after lookup layer ``layer``: what its lookups write."""
        cols = list(self.out)
        for l in range(layer + 1, self.size.layers):
            for h in range(self.size.heads):
                cols += list(self.q[l][h]) + list(self.key[l][h]) + list(self.vp[l][h])
            cols += list(self.lq[l])
        return sorted(cols)


def layout(size: SizeClass) -> Layout:
    L, H, T, k, c = size.layers, size.heads, size.tables, size.head_width, size.code_width
    nxt = 4

    def take(n: int) -> tuple[int, ...]:
        nonlocal nxt
        cols = tuple(range(nxt, nxt + n))
        nxt += n
        return cols

    out = take(size.out_width)
    q, key, vp, ho, rk, lq, lk = [], [], [], [], [], [], []
    for _ in range(L):
        q.append(tuple(take(k) for _ in range(H)))
        key.append(tuple(take(k) for _ in range(H)))
        vp.append(tuple(take(c) for _ in range(H)))
        ho.append(tuple(take(c) for _ in range(H)))
        rk.append(tuple((take(c), take(1)[0]) for _ in range(H)))
        lq.append(tuple(take(1)[0] for _ in range(T)))
        lk.append(tuple((take(H * c + 1), take(1)[0]) for _ in range(T)))
    assert nxt == size.width, (nxt, size.width)
    return Layout(size, nxt, out, tuple(q), tuple(key), tuple(vp), tuple(ho), tuple(rk), tuple(lq),
                  tuple(lk))
