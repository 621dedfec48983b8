"""The league's statistics, as pure functions over numpy arrays: the sequential A/B test ``versus``
decides by (``sequential``), and the final ranking -- placings encoded as Plackett-Luce stages
(``placings``), their fit and bootstrap, groups and rank probabilities (``plackett_luce``). Nothing
here plays an episode or reads a folder."""
