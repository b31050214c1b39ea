"""The chapter's verdicts on Figure 4 and its own comparisons, by the book's rule
(:mod:`dmlnb.reporting`) from per-seed numbers (:class:`ClaimInputs`): the group-size claims of
Sec. 6.1 (:func:`group_size_claims`), the comparisons the chapter adds
(:func:`our_measurement_claims`) and EPSHN's two semi-hard rules (:func:`semihard_claims`). A
comparison with a side on collapsed runs is not tested (:data:`COLLAPSED`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from dmlnb.experiments.easy_positive.diagnostics import COLLAPSED, is_collapsed
from dmlnb.experiments.easy_positive.spec import ALL_METHODS, canonical_method
from dmlnb.records import RunRecord
from dmlnb.reporting import (
    Claim,
    Verdict,
    compare,
    group_verdict,
    interior_optimum,
    not_tested,
    unless_degenerate,
)
from dmlnb.runs import Run

__all__ = [
    "EASY",
    "HARD",
    "TIGHT",
    "PTS",
    "pct",
    "ClaimInputs",
    "collapsed_sides",
    "collapsed_note",
    "group_size_claims",
    "interior_claims",
    "group_size_optima",
    "our_measurement_claims",
    "SEMIHARD_LABELS",
    "SAME_NEGATIVES",
    "identical_histories",
    "semihard_values",
    "semihard_claims",
]

EASY: tuple[str, ...] = ("EP", "EPHN", "EPSHN")
HARD: tuple[str, ...] = ("HP", "HPHN", "BA")
TIGHT: tuple[str, ...] = ("BA", "HP", "N-pair")  # the embeddings that pull whole classes together
PTS = dict(scale=100.0, unit=" pts")  # Recall@1 and accuracies: fractions shown in points


@dataclass(frozen=True)
class ClaimInputs:
    """What :func:`build_claims` judges, as per-seed numbers (fractions, as in run records).

    * ``recall``: :func:`group_size_points` (Recall@1 per method, group size and seed);
    * ``analysis``: :data:`FIGURE_METHODS` -> each seed's :func:`summarize_statistics`;
    * ``table1``: a cell label (dataset, backbone, size) -> Table 1 method -> Recall@1 per seed;
    * ``key_group_size``: the n of the key comparison;
    * ``images_per_class``: training images per class of our dataset (caps the group size);
    * ``collapsed``: (canonical method, n) whose every seed is collapsed in :func:`loss_curves`;
    * ``profile`` and ``paper_status``: :func:`paper_run_status` of the paper profile's Table 2
      and Table 3 runs; ``table2``: Table 2 column (``"CUB"``...) -> our EPSHN Recall@1 per run,
      and ``table3``: our EPSHN256 Hotels-50K Recall@1 per run, if run;
    * ``semihard``: EPSHN at the key group size under each semi-hard rule
      (:func:`semihard_comparison`): rule -> metric -> value per seed, ``semihard_collapsed``: the
      rules with a collapsed run, and ``semihard_same``: the seeds whose two runs trained alike
      (:func:`identical_histories`).
    """

    recall: Mapping[str, Mapping[int, Sequence[float]]]
    analysis: Mapping[str, Sequence[Mapping[str, float]]]
    table1: Mapping[str, Mapping[str, Sequence[float]]]
    key_group_size: int
    images_per_class: int
    profile: str
    paper_status: pd.DataFrame | None = None
    table2: Mapping[str, Sequence[float]] = field(default_factory=dict)
    table3: Sequence[float] = ()
    collapsed: frozenset = frozenset()  # (canonical method, n) whose every seed sat at ln 2
    semihard: Mapping[str, Mapping[str, Sequence[float]]] = field(default_factory=dict)
    semihard_collapsed: tuple[str, ...] = ()
    semihard_same: tuple[int, ...] = ()
    #: MAP@R per method, group size and seed (:func:`group_size_points`), when measured
    map_at_r: Mapping[str, Mapping[int, Sequence[float]]] | None = None


def pct(values: Sequence[float]) -> str:
    return f"{100 * float(np.mean(values)):.1f}"


def collapsed_sides(collapsed: frozenset, sides: Mapping[str, Sequence[int]]) -> list[str]:
    """The sides of a comparison that rest on collapsed runs: ``sides`` maps a side's name to the
    group sizes its values come from (a side is collapsed when any of its (method, n) groups is)."""
    return [
        name
        for name, ns in sides.items()
        if any(
            (canonical_method(name, n) if name in ALL_METHODS else name, n) in collapsed for n in ns
        )
    ]


def collapsed_note(collapsed: frozenset, groups: Sequence[tuple[str, int]]) -> str:
    """``"; rests on collapsed runs: ..."`` for the (method, n) groups of a claim whose runs sat
    at ln 2 (see :func:`loss_curves`), else ``""``."""
    hit = sorted(
        {(canonical_method(m, n), n) for m, n in groups if (canonical_method(m, n), n) in collapsed}
    )
    return (
        ("; rests on collapsed runs (loss at ln 2): " + ", ".join(f"{m} n = {n}" for m, n in hit))
        if hit
        else ""
    )


def group_size_claims(
    recall: Mapping[str, Mapping[int, Sequence[float]]],
    key: int,
    images_per_class: int,
    collapsed: frozenset = frozenset(),
) -> list[Claim]:
    """Figure 4 and Sec. 6.1: "an increase in performance for all the Easy Positive approaches and
    a decrease for the hard positive approaches" as n grows; the contrast itself (per-seed change
    from the smallest to the key n, easy against hard); the optimum at n = 16 of
    the paper's grid."""
    grid = sorted(recall["EP"])
    lo = grid[0]
    sec61 = (
        "Sec. 6.1 on Figure 4 (Cars196, ResNet-18): 'an increase in performance for all the "
        "Easy Positive approaches'"
    )
    sec61_hp = (
        "Sec. 6.1 on Figure 4 (Cars196, ResNet-18): '... and a decrease for the hard "
        "positive approaches'"
    )
    out = []
    for m in (*EASY, "HP", "HPHN"):
        rises = m in EASY
        a, b = (recall[m][key], recall[m][lo]) if rises else (recall[m][lo], recall[m][key])
        low_name = f"n = {lo}" + (" (N-pair)" if canonical_method(m, lo) == "N-pair" else "")
        bad = [f"{m} n = {n}" for n in (lo, key) if (canonical_method(m, n), n) in collapsed]
        out.append(
            Claim(
                f"{m} {'improves' if rises else 'degrades'} as the group size grows (n = {lo} -> "
                f"{key})",
                sec61 if rises else sec61_hp,
                f"R@1 (%): {low_name} {pct(recall[m][lo])} -> n = {key} {pct(recall[m][key])}"
                + collapsed_note(collapsed, [(m, lo), (m, key)]),
                unless_degenerate(compare(a, b, **PTS), bad, COLLAPSED),
            )
        )
    change = {
        m: [hi - lo_ for hi, lo_ in zip(recall[m][key], recall[m][lo])]
        for m in (*EASY, "HP", "HPHN")
    }
    v, _ = group_verdict(
        {m: change[m] for m in EASY},
        {m: change[m] for m in ("HP", "HPHN")},
        **PTS,
        degenerate=collapsed_sides(collapsed, {m: (lo, key) for m in change}),
        degenerate_what=COLLAPSED,
        breakdown=True,
    )
    out.append(
        Claim(
            f"The contrast: every easy-positive variant gains more R@1 from n = {lo} to n = {key} "
            "than HP and HPHN",
            "Sec. 6.1: the easiest positive becomes more similar and the hardest less similar as "
            "n grows, so easy-positive approaches rise while hard-positive approaches fall",
            "change of R@1 per seed (points): "
            + ", ".join(f"{m} {100 * float(np.mean(change[m])):+.1f}" for m in change)
            + collapsed_note(collapsed, [(m, n) for m in change for n in (lo, key)]),
            v,
        )
    )
    return out + interior_claims(recall, images_per_class, collapsed)


