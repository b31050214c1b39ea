"""Experiment glue of the book's chapters: presets per profile, runners that train or reload runs,
and the analyses behind each chapter's figures, one module per paper (imported explicitly; each
notebook imports its module as ``<chapter>_chapter``):

* :mod:`dmlnb.experiments.protocol` — the protocol chapter's baselines;
* :mod:`dmlnb.experiments.easy_positive` — Xuan, Stylianou & Pless, WACV 2020;
* :mod:`dmlnb.experiments.facility_location` — Song, Jegelka, Rathod & Murphy, CVPR 2017;
* :mod:`dmlnb.experiments.discriminative` — Do et al., CVPR 2019;
* :mod:`dmlnb.experiments.profs` — Can, Gürbüz & Alatan, ICIP 2021;
* :mod:`dmlnb.experiments.ssdml` — Dutta, Harandi & Sekhar, AAAI 2021.

:mod:`dmlnb.experiments.baseline_losses` builds the baseline losses several chapters share (the
semi-hard triplet, lifted structure and N-pair losses with their papers' settings);
:mod:`dmlnb.experiments.settings` reads a chapter's per-profile experiment settings; the papers'
reported tables are the CSV files in ``reported/`` (read by :func:`dmlnb.reported.reported_table`).
"""
