"""cgroup CPU quota and memory limit: the real budget of a container, which `os.cpu_count()`,
`free` and psutil do not show (they report the host's cores and RAM).

Reads cgroup v2 (``cpu.max``, ``memory.max``) and v1 (``cpu.cfs_quota_us``,
``memory.limit_in_bytes``), including hybrid hosts, walking from this process's cgroup up to
the mount so a limit set on a parent counts. Paths come from /proc/self/cgroup and
/proc/self/mountinfo; ``root`` lets tests point everything at a fake tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

NO_LIMIT = 1 << 62  # v1 writes "unlimited" as a page-rounded LONG_MAX


@dataclass(frozen=True)
class CgroupLimits:
    version: int | None  # 1 or 2 for the controller that answered, None without cgroupfs
    cpu_quota: float | None  # CPUs the quota allows, None when unlimited or unknown
    cpu_source: str | None
    memory_limit: int | None  # bytes, None when unlimited or unknown
    memory_usage: int | None
    memory_source: str | None


@dataclass(frozen=True)
class _Mount:
    root: str
    point: str
    fstype: str
    options: frozenset[str]


def _mounts(mountinfo: str) -> list[_Mount]:
    mounts = []
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        if tail[0] in ("cgroup", "cgroup2"):
            mounts.append(_Mount(fields[3], fields[4], tail[0], frozenset(tail[2].split(","))))
    return mounts


def _memberships(proc_cgroup: str) -> dict[str, str]:
    """controller name → cgroup path; the v2 unified entry is keyed by ""."""
    out: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for name in controllers.split(",") if controllers else [""]:
            out[name] = path
    return out


def _dirs(mount: _Mount, cg_path: str, root: Path) -> list[Path]:
    """This cgroup's directory and its ancestors up to the mount point, leaf first."""
    base = root / mount.point.lstrip("/")
    rel = cg_path
    if mount.root != "/" and cg_path.startswith(mount.root):
        rel = cg_path[len(mount.root) :]
    elif mount.root != "/":
        rel = "/"  # a cgroup namespace: we sit at the mount's root
    leaf = base / rel.lstrip("/")
    if not leaf.is_dir():
        leaf = base
    dirs = [leaf]
    while dirs[-1] != base and base in dirs[-1].parents:
        dirs.append(dirs[-1].parent)
    return dirs


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _cpu_v2(d: Path) -> float | None:
    text = _read(d / "cpu.max")
    if not text:
        return None
    quota, _, period = text.partition(" ")
    q, p = _int(quota), _int(period or "100000")
    return q / p if q is not None and p else None


def _cpu_v1(d: Path) -> float | None:
    q, p = _int(_read(d / "cpu.cfs_quota_us")), _int(_read(d / "cpu.cfs_period_us"))
    return q / p if q is not None and q > 0 and p else None


def _mem_v2(d: Path) -> tuple[int | None, int | None]:
    limit = _int(_read(d / "memory.max"))
    return limit, _int(_read(d / "memory.current"))


def _mem_v1(d: Path) -> tuple[int | None, int | None]:
    limit = _int(_read(d / "memory.limit_in_bytes"))
    if limit is not None and limit >= NO_LIMIT:
        limit = None
    return limit, _int(_read(d / "memory.usage_in_bytes"))


def read_cgroup_limits(proc_cgroup: str, mountinfo: str, root: Path = Path("/")) -> CgroupLimits:
    """The tightest CPU quota and memory limit on the path from this cgroup to the root."""
    mounts = _mounts(mountinfo)
    member = _memberships(proc_cgroup)
    v2 = next((m for m in mounts if m.fstype == "cgroup2"), None)

    def locate(controller: str) -> tuple[int, list[Path]] | None:
        v1 = next((m for m in mounts if m.fstype == "cgroup" and controller in m.options), None)
        if v1 is not None and controller in member:
            return 1, _dirs(v1, member[controller], root)
        if v2 is not None and "" in member:
            return 2, _dirs(v2, member[""], root)
        return None

    version: int | None = None
    cpu: float | None = None
    cpu_src: str | None = None
    found = locate("cpu")
    if found:
        version, dirs = found
        for d in dirs:
            q = (_cpu_v1 if version == 1 else _cpu_v2)(d)
            if q is not None and (cpu is None or q < cpu):
                cpu = q
                cpu_src = str(d / ("cpu.cfs_quota_us" if version == 1 else "cpu.max"))

    mem: int | None = None
    usage: int | None = None
    mem_src: str | None = None
    found = locate("memory")
    if found:
        mversion, dirs = found
        version = version or mversion
        for d in dirs:
            limit, used = (_mem_v1 if mversion == 1 else _mem_v2)(d)
            if limit is not None and (mem is None or limit < mem):
                mem, usage = limit, used
                mem_src = str(d / ("memory.limit_in_bytes" if mversion == 1 else "memory.max"))
    return CgroupLimits(version, cpu, cpu_src, mem, usage, mem_src)


def gather_cgroup(root: Path = Path("/")) -> CgroupLimits:
    """Read this process's cgroup limits (none found off Linux or without cgroupfs)."""
    return limits_of("self", root)


@dataclass(frozen=True)
class Throttling:
    """A cgroup's CPU bandwidth counters (``cpu.stat``), cumulative since it was made."""

    periods: int  # enforcement periods (100 ms each by default) in which the group ran
    throttled: int  # of those, the periods in which it used up its quota and was stopped
    throttled_s: float  # the time its threads spent stopped


def quota_stat_file(quota: float | None, source: str | None) -> Path | None:
    """The ``cpu.stat`` beside the tightest CPU quota (``CgroupLimits.cpu_quota`` and its
    ``cpu_source``): where its throttling is counted (None without a quota: nothing
    throttles)."""
    if quota is None or source is None:
        return None
    return Path(source).parent / "cpu.stat"


def read_throttling(path: Path) -> Throttling | None:
    """cgroup v1 (``throttled_time``, ns) or v2 (``throttled_usec``) counters; None when
    unreadable."""
    text = _read(path)
    if not text:
        return None
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        n = _int(value.strip())
        if n is not None:
            values[key] = n
    periods, throttled = values.get("nr_periods"), values.get("nr_throttled")
    if periods is None or throttled is None:
        return None
    if "throttled_usec" in values:
        seconds = values["throttled_usec"] / 1e6
    elif "throttled_time" in values:
        seconds = values["throttled_time"] / 1e9
    else:
        return None
    return Throttling(periods, throttled, seconds)


def limits_of(pid: int | str, root: Path = Path("/")) -> CgroupLimits:
    """The cgroup limits of a process (``"self"``, or another's: its membership, resolved
    through our mounts)."""
    proc_cgroup = _read(root / f"proc/{pid}/cgroup") or ""
    mountinfo = _read(root / "proc/self/mountinfo") or ""
    return read_cgroup_limits(proc_cgroup, mountinfo, root)