def interior_claims(
    recall: Mapping[str, Mapping[int, Sequence[float]]],
    images_per_class: int,
    collapsed: frozenset = frozenset(),
) -> list[Claim]:
    """Sec. 6.1 and 6.3: Recall@1 peaks at n = 16 and drops beyond it, judged per easy-positive
    variant when the grid goes past 16, else not tested (our grid cannot have 16 inside)."""
    grid = sorted(recall["EP"])
    out = []
    claim = (
        "Recall@1 peaks at an interior group size (n = 16 of the paper's 2 to 64) and drops "
        "beyond it"
    )
    evidence = (
        "Sec. 6.1 (drops for most methods when n > 16) and Sec. 6.3 (the optimal group "
        "size is 16 on CUB and Cars)"
    )
    if 16 in grid and grid[-1] > 16:
        for m in EASY:
            bad = [n for n in grid if (canonical_method(m, n), n) in collapsed]
            v, _ = interior_optimum(recall[m], **PTS, degenerate=bad, degenerate_what=COLLAPSED)
            out.append(
                Claim(
                    f"{m}: {claim}",
                    evidence,
                    f"R@1 (%) at n = {grid}: " + ", ".join(pct(recall[m][n]) for n in grid),
                    v,
                )
            )
    else:
        out.append(
            Claim(
                claim,
                evidence,
                f"group sizes tried: {grid}",
                not_tested(
                    f"our grid stops at n = {grid[-1]} (a training class has {images_per_class} "
                    "images), so n = 16 cannot be an interior value; the interior-optimum "
                    "verdicts of our own grid are in the Figure 4 section"
                ),
            )
        )
    return out


