"""The OCI image from `scripts/build-image`: a valid image layout whose root filesystem runs shoal as a
non-root user on a read-only root, with no compiler inside, within the size target.

Building needs root (mmdebstrap) and running the root filesystem needs root (chroot, mounts in a private
mount namespace): without them these tests fail with the reason, they never skip. The base layer is
cached by the script, so a warm run rebuilds only shoal's own layer.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
UID = 65532
SIZE_TARGET_BYTES = 250 * 10**6
COMPILERS = ("gcc", "cc", "c++", "g++", "clang", "ld", "as", "cpp", "gfortran", "rustc", "go")


@dataclass(frozen=True)
class Image:
    layout: Path
    archive: Path
    build_seconds: float
    build_log: str

    def blob(self, digest: str) -> Path:
        algo, hexdigest = digest.split(":")
        return self.layout / "blobs" / algo / hexdigest

    def json_blob(self, digest: str) -> Any:
        return json.loads(self.blob(digest).read_bytes())

    def manifest(self) -> dict[str, Any]:
        index = json.loads((self.layout / "index.json").read_text())
        (desc,) = index["manifests"]
        return dict(self.json_blob(desc["digest"]))

    def config(self) -> dict[str, Any]:
        return dict(self.json_blob(self.manifest()["config"]["digest"]))


def _require_root(what: str) -> None:
    if os.geteuid() != 0:
        pytest.fail(f"{what} needs root (mmdebstrap --mode=root, chroot, mounts); run the suite as root "
                    "as CI does", pytrace=False)


@pytest.fixture(scope="session")
def image(tmp_path_factory: pytest.TempPathFactory) -> Image:
    _require_root("building the image")
    out = tmp_path_factory.mktemp("image")
    t0 = time.monotonic()
    res = subprocess.run([str(REPO / "scripts" / "build-image"), "--out", str(out / "layout"),
                          "--docker-archive", str(out / "shoal.tar")], capture_output=True, text=True,
                         timeout=1800)
    if res.returncode != 0:
        pytest.fail(f"scripts/build-image failed ({res.returncode}):\n{res.stderr[-4000:]}", pytrace=False)
    return Image(out / "layout", out / "shoal.tar", time.monotonic() - t0, res.stderr)


@pytest.fixture(scope="session")
def rootfs(image: Image, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The image's layers unpacked in order (as a container runtime would; the layers have no whiteouts)."""
    root = tmp_path_factory.mktemp("rootfs")
    for layer in image.manifest()["layers"]:
        with tarfile.open(image.blob(layer["digest"]), "r:gz") as tar:
            assert not [m.name for m in tar.getmembers() if "/.wh." in f"/{m.name}"], "whiteouts not handled here"
            tar.extractall(root, filter="fully_trusted")  # our own image; device nodes are wanted
    return root


def test_layout_is_a_valid_oci_image(image: Image) -> None:
    assert json.loads((image.layout / "oci-layout").read_text())["imageLayoutVersion"] == "1.0.0"
    manifest = image.manifest()
    assert manifest["schemaVersion"] == 2
    for desc in [manifest["config"], *manifest["layers"]]:
        data = image.blob(desc["digest"]).read_bytes()
        assert len(data) == desc["size"] and f"sha256:{hashlib.sha256(data).hexdigest()}" == desc["digest"]
    config = image.config()
    assert config["os"] == "linux" and config["architecture"] == "amd64"
    assert len(config["rootfs"]["diff_ids"]) == len(manifest["layers"]) == 2


def test_image_runs_shoal_as_a_non_root_user(image: Image, rootfs: Path) -> None:
    cfg = image.config()["config"]
    assert cfg["Entrypoint"] == ["shoal"]
    user = cfg["User"].split(":")[0]
    assert user not in ("", "0", "root") and int(user) == UID
    passwd = (rootfs / "etc" / "passwd").read_text()
    assert f"shoal:x:{UID}:{UID}:" in passwd


def test_no_compiler_inside(rootfs: Path) -> None:
    found = [f"{d}/{c}" for d in ("usr/bin", "usr/local/bin") for c in COMPILERS if (rootfs / d / c).exists()]
    found += [p.name for p in (rootfs / "usr" / "bin").glob("*-linux-gnu-gcc*")]
    assert found == []


def test_image_size_within_target(image: Image, rootfs: Path) -> None:
    files = {(st.st_ino, st.st_size) for p in rootfs.rglob("*")
             if p.is_file() and not p.is_symlink() for st in [p.lstat()]}  # a hard link counts once
    unpacked = sum(size for _, size in files)
    compressed = sum(layer["size"] for layer in image.manifest()["layers"])
    print(f"image: {unpacked / 1e6:.1f} MB unpacked, {compressed / 1e6:.1f} MB compressed; "
          f"build-image took {image.build_seconds:.0f} s")
    assert unpacked <= SIZE_TARGET_BYTES


def test_docker_archive_loads_as_shoal(image: Image) -> None:
    with tarfile.open(image.archive) as tar:
        member = tar.extractfile("manifest.json")
        assert member is not None
        (entry,) = json.loads(member.read())
        version = image.config()["config"]["Labels"]["org.opencontainers.image.version"]
        assert entry["RepoTags"] == [f"docker.io/library/shoal:{version}"]  # `docker load` names it shoal:VERSION
        assert len(entry["Layers"]) == 2


