"""The run's own certificate authority, where a topology offers its agents TLS: a CA made
for the run and a server certificate it signs for the addresses the nodes reach their
fault proxies at (127.0.0.1 live; a docker network's gateway). The proxy terminates the
agent's TLS there — as a load balancer in front of a broker does — so the wire tap still
reads every packet, and the broker behind it is unchanged.

Nothing of it is kept: the keys live in memory (the server's passes through a private
temporary directory, as `ssl` loads a chain only from files) and the nodes are given only
the CA's certificate, in their launch spec.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: how long the certificates are valid around the run's start (a run is minutes long; the
#: hour before absorbs a node clock skewed back by the clock_skew fault)
VALID = datetime.timedelta(days=1)
BEFORE = datetime.timedelta(hours=1)


@dataclass(frozen=True)
class RunCa:
    """The CA's certificate (PEM: what a node verifies the broker with) and the server side
    of TLS for the run's fault proxies."""

    ca_pem: str
    server: ssl.SSLContext


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "a2a-bench"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common)])


def run_ca(hosts: tuple[str, ...]) -> RunCa:
    """A new CA, and a server certificate for `hosts` (IP addresses or names) signed by it."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("a2a-bench run CA")
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - BEFORE).not_valid_after(now + VALID)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, key_cert_sign=True, crl_sign=True,
                                       encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                         critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for h in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            names.append(x509.DNSName(h))
    server = (x509.CertificateBuilder().subject_name(_name(hosts[0])).issuer_name(ca_name)
              .public_key(key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(now - BEFORE).not_valid_after(now + VALID)
              .add_extension(x509.SubjectAlternativeName(names), critical=False)
              .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
              .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                             critical=False)
              .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                  ca_key.public_key()), critical=False)
              .sign(ca_key, hashes.SHA256()))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory(prefix="a2a-bench-tls-") as d:
        chain, secret = Path(d) / "server.pem", Path(d) / "server.key"
        chain.write_bytes(server.public_bytes(serialization.Encoding.PEM))
        secret.touch(0o600)
        secret.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                             serialization.PrivateFormat.PKCS8,
                                             serialization.NoEncryption()))
        context.load_cert_chain(chain, secret)
    return RunCa(ca.public_bytes(serialization.Encoding.PEM).decode(), context)
