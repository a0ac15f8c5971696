"""Installed code is told by where it lies, not by a folder's name (installed.is_installed, and
through it usercode.is_user_path).

GIVEN a distribution installed with ``pip install --target`` into a folder with no installer's
name (``vendor``), THEN its files are library code however the job puts the folder on its path
(a wrapper's ``sys.path.insert``, as the real-world timm case's does), and a script beside that
folder, or a folder of the same name elsewhere, is the user's; an editable install's RECORD
lists no source file, so the project's code stays the user's.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

from trainprof.analysis.installed import is_installed
from trainprof.analysis.usercode import is_user_path


def _dist_info(where: Path, name: str, files: list[str]) -> None:
    """What an installer leaves beside what it installed: a .dist-info with a RECORD."""
    info = where / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    record = [*files, f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(f if "," in f else f"{f},," for f in record) + "\n")


def _judged(paths: list[Path]) -> list[bool]:
    return [is_user_path(str(p)) for p in paths]


def test_a_distribution_installed_into_a_folder_of_any_name_is_library_code(
    tmp_path: Path,
) -> None:
    proj = tmp_path / "proj"
    vendor = proj / "vendor"
    (vendor / "fastloaders" / "data").mkdir(parents=True)
    loader = vendor / "fastloaders" / "data" / "loader.py"
    loader.write_text("")
    single = vendor / "tinyutil.py"
    single.write_text("")
    _dist_info(vendor, "fastloaders", ["fastloaders/__init__.py", "fastloaders/data/loader.py"])
    _dist_info(vendor, "tinyutil", ["tinyutil.py", "../../bin/tinyutil"])
    (proj / "train.py").write_text("")
    mine = tmp_path / "elsewhere" / "fastloaders" / "data" / "loader.py"
    beside = vendor / "notes.py"  # in the folder, but no distribution's file
    paths = [loader, single, proj / "train.py", mine, beside]
    assert _judged(paths) == [False, False, True, True, True]
    # the same folder with no .dist-info: a folder's name is no evidence
    bare = tmp_path / "bare" / "vendor" / "fastloaders" / "data" / "loader.py"
    bare.parent.mkdir(parents=True)
    bare.write_text("")
    assert _judged([bare]) == [True]


def test_an_editable_install_leaves_the_projects_own_code_the_users(tmp_path: Path) -> None:
    """PEP 660: the RECORD in the site folder lists a .pth and a finder, not the sources."""
    site = tmp_path / "site"
    site.mkdir()
    _dist_info(site, "myproj", ["__editable__.myproj-1.0.pth", "__editable___myproj_finder.py"])
    src = tmp_path / "myproj" / "src" / "myproj" / "model.py"
    src.parent.mkdir(parents=True)
    src.write_text("")
    finder = site / "__editable___myproj_finder.py"
    finder.write_text("")
    assert _judged([src, finder]) == [True, False]


def test_a_site_folder_reached_through_a_link_is_installed_by_either_path(
    tmp_path: Path,
) -> None:
    purelib = Path(sysconfig.get_paths()["purelib"])
    link = tmp_path / "libs"
    link.symlink_to(purelib, target_is_directory=True)
    assert _judged([link / "pip" / "__init__.py", purelib / "pip" / "__init__.py"]) == [
        False,
        False,
    ]


def test_this_interpreters_standard_library_and_scripts_are_installed() -> None:
    paths = sysconfig.get_paths()
    for key in ("stdlib", "purelib", "scripts"):
        assert is_installed(paths[key].replace("\\", "/") + "/some_module.py"), key
    assert not is_user_path(paths["scripts"] + "/torchrun")
    assert not is_installed("/home/user/proj/train.py")
    assert not is_installed("train.py")
