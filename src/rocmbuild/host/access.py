"""Who may use the GPU devices: group membership from a root's /etc/group and /etc/passwd (a
fixture tree's, or this machine's with the process's own groups), and whether a user can read
and write a device node. ``doctor`` turns these into its access checks."""

from __future__ import annotations

import grp
import os
import stat
from pathlib import Path


def group_db(root: Path) -> tuple[dict[str, tuple[int, list[str]]], bool]:
    """name -> (gid, members) from <root>/etc/group; (db, readable)."""
    f = root / "etc/group"
    try:
        text = f.read_text(errors="replace")
    except OSError:
        return {}, False
    db: dict[str, tuple[int, list[str]]] = {}
    for line in text.splitlines():
        parts = line.split(":")
        if len(parts) >= 4 and parts[2].isdigit():
            db[parts[0]] = (int(parts[2]), [m for m in parts[3].split(",") if m])
    return db, True


def user_groups(root: Path, user: str, db: dict[str, tuple[int, list[str]]],
                 real: bool) -> set[str]:
    names = {g for g, (_gid, members) in db.items() if user in members}
    by_gid = {gid: g for g, (gid, _m) in db.items()}
    try:
        for line in (root / "etc/passwd").read_text(errors="replace").splitlines():
            parts = line.split(":")
            if len(parts) > 3 and parts[0] == user and parts[3].isdigit():
                names.add(by_gid.get(int(parts[3]), ""))
    except OSError:
        pass
    if real:  # this process's actual supplementary groups (newgrp, sssd, ...)
        for gid in os.getgroups():
            try:
                names.add(by_gid.get(gid) or grp.getgrgid(gid).gr_name)
            except KeyError:
                pass
    names.discard("")
    return names


def can_rw(path: Path, real: bool, user: str, groups: set[str],
            db: dict[str, tuple[int, list[str]]]) -> bool:
    if real:
        return os.access(path, os.R_OK | os.W_OK)
    st = path.stat()
    mode = st.st_mode
    if mode & stat.S_IROTH and mode & stat.S_IWOTH:
        return True
    gname = next((g for g, (gid, _m) in db.items() if gid == st.st_gid), None)
    return bool(mode & stat.S_IRGRP and mode & stat.S_IWGRP and gname in groups)