def our_measurement_claims(
    inputs: "ClaimInputs", map_at_r: Mapping[str, Mapping[int, Sequence[float]]] | None = None
) -> list[Claim]:
    """Comparisons the chapter adds (not stated in the paper's text), judged by the same rule:
    a reading of Figure 4 (easy beats HP, HPHN and BA at the key n), the same at MAP@R, EP variants
    at the key n against N-pair (the paper's baseline in Figs 2, 3, 5 and Table 1), and batch all
    falling with n (implied by Sec. 6.1 calling N-pair 'the best version of Batch All').
    ``map_at_r`` (:func:`group_size_points` of MAP@R) is optional: without it the MAP@R
    comparison is left out."""
    key, recall, col = inputs.key_group_size, inputs.recall, inputs.collapsed
    lo = min(recall["EP"])
    at = lambda src, methods, n: {m: src[m][n] for m in methods}  # noqa: E731
    out = []
    bad = collapsed_sides(col, {m: (key,) for m in EASY + HARD})
    for metric, src in (("R@1", recall), ("MAP@R", map_at_r)) if map_at_r else (("R@1", recall),):
        v, _ = group_verdict(
            at(src, EASY, key),
            at(src, HARD, key),
            **PTS,
            degenerate=bad,
            degenerate_what=COLLAPSED,
            breakdown=True,
        )
        out.append(
            Claim(
                f"{', '.join(EASY)} beat {', '.join(HARD)} at n = {key} in {metric}",
                "our reading of Figure 4 (the text does not state it)"
                if metric == "R@1"
                else "none (the paper reports no MAP@R)",
                f"{metric} (%) at n = {key}: "
                + ", ".join(f"{m} {pct(src[m][key])}" for m in EASY + HARD)
                + collapsed_note(col, [(m, key) for m in EASY + HARD]),
                v,
            )
        )
    npair = recall["EP"][lo]  # EP at n = 2 is N-pair
    v, _ = group_verdict(
        at(recall, EASY, key),
        {"N-pair": npair},
        **PTS,
        degenerate=collapsed_sides(col, {**{m: (key,) for m in EASY}, "N-pair": (lo,)}),
        degenerate_what=COLLAPSED,
        breakdown=True,
    )
    out.append(
        Claim(
            f"{', '.join(EASY)} at n = {key} beat N-pair (n = {lo}) in R@1",
            "Figs 2, 3, 5 and Table 1 compare EP variants at n = 16 with N-pair; no R@1 of this "
            "pair on Cars/ResNet-18 is stated",
            f"R@1 (%): N-pair {pct(npair)}, "
            + ", ".join(f"{m} {pct(recall[m][key])}" for m in EASY)
            + collapsed_note(col, [(m, key) for m in EASY]),
            v,
        )
    )
    out.append(
        Claim(
            f"BA degrades as the group size grows (n = {lo} -> {key})",
            "implied by Sec. 6.1: N-pair is 'the best version of Batch All and Hard Positive "
            "(group size=2)'",
            f"R@1 (%): n = {lo} (N-pair) {pct(recall['BA'][lo])} -> n = {key} "
            f"{pct(recall['BA'][key])}",
            unless_degenerate(
                compare(recall["BA"][lo], recall["BA"][key], **PTS),
                collapsed_sides(col, {"BA": (lo, key)}),
                COLLAPSED,
            ),
        )
    )
    return out + semihard_claims(
        inputs.semihard, inputs.semihard_collapsed, key, inputs.semihard_same
    )


SEMIHARD_LABELS: dict[str, str] = {
    "strict": "strict, S_an < S_ap (the paper, Sec. 3.1)",
    "inclusive": "inclusive, S_an <= S_ap (the authors' code)",
}


#: Why the strict / inclusive comparison is not a test when the two rules trained alike
#: (:func:`dmlnb.reporting.unless_degenerate`): the rules differ only on a tie, and runs with
#: identical training histories never met one that changed a choice.
SAME_NEGATIVES = "the two rules chose the same negatives in every step"


def identical_histories(a: RunRecord, b: RunRecord) -> bool:
    """Whether two runs trained alike: the same configuration and, per epoch, the same training
    loss and test and validation metrics, to the last bit (timings aside; the records' one
    definition, :meth:`~dmlnb.records.RunRecord.outcome`). The two semi-hard rules differ in the
    method specification, not the configuration, so runs of the two that give identical
    histories chose the same negatives in every step that mattered."""
    return a.outcome() == b.outcome()


