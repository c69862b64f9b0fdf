"""The sentences of the causes ``diagnosis.py`` names by what differs and where (a constant ratio,
the scale read from the outputs, the rows that are wrong, an overflow, a cut gradient), and the
family each is charged to. Part of attention's catalogue (``variants.ATTENTION``), so every task
that extends it can explain them; this module imports nothing that imports it back.
"""
from ..i18n import N_

# Each kind's sentence where no case's details say more, and the family it is charged to (the
# first the task has; none: wherever it shows). A crash's name carries its property
# ("crash_on:dtype=float64") and is charged wherever it shows.
TEXTS = {
    "overflow_in_softmax": N_("your softmax overflows with large scores (exp() of them is inf): subtract each row's "
                              "maximum before exp, or use torch.softmax"),
    "overflow_in_backward": N_("your backward overflows with float64 scores beyond float32's range: it runs in "
                               "float32 inside (a .float(), or a tensor created without dtype=) or takes exp() of "
                               "the scores without subtracting each row's maximum"),
    "gradient_cut": N_("the path from an input to your output is cut (.detach(), .numpy(), torch.tensor(...) or "
                       ".item() on an intermediate), so no gradient reaches that input: stay in torch operations"),
    "output_dtype": N_("your output's dtype is not the inputs': return the result in query.dtype (cast back with "
                       ".to(query.dtype) if you compute in another dtype inside)"),
    "constant_ratio": N_("your values are a constant multiple of the right ones: a factor that does not belong"),
    "effective_scale": N_("your scores are scaled by the wrong factor"),
    "padded_rows_wrong": N_("your outputs are wrong only at padded target positions: those rows must be zero"),
    "last_rows_wrong": N_("your output is wrong only in the last query rows: the last tile of queries is cut short"),
    "future_rows_wrong": N_("your causal mask is not the top-left ones(L, S).tril()"),
    "some_batches_wrong": N_("your output is wrong only for some batch elements or heads"),
}
HOMES = {
    "overflow_in_softmax": ("stability",), "overflow_in_backward": ("stability",), "gradient_cut": ("grad",),
    "output_dtype": ("dtype",), "effective_scale": ("scale", "output"), "padded_rows_wrong": ("padding", "output"),
    "last_rows_wrong": ("output",), "future_rows_wrong": ("causal",), "some_batches_wrong": ("batch", "output"),
}
