"""PROFS: deep metric learning with alternating projections onto feasible sets.

Can, Gürbüz & Alatan, "Deep Metric Learning with Alternating Projections onto Feasible Sets",
ICIP 2021. The feasible set of the embedding parameters ``theta`` is relaxed to sets ``C_k`` that
constrain distances only to one *representative* sample ``k_l`` per class ``l`` (Eq. 4.2).
Alternating projections onto them (Eq. 4.3) become, with ``M``-step approximate projections
(Algorithm 1)::

    repeat
        sample R = {k_l}_{l=1..L}                    # one representative per class
        repeat M times
            sample R' ⊂ R (optionally by hard negative class mining) and examples E
            theta <- theta - alpha * grad( L(theta; batch(R', E)) + lambda/2 ||theta_k - theta||^2 )
        k <- k + 1;  theta_k <- theta

The pieces, each a plug-in of the generic training loop (:func:`dmlnb.training.train`):

* :mod:`dmlnb.profs.representatives`: ``M``
  (:func:`~dmlnb.profs.representatives.projection_period`), the batches built around the
  representatives with hard negative class mining
  (:class:`~dmlnb.profs.representatives.RepresentativeSampler`) and SoftTriple's cluster centres as
  representatives (:class:`~dmlnb.profs.representatives.CenterRepresentatives`);
* :mod:`dmlnb.profs.proximal`: the gradient of ``lambda/2 ||theta - theta_k||^2`` (Eq. 4.7,
  :class:`~dmlnb.profs.proximal.ProximalHook`) and SoftTriple's every-iteration variant
  (:class:`~dmlnb.profs.proximal.LaggedProximalHook`);
* :mod:`dmlnb.profs.representative_pairs`: the pair-based losses restricted to the pairs of the
  representatives (Sec. 5.3, :class:`~dmlnb.profs.representative_pairs.RepresentativePairs`);
* :mod:`dmlnb.profs.timing`: :class:`~dmlnb.profs.timing.TimedSampler`, the seconds a sampler
  spends on its bookkeeping (the cost of HNCM, Sec. 5.4).

The book's chapter on the paper is :mod:`dmlnb.experiments.profs`.
"""