def semihard_values(
    runs: Mapping[str, Sequence[Run]],
) -> tuple[dict[str, dict[str, list[float]]], tuple[str, ...], tuple[int, ...]]:
    """What :func:`semihard_claims` judges of :func:`semihard_comparison`'s runs: rule -> metric
    (R@1, and MAP@R when measured) -> value per seed (read from each record's ``best`` now), the
    rules with a collapsed run (:func:`is_collapsed`), and the seeds whose runs under the two rules
    have identical training histories (:func:`identical_histories`; runs paired in seed order)."""
    values = {
        rule: {m: [r.metrics[m] for r in rs] for m in ("R@1", "MAP@R") if m in rs[0].metrics}
        for rule, rs in runs.items()
    }
    collapsed = tuple(
        rule
        for rule, rs in runs.items()
        if any(is_collapsed("EPSHN", r.record.training_losses()) for r in rs)
    )
    same: tuple[int, ...] = ()
    if len(runs) == 2:
        first, second = runs.values()
        same = tuple(
            a.record.config["seed"]
            for a, b in zip(first, second)
            if identical_histories(a.record, b.record)
        )
    return values, collapsed, same


def semihard_claims(
    values: Mapping[str, Mapping[str, Sequence[float]]],
    collapsed: Sequence[str],
    key: int,
    same: Sequence[int] = (),
) -> list[Claim]:
    """ "EPSHN with the paper's strict semi-hard rule beats the authors' inclusive one" at group
    size ``key``, per metric of ``values`` (:func:`semihard_values`), by
    :func:`dmlnb.reporting.compare` over the seeds; not tested when a rule's runs collapsed
    (``collapsed``, :data:`COLLAPSED`), nor when every seed's two runs trained alike (``same``:
    those seeds, :data:`SAME_NEGATIVES`): the comparison never exercised the rule. ``[]`` without
    the comparison."""
    if not values:
        return []
    strict, inclusive = values["strict"], values["inclusive"]
    bad = [f"EPSHN ({rule}) n = {key}" for rule in collapsed]
    seeds = len(next(iter(strict.values())))
    alike = (
        f"identical training histories (per-epoch loss and metrics) in {len(same)} of {seeds} seeds"
        + (f" ({', '.join(map(str, same))})" if same else "")
    )
    never = [f"EPSHN n = {key}, {alike}"] if same and len(same) == seeds else []

    def judged(metric: str) -> Verdict:
        v = compare(strict[metric], inclusive[metric], **PTS)
        return (
            unless_degenerate(v, bad, COLLAPSED)
            if bad
            else unless_degenerate(v, never, SAME_NEGATIVES)
        )

    return [
        Claim(
            f"EPSHN with the strict semi-hard rule beats the inclusive rule at n = {key} in "
            f"{metric}",
            "none: the paper defines the strict rule (Sec. 3.1), the authors' code runs the "
            "inclusive one",
            f"{metric} (%): strict {pct(strict[metric])}, inclusive {pct(inclusive[metric])}"
            + (f"; {alike}" if same else "")
            + (f"; rests on collapsed runs (loss at ln 2): {', '.join(bad)}" if bad else ""),
            judged(metric),
        )
        for metric in strict
    ]


def group_size_optima(
    points: Mapping[str, Mapping[int, Sequence[float]]],
    collapsed: frozenset = frozenset(),
    scale: float = 100.0,
    unit: str = " pts",
) -> pd.DataFrame:
    """Per method of a group-size sweep (:func:`group_size_points`), the verdict of
    :func:`dmlnb.reporting.interior_optimum` ("some interior n beats both ends") with its effect,
    90% interval, runs per side and note; the only way this chapter names a best group size. A
    sweep with a collapsed group size (``collapsed``: :func:`collapsed_groups`) is not tested
    (:data:`COLLAPSED`); its row keeps the measured effect, and the note names the collapsed n."""
    rows = []
    for method, by_n in points.items():
        bad = [n for n in by_n if collapsed_sides(collapsed, {method: (n,)})]
        raw, _ = interior_optimum(by_n, scale=scale, unit=unit)
        verdict, _ = interior_optimum(
            by_n, scale=scale, unit=unit, degenerate=bad, degenerate_what=COLLAPSED
        )
        ev = raw.evidence()
        if verdict != raw:
            ev["note"] = f"{verdict.note} (measured: {raw}, {raw.note})"
        rows.append({"method": method, "interior optimum": str(verdict), **ev})
    return pd.DataFrame(rows).set_index("method")
