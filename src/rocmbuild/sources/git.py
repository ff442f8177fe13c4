"""Git sources: a bare mirror per URL in ``<cache>/git/`` (cloned once, fetched again only when
the pinned commit is not in it), a local clone checked out at the pinned commit, the selected
submodules each from the mirror of its own URL, and the tree left without ``.git``; the
commit's date for SOURCE_DATE_EPOCH."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from rocmbuild.core import fsutil, log
from rocmbuild.core.errors import FetchError
from rocmbuild.core.log import redact
from rocmbuild.core.run import run as sh
from rocmbuild.sources.retry import retry


def git_epoch(repo: Path, commit: str, log_path: Path) -> int | None:
    """``commit``'s committer time (seconds since the epoch), read from ``repo`` (the cached
    mirror: the build tree has no ``.git``)."""
    res = sh(["git", "-C", str(repo), "log", "-1", "--format=%ct", commit], env=_git_env(),
             log_path=log_path, capture=True, check=False)
    out = res.output.strip().splitlines()
    return int(out[-1]) if res.returncode == 0 and out and out[-1].isdigit() else None


def _git_env() -> dict[str, str]:
    env = dict(os.environ)
    env["GIT_TERMINAL_PROMPT"] = "0"
    return env


def mirror_path(url: str, cache: Path) -> Path:
    """The cached bare mirror of ``url``: one per URL, shared by every recipe and submodule."""
    return cache / "git" / hashlib.sha256(url.encode()).hexdigest()[:16]


def _mirror(url: str, commit: str, cache: Path, env: dict[str, str], log_path: Path,
            what: str) -> Path:
    """The mirror of ``url`` holding ``commit``: cloned once, fetched again only when the commit
    is not in it yet. ``what`` names the recipe key for messages (``source.url``)."""
    mirror = mirror_path(url, cache)

    def git(*args: str, check: bool = True) -> int:
        return sh(["git", *args], env=env, log_path=log_path, check=check).returncode

    if not (mirror / "HEAD").exists():
        mirror.parent.mkdir(parents=True, exist_ok=True)
        tmp = mirror.with_name(f".clone-{mirror.name}-{os.getpid()}")

        def clone() -> int:
            shutil.rmtree(tmp, ignore_errors=True)  # a failed attempt leaves a partial clone
            return git("clone", "--mirror", "--quiet", url, str(tmp))

        log.info(f"  cloning {redact(url)} into the cache (once per URL; large repositories "
                 "take minutes)")
        try:
            retry(f"git clone {url} ({what})", clone, mirror.parent)
            os.replace(tmp, mirror)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def present() -> bool:
        return git("-C", str(mirror), "cat-file", "-e", f"{commit}^{{commit}}", check=False) == 0

    if not present():
        log.info(f"  fetching {redact(url)}: {commit[:12]} is not in the cached mirror yet")
        retry(f"git fetch {url} ({what})",
               lambda: git("-C", str(mirror), "fetch", "--quiet", "origin", "+refs/*:refs/*"),
               mirror)
        if not present():
            raise FetchError(
                f"{url}: commit {commit} not found",
                hint="check source.commit in the recipe (a full 40-hex sha that exists upstream)"
                if what == "source.url" else
                "the superproject pins a submodule commit its URL does not have; check "
                "source.commit and the submodule's URL in .gitmodules",
            )
    fsutil.touch(mirror)  # its last use, for `cache prune`
    return mirror


def resolve_url(parent: str, url: str) -> str:
    """A submodule URL from .gitmodules, a relative one (``../x.git``, ``./x``) resolved against
    the superproject's URL as git does (each ``../`` drops one path component)."""
    if not url.startswith(("./", "../")):
        return url
    base = parent.rstrip("/")
    rest = url
    while rest.startswith(("./", "../")):
        if rest.startswith("./"):
            rest = rest[2:]
            continue
        rest = rest[3:]
        cut = max(base.rfind("/"), base.rfind(":") if "://" not in base else -1)
        if cut <= 0 or base[:cut].endswith(":/"):
            raise FetchError(f"{redact(url)}: a relative submodule URL that leaves "
                             f"{redact(parent)}", hint="fix the submodule URL in .gitmodules")
        base = base[:cut + 1] if base[cut] == ":" else base[:cut]  # host:path keeps its ':'
    sep = ":" if base.endswith(":") else "/"
    return f"{base.rstrip(':')}{sep}{rest}" if rest else base


