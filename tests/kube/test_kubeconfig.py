"""Where `shoal run` takes its credentials from: flag, $KUBECONFIG, in-cluster service account, ~/.kube/config."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.kube.client import load_kubeconfig

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: "https://{server}:6443"}}
users:
- name: u
  user: {{token: from-file}}
contexts:
- name: ctx
  context: {{cluster: c, user: u}}
current-context: ctx
"""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("sa-token\n")
    (sa / "ca.crt").write_text("not checked here\n")
    (sa / "namespace").write_text("shoal-system")
    flag = tmp_path / "flag.kubeconfig"
    flag.write_text(KUBECONFIG.format(server="flag.example"))
    env = tmp_path / "env.kubeconfig"
    env.write_text(KUBECONFIG.format(server="env.example"))
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text(KUBECONFIG.format(server="home.example"))
    return {"sa": sa, "flag": flag, "env": env, "home": home}


IN_CLUSTER = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}


@pytest.mark.parametrize(("use_flag", "env_keys", "want"), [
    pytest.param(True, ["KUBECONFIG", "IN_CLUSTER"], "https://flag.example:6443", id="the flag wins over all"),
    pytest.param(False, ["KUBECONFIG", "IN_CLUSTER"], "https://env.example:6443",
                 id="$KUBECONFIG wins over the service account"),
    pytest.param(False, ["IN_CLUSTER"], "https://10.96.0.1:443", id="in-cluster without flag or $KUBECONFIG"),
    pytest.param(False, [], "https://home.example:6443", id="~/.kube/config when not in a pod"),
])
def test_credentials_order(files: dict[str, Path], use_flag: bool, env_keys: list[str], want: str) -> None:
    env = {"HOME": str(files["home"])}
    if "KUBECONFIG" in env_keys:
        env["KUBECONFIG"] = str(files["env"])
    if "IN_CLUSTER" in env_keys:
        env.update(IN_CLUSTER)
    conf = load_kubeconfig(str(files["flag"]) if use_flag else None, environ=env, service_account=files["sa"])
    single = conf.get()
    assert single is not None
    assert single.cluster.server == want


def test_in_cluster_reads_the_token_file(files: dict[str, Path]) -> None:
    """The in-cluster user names the token file, so a rotated token is read again (not frozen at start)."""
    conf = load_kubeconfig(None, environ={"HOME": str(files["home"]), **IN_CLUSTER}, service_account=files["sa"])
    single = conf.get()
    assert single is not None and single.user is not None
    assert single.user.token_file == str(files["sa"] / "token")
    assert single.cluster.certificate_auth == str(files["sa"] / "ca.crt")
    assert single.namespace == "shoal-system"


def test_service_host_without_token_is_not_in_cluster(files: dict[str, Path]) -> None:
    (files["sa"] / "token").unlink()
    conf = load_kubeconfig(None, environ={"HOME": str(files["home"]), **IN_CLUSTER}, service_account=files["sa"])
    single = conf.get()
    assert single is not None
    assert single.cluster.server == "https://home.example:6443"
