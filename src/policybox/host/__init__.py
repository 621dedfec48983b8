"""The host's side of the cells: start them (``launcher``, ``zygote``), hold an episode's cells as one
``CellPool`` (``process_pool``, ``inline_pool``) stepped by deadlines and time banks, watch their
sandbox and resources (``sandbox``, ``cgroup``, ``budget``, ``verify``), and clean up after them."""
