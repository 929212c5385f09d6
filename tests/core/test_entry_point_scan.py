"""The one scan of the installed distributions' ``cloudtrain`` entry points
(``launch.platform.group_entry_points``): what ``importlib.metadata`` finds, read faster."""
import sys
import zipfile
from importlib import metadata
from importlib.machinery import PathFinder

from cloudtrain.launch import platform


def dist(site, dirname, name, entry_points=None):
    d = site / dirname
    d.mkdir(parents=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    if entry_points is not None:
        (d / "entry_points.txt").write_text(entry_points)


def importlib_answer(path):
    """``importlib.metadata``'s own: the first distribution of each name, its ``cloudtrain`` group."""
    seen, out = set(), []
    for d in metadata.distributions(path=path):
        key = platform._normalized(d.metadata["Name"])
        if key not in seen:
            seen.add(key)
            out += [(ep.name, ep.value) for ep in d.entry_points if ep.group == "cloudtrain"]
    return out


def test_the_scan_reads_what_importlib_metadata_reads(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    dist(first, "Zeta_Plugin-1.0.dist-info", "Zeta_Plugin",
         "# a comment\n[console_scripts]\nzeta = zeta:main\n\n[cloudtrain]\n  zeta = zeta_plugin.plugin  \n"
         "# another comment\nextra=zeta_plugin.extra\n[other]\nnot = this\n")
    dist(first, "alpha.plugin-2.0.dist-info", "alpha.plugin", "[cloudtrain]\nalpha = alpha.plugin\n")
    dist(first, "no_entry_points-1.0.dist-info", "no-entry-points")
    dist(first, "legacy-0.1-py3.8.egg-info", "legacy", "[cloudtrain]\nlegacy = legacy.plugin\n")
    # the same distributions again, later on the path: importlib.metadata takes the first of a name
    dist(second, "zeta.plugin-0.9.dist-info", "zeta.plugin", "[cloudtrain]\nold = zeta_plugin.old\n")
    dist(second, "beta-1.0.dist-info", "beta", "[cloudtrain]\nbeta = beta.plugin\n")
    path = [str(first), str(tmp_path / "missing"), str(second)]
    found = platform._scan_entry_points(path, [PathFinder])
    assert sorted((name, value) for _, name, value in found) == sorted(importlib_answer(path))
    assert {(d, n) for d, n, _ in found} == {("zeta_plugin", "zeta"), ("zeta_plugin", "extra"),
                                             ("alpha_plugin", "alpha"), ("legacy", "legacy"), ("beta", "beta")}


def test_what_the_scan_cannot_see_is_left_to_importlib_metadata(tmp_path):
    site = tmp_path / "site"
    dist(site, "a-1.0.dist-info", "a", "[cloudtrain]\na = a.plugin\n")
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("b-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: b\nVersion: 1.0\n")
        z.writestr("b-1.0.dist-info/entry_points.txt", "[cloudtrain]\nb = b.plugin\n")
    assert platform._scan_entry_points([str(site)], [PathFinder]) == (("a", "a", "a.plugin"),)
    assert platform._scan_entry_points([str(site), str(archive)], [PathFinder]) is None  # a zip on the path

    class Finder:  # a meta path finder with distributions of its own
        @staticmethod
        def find_distributions(context=None):
            return iter(())
    assert platform._scan_entry_points([str(site)], [Finder, PathFinder]) is None
    egg = tmp_path / "eggs"
    (egg / "c-1.0-py3.11.egg" / "EGG-INFO").mkdir(parents=True)
    assert platform._scan_entry_points([str(egg)], [PathFinder]) is None


def test_this_installation_scans_as_importlib_metadata_reads_it():
    assert platform._scan_entry_points(sys.path, sys.meta_path) is not None  # the fast path is taken here
    eps = metadata.entry_points().select(group="cloudtrain")
    assert platform.installed_entry_points() == tuple((ep.name, ep.value) for ep in eps)