def git_checkout(
    url: str, commit: str, submodules: tuple[str, ...], cache: Path, dest: Path, log_path: Path
) -> Path:
    """A fresh checkout of ``commit`` at ``dest``, from a per-URL mirror in the cache; each
    submodule (recursively for ``*``) from its own per-URL mirror in the same cache. The tree
    is left without ``.git`` (see ``_export``)."""
    env = _git_env()

    def git(*args: str, check: bool = True) -> int:
        return sh(["git", *args], env=env, log_path=log_path, check=check).returncode

    mirror = _mirror(url, commit, cache, env, log_path, "source.url")
    git("clone", "--quiet", "--no-checkout", str(mirror), str(dest))
    git("-C", str(dest), "remote", "set-url", "origin", url)
    git("-C", str(dest), "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach",
        commit)
    if submodules:
        which = "all, recursively" if "*" in submodules else ", ".join(submodules)
        known = _gitmodules(dest, env, log_path)
        for sub in submodules:
            if sub != "*" and sub not in known:
                raise FetchError(
                    f"{url} @ {commit[:12]}: submodules: {sub!r} is not a submodule of this "
                    f"commit (its .gitmodules has: {', '.join(known) or 'none'})",
                    hint="fix source.submodules (or the variant's submodules) in the recipe",
                )
        log.info(f"  updating submodules ({which}) from their cached mirrors")
        _submodules(dest, url, None if "*" in submodules else submodules, cache, env, log_path,
                    f"{url} @ {commit[:12]}")
    _export(dest)
    return dest


def _submodules(tree: Path, parent_url: str, only: tuple[str, ...] | None, cache: Path,
                env: dict[str, str], log_path: Path, where: str) -> None:
    """Check out the submodules of ``tree`` (``only`` these paths; None: all, recursively), each
    from the mirror of its URL: the superproject's ``submodule.<name>.url`` is pointed at the
    mirror for the update, so nothing is fetched from upstream once the mirror holds the
    pinned commit (a cut network then still builds)."""

    def git(*args: str) -> str:
        return sh(["git", *args], env=env, log_path=log_path, capture=True).output

    for name, path, raw_url in _gitmodule_entries(tree, env, log_path):
        if only is not None and path not in only:
            continue
        line = git("-C", str(tree), "ls-tree", "HEAD", "--", path).split()
        if len(line) < 3 or line[1] != "commit":
            continue  # listed in .gitmodules but no gitlink at this commit: git skips it too
        pinned = line[2]
        url = resolve_url(parent_url, raw_url)
        try:
            mirror = _mirror(url, pinned, cache, env, log_path, f"submodule {path}")
        except FetchError as exc:
            raise FetchError(
                f"{where}: submodule {path} from {redact(url)}: {exc.message}",
                hint="check that the submodule URL is reachable (a mirror must carry it), or "
                "build a variant that does not need it: a variant's `submodules = [...]` "
                "narrows the source's list",
            ) from exc
        git("-C", str(tree), "config", f"submodule.{name}.url", str(mirror))
        git("-C", str(tree), "-c", "protocol.file.allow=always", "submodule", "update",
            "--init", "--quiet", "--", path)
        git("-C", str(tree), "config", f"submodule.{name}.url", url)
        if only is None:
            _submodules(tree / path, url, None, cache, env, log_path, where)


def _export(tree: Path) -> None:
    """Drop ``.git`` from the checkout and its submodules: the build tree is a plain tree, like
    an sdist. A build that sees ``.git`` may run git against the network (flash-attn's setup.py
    runs ``git submodule update --init`` for CK and cutlass when the tree has one); the pin is
    in the plan and the provenance instead."""
    for root, dirs, files in os.walk(tree):
        if ".git" in dirs:
            dirs.remove(".git")
            git_dir = os.path.join(root, ".git")
            if os.path.islink(git_dir):
                os.unlink(git_dir)
            else:
                shutil.rmtree(git_dir)
        if ".git" in files:  # a submodule's gitfile ("gitdir: ../.git/modules/x")
            os.unlink(os.path.join(root, ".git"))


def _gitmodules(tree: Path, env: dict[str, str], log_path: Path) -> dict[str, str]:
    """Submodule path -> URL (user:password masked), from the checked-out .gitmodules."""
    return {path: redact(url) for _, path, url in _gitmodule_entries(tree, env, log_path)}


def _gitmodule_entries(tree: Path, env: dict[str, str], log_path: Path
                       ) -> list[tuple[str, str, str]]:
    """(name, path, url) of each submodule in the checked-out .gitmodules (none without one)."""
    if not (tree / ".gitmodules").is_file():
        return []
    res = sh(["git", "-C", str(tree), "config", "-f", ".gitmodules", "--get-regexp",
              r"^submodule\..*\.(path|url)$"], env=env, log_path=log_path, capture=True,
             check=False)
    names: dict[str, dict[str, str]] = {}
    for line in res.output.splitlines():
        key, _, value = line.partition(" ")
        name, _, what = key[len("submodule."):].rpartition(".")
        names.setdefault(name, {})[what] = value
    return [(name, v["path"], v.get("url", "")) for name, v in names.items()
            if "path" in v and v.get("url")]