def _run_in_image(rootfs: Path, env: list[str], out_dir: Path, *args: str, timeout: float = 300,
                  entry: str = "shoal") -> subprocess.CompletedProcess[str]:
    """Run the entrypoint with the image's env and user in `rootfs`, as a runtime with a read-only root
    filesystem would: a private mount namespace, the root bind-mounted read-only, `out_dir` as the only
    writable path (/tmp, like the chart's emptyDir)."""
    unshare, chroot = shutil.which("unshare"), shutil.which("chroot")
    assert unshare and chroot, "needs unshare(1) and chroot(8) (util-linux, coreutils)"
    script = ('set -e; r="$ROOT"; mount --bind "$r" "$r"; mount -o remount,bind,ro "$r"; '
              'mount --bind "$OUT" "$r/tmp"; exec env -i "$@"')
    cmd = [unshare, "--mount", "--propagation", "private", "sh", "-c", script, "sh", *env,
           chroot, f"--userspec={UID}:{UID}", str(rootfs), entry, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={"PATH": os.environ.get("PATH", ""), "ROOT": str(rootfs), "OUT": str(out_dir)})


@pytest.fixture
def out_dir(tmp_path: Path) -> Iterator[Path]:
    d = tmp_path / "tmp"
    d.mkdir()
    os.chown(d, UID, UID)
    yield d


def test_version_inside_the_image(image: Image, rootfs: Path, out_dir: Path) -> None:
    _require_root("running the image")
    cfg = image.config()["config"]
    res = _run_in_image(rootfs, cfg["Env"], out_dir, "--version")
    assert res.returncode == 0, res.stderr
    labels = cfg["Labels"]
    assert res.stdout.strip() == (f"shoal {labels['org.opencontainers.image.version']} "
                                  f"(commit {labels['org.opencontainers.image.revision']})")
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert labels["org.opencontainers.image.revision"].removesuffix("+dirty") == head.strip()


def test_simulate_inside_the_image_on_a_read_only_root(image: Image, rootfs: Path, out_dir: Path) -> None:
    _require_root("running the image")
    res = _run_in_image(rootfs, image.config()["config"]["Env"], out_dir, "simulate", "--out", "/tmp/sim")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    produced = sorted(p.name for p in (out_dir / "sim").iterdir())
    assert produced, "shoal simulate wrote nothing"
    assert any(name.endswith(".png") for name in produced), produced  # matplotlib works inside
    # Nothing could be written outside /tmp: the root stayed read-only (a write there fails the run).
    assert all(p.stat().st_uid == UID for p in (out_dir / "sim").iterdir())


# Each compiled module scripts/slim-site strips, used once: a corrupted one fails to load or to compute.
STRIPPED_MODULES_CHECK = """
from shoal.kube.webhook.certs import self_signed
from cryptography import x509
cert, _key = self_signed(["shoal-webhook.shoal-system.svc"])
assert x509.load_pem_x509_certificate(cert).subject
import yaml, kiwisolver, fontTools.misc.bezierTools as bz
assert yaml.load("a: [1, 2]", Loader=yaml.CSafeLoader) == {"a": [1, 2]}
assert kiwisolver.Solver() is not None and bz.calcCubicArcLength((0, 0), (0, 1), (1, 1), (1, 0)) > 1
import matplotlib.ft2font, numpy
assert abs(numpy.linalg.det(numpy.eye(3) * 2) - 8) < 1e-9
print("ok")
"""


def test_stripped_extension_modules_work_inside(image: Image, rootfs: Path, out_dir: Path) -> None:
    _require_root("running the image")
    res = _run_in_image(rootfs, image.config()["config"]["Env"], out_dir, "-c", STRIPPED_MODULES_CHECK,
                        entry="/usr/bin/python3")
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr[-3000:]


def test_build_is_cached_when_inputs_do_not_change(image: Image, tmp_path: Path) -> None:
    """A second build of the same tree reuses the cached base layer and reproduces shoal's layer bit for bit."""
    t0 = time.monotonic()
    res = subprocess.run([str(REPO / "scripts" / "build-image"), "--out", str(tmp_path / "again")],
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    print(f"cached build-image: {time.monotonic() - t0:.0f} s")
    assert "cached in" in res.stderr
    again = Image(tmp_path / "again", tmp_path / "none", 0.0, res.stderr)
    assert [x["digest"] for x in again.manifest()["layers"]] == [x["digest"] for x in image.manifest()["layers"]]


def test_containerfile_matches_build_image() -> None:
    """The Containerfile (for container engines) installs the same Debian packages and runs as the same user
    with the same entrypoint as scripts/build-image; it cannot be built here (no engine), so it is kept in step
    with the script by this check."""
    script = (REPO / "scripts" / "build-image").read_text()
    containerfile = (REPO / "Containerfile").read_text()
    packages = next(line.split("=", 1)[1] for line in script.splitlines() if line.startswith("DEB_PACKAGES="))
    for pkg in packages.split(","):
        assert f" {pkg}" in containerfile, pkg
    assert f"USER {UID}:{UID}" in containerfile and f"UID_GID={UID}" in script
    assert 'ENTRYPOINT ["shoal"]' in containerfile and "--config.entrypoint shoal" in script
    assert "slim-site" in containerfile and "scripts/slim-site" in script
    for env in ("PYTHONDONTWRITEBYTECODE=1", "MPLCONFIGDIR=/tmp/matplotlib", "MPLBACKEND=Agg", "HOME=/tmp"):
        assert env in containerfile and env in script, env
