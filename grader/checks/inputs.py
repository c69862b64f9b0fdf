"""Every input a check feeds a submission, drawn from one seeded generator.

Values are zero-mean unit-variance (uniform [0, 1) inputs hide real bugs: see the
grading-methodology notes). Shapes come from the generator too, with all
dimensions distinct so that a wrong transpose cannot hide behind a square shape.
Values are drawn in float64 and rounded once to the requested dtype, so the
float64 reference sees exactly the tensors the submission got.
"""
from __future__ import annotations

import torch


class InputFactory:
    """``smallest=True`` gives every check its smallest case (the least of each range of sizes):
    what ``attn-grader check --only`` shows first, so a failure is as small as it gets."""

    def __init__(self, seed: int, smallest: bool = False):
        self.gen = torch.Generator().manual_seed(seed)
        self.smallest = smallest

    def randn(self, *shape: int, dtype: torch.dtype = torch.float32, std: float = 1.0) -> torch.Tensor:
        return (torch.randn(shape, generator=self.gen, dtype=torch.float64) * std).to(dtype)

    def uniform(self, lo: float, hi: float) -> float:
        return lo + (hi - lo) * float(torch.rand((), generator=self.gen, dtype=torch.float64))

    def randint(self, lo: int, hi: int) -> int:
        """An integer in [lo, hi]."""
        drawn = int(torch.randint(lo, hi + 1, (), generator=self.gen))
        return lo if self.smallest else drawn

    def distinct(self, count: int, lo: int, hi: int, avoid: tuple = ()) -> list[int]:
        """``count`` distinct integers in [lo, hi], none of them in ``avoid``."""
        pool = [n for n in range(lo, hi + 1) if n not in avoid]
        order = torch.randperm(len(pool), generator=self.gen)[:count]
        if self.smallest:  # still distinct (a transpose must not hide), in the drawn order
            small = pool[:count]
            return [small[r] for r in torch.argsort(order).argsort().tolist()]
        return [pool[int(i)] for i in order]

    def perm(self, n: int) -> torch.Tensor:
        return torch.randperm(n, generator=self.gen)

    def bool_mask(self, *shape: int, keep: float = 0.6) -> torch.Tensor:
        """True = may attend; every row keeps at least one key (a fully masked row is a separate check)."""
        mask = torch.rand(shape, generator=self.gen) < keep
        first = torch.randint(0, shape[-1], shape[:-1], generator=self.gen)
        mask.scatter_(-1, first.unsqueeze(-1), True)
        if mask.all():  # a mask that hides nothing tests nothing
            mask.view(-1, shape[-1])[0, (int(first.flatten()[0]) + 1) % shape[-1]] = False
        return mask

    def float_mask(self, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """An additive mask: non-zero everywhere (so it cannot pass for a boolean one), -inf on some keys."""
        values = self.randn(*shape, dtype=torch.float64) * 2.0
        values = torch.where(values.abs() < 0.1, torch.full_like(values, 0.5), values)
        hidden = ~self.bool_mask(*shape, keep=0.75)
        return values.masked_fill(hidden, float("-inf")).to(dtype)

    def readout_values(self, *batch: int, keys: int, width: int | None = None) -> torch.Tensor:
        """Values (*batch, keys, width) from which the parent reads the weights back exactly.

        Dense random values of a drawn width, like any other call's: an identity matrix, or a
        width always ``keys + 3``, would tell the submission that this call is a probe. The width
        exceeds ``keys`` (full row rank: ``weights_from`` inverts them), as it does in about half
        of the ordinary calls. ``width`` keeps one width across the calls of one read-out.
        """
        width = self.readout_width(keys) if width is None else width
        return self.randn(*batch, keys, width, dtype=torch.float64)

    def readout_width(self, keys: int) -> int:
        """A value width for ``readout_values``: 1 to 6 more columns than keys."""
        return keys + self.randint(1, 6)


def weights_from(output: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """The (..., L, S) weights W with output = W @ values (values has full row rank)."""
    return output.double() @ torch.linalg.pinv(values.double())
