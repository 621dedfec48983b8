"""The league's statistics, as pure functions over numpy arrays: the sequential A/B test ``versus``
decides by (``sequential``), and the final ranking's Plackett-Luce fit with its bootstrap
(``plackett_luce``). Nothing here plays an episode or reads a folder."""
