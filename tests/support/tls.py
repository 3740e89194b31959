"""Real TLS for tests: a CA, server and client certificates made with `cryptography`,
and a TLS proxy (Python's ssl, forwarding bytes) in front of a loopback server that speaks
plaintext, optionally asking for a client certificate."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from govindex.devstack.embedded import free_port

# --- certificates ---------------------------------------------------------------------


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing here


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_pki(folder: Path) -> Pki:
    """A CA, a server certificate for 127.0.0.1 and localhost, a client certificate."""
    now = datetime.datetime.now(datetime.UTC)
    valid = (now - datetime.timedelta(hours=1), now + datetime.timedelta(days=1))

    def ca(cn: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(cn))
            .issuer_name(_name(cn))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(valid[0])
            .not_valid_after(valid[1])
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(True, False, False, False, False, True, True, False, False),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .sign(key, hashes.SHA256())
        )
        return cert, key

    ca_cert, ca_key = ca("govindex test CA")
    other_cert, _ = ca("some other CA")

    def leaf(cn: str, server: bool) -> tuple[bytes, bytes]:
        key = ec.generate_private_key(ec.SECP256R1())
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(valid[0])
            .not_valid_after(valid[1])
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        cert = builder.sign(ca_key, hashes.SHA256())
        return cert.public_bytes(serialization.Encoding.PEM), key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "ca": ca_cert.public_bytes(serialization.Encoding.PEM),
        "other_ca": other_cert.public_bytes(serialization.Encoding.PEM),
    }
    files["server_cert"], files["server_key"] = leaf("localhost", server=True)
    files["client_cert"], files["client_key"] = leaf("govindex-client", server=False)
    for name, data in files.items():
        (folder / f"{name}.pem").write_bytes(data)
    return Pki(**{name: folder / f"{name}.pem" for name in files})


# --- a TLS listener in front of a plaintext server ----------------------------------


@dataclass
class TlsProxy:
    """Terminates TLS on a loopback port and forwards the bytes to `upstream`, in a thread
    of its own (the sync clients block). Records handshake failures and the first bytes
    each connection sent (to see a request's headers)."""

    pki: Pki
    upstream: int
    require_client_cert: bool = False
    port: int = field(default_factory=free_port)
    handshake_errors: list[str] = field(default_factory=list)
    first_bytes: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(self.pki.server_cert, self.pki.server_key)
        if self.require_client_cert:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(self.pki.ca)
        return ctx

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, ssl.SSLError, OSError):
            pass
        finally:
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await writer.start_tls(self.context())
        except (ssl.SSLError, ConnectionError, OSError) as exc:
            self.handshake_errors.append(f"{type(exc).__name__}: {exc}")
            writer.close()
            return
        first = await reader.read(65536)
        if not first:
            writer.close()
            return
        self.first_bytes.append(first)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        up_writer.write(first)
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def main() -> None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
            self._started.set()
            await self._server.serve_forever()

        with contextlib.suppress(asyncio.CancelledError):
            self._loop.run_until_complete(main())

    def start(self) -> TlsProxy:
        self._thread.start()
        assert self._started.wait(10)
        return self

    def stop(self) -> None:
        def cancel() -> None:
            for task in asyncio.all_tasks(self._loop):
                task.cancel()

        self._loop.call_soon_threadsafe(cancel)
        self._thread.join(10)


# --- the broker -----------------------------------------------------------------------
