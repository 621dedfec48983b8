"""A policy that litters its scratch folder the ways that used to break the host's cleanup, then plays noop:
a chain of nested folders far deeper than a recursive removal survives, a crowd of empty files, and
a folder (with files) whose mode it set to 000."""

import os

from mettagrid.policy.noop import NoopPolicy

DEPTH = 3_000
FILES = 20_000


class Litter(NoopPolicy):
    def __init__(self, policy_env_info, depth=DEPTH, files=FILES, **kwargs):
        super().__init__(policy_env_info)
        here = os.getcwd()  # the cell's scratch folder
        fd = os.open(here, os.O_RDONLY | os.O_DIRECTORY)
        for _ in range(int(depth)):  # relative to the last level: deeper than PATH_MAX allows as a path
            os.mkdir("deeper", dir_fd=fd)
            child = os.open("deeper", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        os.close(fd)
        os.mkdir("crowd")
        for i in range(int(files)):
            os.close(os.open(f"crowd/{i}", os.O_CREAT | os.O_WRONLY, 0o600))
        os.mkdir("locked")
        for name in ("a", "b"):
            with open(f"locked/{name}", "w") as file:
                file.write("secret")
            os.chmod(f"locked/{name}", 0)
        os.chmod("locked", 0)
        print(f"littered {here}: {depth} levels, {files} files, a locked folder", flush=True)
