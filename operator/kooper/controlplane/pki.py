"""The local control plane's keys and certificates, made with the ``openssl`` command.

One throw-away CA per cluster signs the API server's serving certificate
(loopback addresses and the in-cluster names); the service-account key pair
signs and verifies ServiceAccount tokens. Clients authenticate with bearer
tokens from a static token file (``tokens.csv``), so no client certificates
are needed: the admin (``system:masters``), the controller manager
(``system:kube-controller-manager``) and the kubelet stand-in.
"""

from __future__ import annotations

import dataclasses
import pathlib
import secrets
import shutil
import subprocess

from kooper.core import errors

EC = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1")
SERVING_NAMES = (
    "DNS:localhost", "IP:127.0.0.1", "DNS:kubernetes", "DNS:kubernetes.default",
    "DNS:kubernetes.default.svc", "DNS:kubernetes.default.svc.cluster.local",
)


class PkiError(errors.KooperError):
    """openssl is missing or failed."""


@dataclasses.dataclass(frozen=True, slots=True)
class User:
    """A static-token user of the API server."""

    name: str
    groups: tuple[str, ...]
    token: str


@dataclasses.dataclass(frozen=True, slots=True)
class Pki:
    """Where the files are, and the static-token users."""

    dir: pathlib.Path
    users: dict[str, User]

    @property
    def ca_cert(self) -> pathlib.Path:
        return self.dir / "ca.crt"

    @property
    def serving_cert(self) -> pathlib.Path:
        return self.dir / "apiserver.crt"

    @property
    def serving_key(self) -> pathlib.Path:
        return self.dir / "apiserver.key"

    @property
    def sa_key(self) -> pathlib.Path:
        return self.dir / "sa.key"

    @property
    def sa_pub(self) -> pathlib.Path:
        return self.dir / "sa.pub"

    @property
    def token_file(self) -> pathlib.Path:
        return self.dir / "tokens.csv"

    def token_path(self, user: str) -> pathlib.Path:
        """A file holding one user's bearer token (for ``kooper.sdk.kube.Api``)."""
        return self.dir / f"{user}.token"


def openssl(*args: str, cwd: pathlib.Path) -> None:
    """Run ``openssl`` with ``args`` in ``cwd``; ``PkiError`` naming the step if it fails."""
    if shutil.which("openssl") is None:
        raise PkiError("the local control plane needs the openssl command")
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise PkiError(f"openssl {args[0]}: {done.stderr.strip().splitlines()[-1:]}")


def create(directory: pathlib.Path, *, api_ip: str = "127.0.0.1") -> Pki:
    """Make a new CA, serving certificate (also for ``api_ip``), SA keys and user tokens."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    days = "3650"
    openssl("req", "-x509", *EC, "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
             "-days", days, "-subj", "/CN=kooper-local-ca", cwd=directory)
    openssl("req", "-new", *EC, "-nodes", "-keyout", "apiserver.key", "-out", "apiserver.csr",
             "-subj", "/CN=kube-apiserver",
             "-addext", "subjectAltName=" + ",".join((*SERVING_NAMES, f"IP:{api_ip}")),
             cwd=directory)
    openssl("x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", days, "-copy_extensions", "copy",
             "-out", "apiserver.crt", cwd=directory)
    openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
             "-out", "sa.key", cwd=directory)
    openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=directory)
    users = {
        "admin": User("kooper-admin", ("system:masters",), secrets.token_hex(24)),
        "controller-manager": User("system:kube-controller-manager", (), secrets.token_hex(24)),
        "kubelet": User("kooper-kubelet", ("system:masters",), secrets.token_hex(24)),
    }
    lines = [f'{u.token},{u.name},{u.name},"{",".join(u.groups)}"' for u in users.values()]
    (directory / "tokens.csv").write_text("\n".join(lines) + "\n")
    pki = Pki(dir=directory, users=users)
    for key, user in users.items():
        pki.token_path(key).write_text(user.token)
    return pki
