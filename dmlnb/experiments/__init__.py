"""Experiment glue of the book's chapters: presets per profile, runners that train or reload runs,
and the analyses behind each chapter's figures, one module per paper (imported explicitly):

* :mod:`dmlnb.experiments.easy_positive` — Xuan, Stylianou & Pless, WACV 2020;
* :mod:`dmlnb.experiments.discriminative` — Do et al., CVPR 2019.
"""
