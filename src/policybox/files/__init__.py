"""A submission's files, at engine level: kept as versions, packed for other machines, and a
version's setup script run once in a cell with what it made harvested. ``policybox run`` needs no league."""
